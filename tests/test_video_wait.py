"""`panio video wait` (OCR until a regex matches, OpenCV template match) on the simulated board's screen.

The screen is rendered from the board's video_console and read through the real
capture path (MJPEG over HTTP, OpenCV, the capture daemon, tesseract).
"""

from __future__ import annotations

import json
import os
import subprocess

import cv2
import numpy as np
import pytest

from bench_agent.ops.video import OCR_MARGIN_S
from conftest import PANIO
from jobhelp import wait_polling
from simbench import shell_ready


def test_wait_text_returns_once_a_typed_line_is_on_the_screen(video_bench, video_console):
    shell_ready(video_bench, video_console)
    word = "ready" + "".join("abcdefghkm"[int(d)] for d in str(os.getpid() % 1000))  # letters: OCR misreads 7 as /
    waiter = subprocess.Popen([PANIO, "video", "wait", "board0", "--text", rf"SAYS {word}\b", "--timeout", "60000",
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=video_bench.env,
                              text=True)
    try:
        wait_polling(waiter)  # it has read the screen (no such text yet) and waits for the next frame
        video_bench("hid", "send", "board0", "type", f"echo SAYS {word}")
        video_bench("hid", "send", "board0", "key", "ENTER")
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    r = json.loads(out)
    assert r["match"] == f"SAYS {word}" and f"SAYS {word}" in r["text"] and r["frames"] >= 2
    assert f"hash={r['hash']}" in err


def test_wait_text_in_a_region_prints_the_text_and_times_out_with_22(video_bench, video_console):
    shell_ready(video_bench, video_console)
    video_bench("hid", "send", "board0", "type", "echo region-check")
    video_bench("hid", "send", "board0", "key", "ENTER")
    out = video_bench("video", "wait", "board0", "--text", "region-check", "--timeout", "30000").out
    assert "region-check" in out
    r = video_bench.fails("video", "wait", "board0", "--text", r"NEVER-\d{12}", "--timeout", "1500", code=22)
    assert "no text matching" in r.error["message"] and r.error["frames"] >= 1
    # It waited out its timeout, then at most the frame it was reading (41 s of wall time at load 19, with the CLI
    # start-up: the operation allows OCR_MARGIN_S for the last OCR); the CLI start-up is not the wait's to bound.
    assert 1500 <= r.error["elapsed_ms"] < 1500 + OCR_MARGIN_S * 1000, r.error
    top = video_bench.fails("video", "wait", "board0", "--text", "region-check", "--region", "0,0,800,21",
                      "--timeout", "800", code=22)  # the first row holds no such text
    assert "no text matching" in top.error["message"]


def test_wait_text_within_an_edit_distance_states_the_distance(video_bench, video_console):
    """`--max-distance N` accepts a reading with up to N edits and says how many it took; 0 when exact."""
    shell_ready(video_bench, video_console)
    video_bench("hid", "send", "board0", "type", "echo distancecheck")
    video_bench("hid", "send", "board0", "key", "ENTER")
    video_bench("video", "wait", "board0", "--text", "distancecheck", "--timeout", "30000")
    r = video_bench("video", "wait", "board0", "--text", "distansechek", "--max-distance", "2", "--timeout", "0")
    assert "matched 'distancech" in r.err and "at edit distance 2 (at most 2 allowed)" in r.err
    exact = video_bench("video", "wait", "board0", "--text", "distancecheck", "--max-distance", "2", "--timeout", "0",
                        "--json").json()
    assert exact["distance"] == 0 and exact["max_distance"] == 2 and exact["match"] == "distancecheck"
    far = video_bench.fails("video", "wait", "board0", "--text", "distansechek", "--max-distance", "1",
                            "--timeout", "0", code=22)
    assert "within edit distance 1" in far.error["message"]


def test_wait_image_finds_a_needle_cut_from_a_shot(video_bench, video_console, tmp_path):
    shell_ready(video_bench, video_console)
    full = tmp_path / "full.png"
    video_bench("video", "shot", "board0", "--stable", "--stable-ms", "300", "-o", str(full))
    img = cv2.imread(str(full))
    ys, xs = np.nonzero(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) > 100)  # some lit text to cut around
    x, y = int(xs.min()), int(ys.min())
    cv2.imwrite(str(tmp_path / "needle.png"), img[y:y + 20, x:x + 90])
    r = video_bench("video", "wait", "board0", "--image", str(tmp_path / "needle.png"), "--json", "--timeout", "10000")
    m = r.json()["match"]
    assert (m["x"], m["y"], m["w"], m["h"]) == (x, y, 90, 20) and m["score"] > 0.95
    assert m["logical"] == [round((x + 45) * 32767 / 799), round((y + 10) * 32767 / 524)]
    human = video_bench("video", "wait", "board0", "--image", str(tmp_path / "needle.png"))
    assert f"at {x},{y} (90x20)" in human.out and "centre moveabs" in human.out
    noise = np.random.default_rng(7).integers(0, 255, (30, 30, 3), dtype=np.uint8)
    cv2.imwrite(str(tmp_path / "absent.png"), noise)
    r = video_bench.fails("video", "wait", "board0", "--image", str(tmp_path / "absent.png"), "--timeout", "800",
                          code=22)
    assert "did not appear" in r.error["message"] and r.error["score"] < 0.9


