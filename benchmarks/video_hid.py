"""Video and HID benchmark on the QEMU board: each panio path beside its floor, measured in the same run.

    .venv/bin/python benchmarks/video_hid.py [--rounds 10] [--json]

Boots the QEMU board (bench_agent.sim.qemu, a real kernel under TCG) in a
temporary directory and starts the real capture daemon (`video watch`), then:

  screendump     floor: one QMP screendump (PPM) and decode, the daemon's unit of work
  changed-since  a key typed through QMP -> `video.shot --changed-since` returns
                 floor: the same key -> the first screendump that differs (polled back to back)
  ocr            `video read`'s OCR of a full screen and of one row (grey, upscale, Otsu, psm 6/7)
                 floor: tesseract alone on the raw frame (no preprocessing)
  typing         characters/s through `hid send ... type` (paced 20 ms) vs unpaced input-send-event
  idle           the capture daemon's CPU over 5 s of a still screen

The kernel comes from scripts/qemu-board-image.sh (or /boot).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_THREAD_LIMIT", "1")


def ms(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(samples) * 1000, 1), "max_ms": round(max(samples) * 1000, 1)}


def boot(directory: Path) -> None:
    from bench_agent.sim import qemu
    from bench_agent.video_backends.qmp import QmpBackend
    from bench_agent import video

    qemu.start(directory, "q")
    cam, end = QmpBackend(str(directory / "q.video.qmp")), time.monotonic() + 120
    while time.monotonic() < end and "Type here" not in video.ocr(cam.grab(1)):
        time.sleep(1)
    cam.close()


def daemon(state: Path, directory: Path) -> subprocess.Popen:
    os.environ["PANIO_STATE_DIR"] = str(state)
    cfg = json.dumps({"device": f"qmp:{directory / 'q.video.qmp'}"})
    proc = subprocess.Popen([sys.executable, "-m", "bench_agent.video_watch", "--state-dir", str(state),
                             "--target", "q", "--config", cfg], stdout=subprocess.PIPE)
    proc.stdout.readline()
    return proc


def bench_changed_since(directory: Path, rounds: int) -> dict:
    from bench_agent import hid, video
    from bench_agent.ops import video as vops
    from bench_agent.qmp import QMPClient

    keys = hid.open_backend({"device": str(directory / "q.hid.qmp"), "protocol": "qmp"})
    drv = hid.Driver(keys, 10)
    panio, floor, dumps = [], [], []
    cam = QMPClient(str(directory / "q.power.qmp"))
    ppm = str(directory / "floor.ppm")
    import cv2

    def dump():
        t = time.monotonic()
        cam.execute("screendump", filename=ppm)
        frame = cv2.imread(ppm)
        dumps.append(time.monotonic() - t)
        return video.grey(frame)

    for i in range(rounds):
        h = vops.wait_frame("q", None, True, 300, 10000)["hash"]
        t = time.monotonic()
        drv.tap(*hid.parse_combo("x"))
        vops.wait_frame("q", h, False, 0, 10000)
        panio.append(time.monotonic() - t)
        before = dump()
        t = time.monotonic()
        drv.tap(*hid.parse_combo("y"))
        while video.changed_px(before, dump()) <= video.MIN_CHANGED_PX:
            pass
        floor.append(time.monotonic() - t)
    drv.tap(*hid.parse_combo("ctrl+u"))
    keys.close()
    cam.close()
    return {"screendump": ms(dumps), "changed_since": ms(panio), "changed_since_floor": ms(floor)}


def bench_ocr(directory: Path, rounds: int) -> dict:
    import base64

    import pytesseract

    from bench_agent import video
    from bench_agent.ops import video as vops

    frame = video.decode_image(base64.b64decode(vops.shot("q", stable=True, stable_ms=300,
                                                          timeout_ms=10000)["png_b64"]))
    row = (0, 0, frame.shape[1], 16)

    def timed(fn) -> list[float]:
        out = []
        for _ in range(rounds):
            t = time.monotonic()
            fn()
            out.append(time.monotonic() - t)
        return out

    return {"ocr_full": ms(timed(lambda: video.ocr(frame))),
            "ocr_full_floor_raw_tesseract": ms(timed(lambda: pytesseract.image_to_string(frame))),
            "ocr_row": ms(timed(lambda: video.ocr(frame, row))),
            "ocr_row_floor_raw_tesseract": ms(timed(lambda: pytesseract.image_to_string(video.crop(frame, row),
                                                                                        config="--psm 7")))}


def bench_typing(directory: Path) -> dict:
    from bench_agent import hid

    text = "echo abcdefghijklmnopqrstuvwxyz0123456789"
    keys = hid.open_backend({"device": str(directory / "q.hid.qmp"), "protocol": "qmp"})
    t = time.monotonic()
    hid.Driver(keys, hid.DEFAULT_PACE_MS).type_text(text)
    paced = len(text) / (time.monotonic() - t)
    hid.Driver(keys).tap(*hid.parse_combo("ctrl+u"))
    t = time.monotonic()
    for ch in text:
        mods, usage = hid.char_report(ch)
        keys.report(mods, [usage])
        keys.report(0, [])
    unpaced = len(text) / (time.monotonic() - t)
    hid.Driver(keys).tap(*hid.parse_combo("ctrl+u"))
    keys.close()
    return {"typing_chars_per_s": round(paced, 1), "typing_floor_unpaced_chars_per_s": round(unpaced, 1)}


def idle_cpu(pid: int, seconds: float = 5.0) -> float:
    def ticks() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    before = ticks()
    time.sleep(seconds)
    return round((ticks() - before) / os.sysconf("SC_CLK_TCK") / seconds * 100, 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    from bench_agent.sim import qemu

    with tempfile.TemporaryDirectory(prefix="panio-bench-") as tmp:
        directory, proc = Path(tmp), None
        try:
            boot(directory)
            proc = daemon(directory / "state", directory)
            out = bench_changed_since(directory, a.rounds)
            out.update(bench_ocr(directory, max(3, a.rounds // 2)))
            out.update(bench_typing(directory))
            out["video_daemon_idle_cpu_percent"] = idle_cpu(proc.pid)
        finally:
            if proc:
                proc.terminate()
                proc.wait(10)
            qemu.stop(directory, "q")
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{'measure':40} {'panio':>16} {'floor':>16}")
    for name, floor in (("changed_since", "changed_since_floor"), ("ocr_full", "ocr_full_floor_raw_tesseract"),
                        ("ocr_row", "ocr_row_floor_raw_tesseract")):
        print(f"{name + ' p50 (ms)':40} {out[name]['p50_ms']:>16} {out[floor]['p50_ms']:>16}"
              f"   ratio {out[name]['p50_ms'] / max(out[floor]['p50_ms'], 0.1):.2f}")
    print(f"{'screendump p50 (ms)':40} {out['screendump']['p50_ms']:>16}")
    print(f"{'typing (chars/s)':40} {out['typing_chars_per_s']:>16} {out['typing_floor_unpaced_chars_per_s']:>16}")
    print(f"{'video daemon idle CPU (% of a core)':40} {out['video_daemon_idle_cpu_percent']:>16}")


if __name__ == "__main__":
    main()