@pytest.mark.parametrize("argv, message", [
    (["--text", "a", "--image", "x.png"], "not allowed with"),
    (["--text", "(unclosed"], "invalid regular expression"),
    (["--image", "/nonexistent/needle.png"], "cannot read the needle"),
    (["--image", os.devnull], "not an image"),
    (["--text", "x", "--timeout", "-1"], "timeout"),
    (["--text", "x", "--threshold", "1.5"], "threshold"),
    (["--text", "x", "--max-distance", "9"], "--max-distance: must be from 0 to 8"),
    (["--text", "x", "--max-distance", "-1"], "--max-distance: must be from 0 to 8"),
])
def test_bad_waits_are_usage_errors(video_bench, argv, message):
    r = video_bench.fails("video", "wait", "board0", *argv, code=2)
    assert message in r.err


def test_video_wait_is_a_job_step(video_bench, video_console, tmp_path):
    shell_ready(video_bench, video_console)
    job = tmp_path / "wait.toml"
    job.write_text('name = "screen"\ntarget = "board0"\n'
                   '[[steps]]\nrun = "hid send board0 type \'echo job-saw-it\'"\n'
                   '[[steps]]\nrun = "hid send board0 key ENTER"\n'
                   '[[steps]]\nrun = "video wait board0 --text job-saw-it --timeout 30000"\n'
                   'expect_output = "job-saw-it"\n')
    video_bench("job", "check", str(job))
    r = video_bench("job", "run", str(job), "--json", timeout=120)
    assert r.json()["result"] == "passed", r.out


def test_screenshots_are_job_artifacts_when_asked_for_and_when_a_step_fails(video_bench, video_console, tmp_path):
    shell_ready(video_bench, video_console)
    job = tmp_path / "shots.toml"
    job.write_text('name = "shots"\ntarget = "board0"\n'
                   '[[steps]]\nrun = "hid send board0 type \'echo shot-one\'"\nscreenshot = true\n'
                   '[[steps]]\nrun = "hid send board0 key ENTER"\n'
                   '[[steps]]\nname = "never there"\nrun = "video wait board0 --text NEVER-THERE --timeout 500"\n')
    r = video_bench("job", "run", str(job), "--json", check=False, timeout=120)
    assert r.code != 0 and r.json()["result"] == "failed"
    job_id = r.json()["id"]
    steps = video_bench("job", "status", str(job_id), "--json").json()["steps"]
    assert [s["status"] for s in steps] == ["pass", "pass", "fail"]
    arts = {a["name"]: a["bytes"] for a in video_bench("job", "artifacts", str(job_id), "--json").json()}
    assert "step-01.png" in arts and "step-03.png" in arts and "step-02.png" not in arts  # asked for, failed
    out = tmp_path / "arts"
    video_bench("job", "artifacts", str(job_id), "--out", str(out))
    for name in ("step-01.png", "step-03.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) == arts[name]
        assert cv2.imread(str(out / name)).shape == (525, 800, 3)
    assert "bytes" in video_bench("job", "artifacts", str(job_id)).out


def test_an_asked_for_screenshot_without_a_capture_daemon_says_why(video_bench, video_console, tmp_path):
    job = tmp_path / "nodaemon.toml"
    job.write_text('target = "board0"\n[[steps]]\nrun = "target show board0"\nscreenshot = true\n')
    video_bench("video", "stop", "board0")
    try:
        video_bench("job", "run", str(job))
    finally:
        video_bench("video", "watch", "board0")
    job_id = max(j["id"] for j in video_bench("job", "list", "--json").json())
    arts = video_bench("job", "artifacts", str(job_id), "--out", str(tmp_path / "a"), "--json").json()
    assert "step-01.png" not in {a["name"] for a in arts}
    assert "no video daemon" in (tmp_path / "a" / "step-01.png.txt").read_text()
