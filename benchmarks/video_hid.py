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
  idle           the capture daemon's CPU over 5 s of a still screen, and QEMU's while it is watched
                 floor: the backend's grab loop alone (same 25 frames/s QMP screendump + decode, no
                 compare/hash/publish) in this process; baseline: QEMU with nobody watching

The kernel comes from scripts/qemu-board-image.sh (or /boot).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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
    from bench_agent.video import channel as video
    from bench_agent.video.backends.qmp import QmpBackend

    qemu.start(directory, "q")
    cam, end = QmpBackend(str(directory / "q.video.qmp")), time.monotonic() + 120
    while time.monotonic() < end and "Type here" not in video.ocr(cam.grab(1)):
        time.sleep(1)
    cam.close()


def daemon(state: Path, directory: Path) -> subprocess.Popen:
    os.environ["PANIO_STATE_DIR"] = str(state)
    cfg = json.dumps({"device": f"qmp:{directory / 'q.video.qmp'}"})
    proc = subprocess.Popen([sys.executable, "-m", "bench_agent.video.daemon", "--state-dir", str(state),
                             "--target", "q", "--config", cfg], stdout=subprocess.PIPE)
    proc.stdout.readline()
    return proc


def bench_changed_since(directory: Path, rounds: int) -> dict:
    from bench_agent.hid import channel as hid
    from bench_agent.ops import video as vops
    from bench_agent.qmp import QMPClient
    from bench_agent.video import channel as video

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

    from bench_agent.ops import video as vops
    from bench_agent.video import channel as video
    from bench_agent.video.base import decode_image

    frame = decode_image(base64.b64decode(vops.shot("q", stable=True, stable_ms=300,
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
    from bench_agent.hid import channel as hid

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


IDLE_S = 5.0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percent(cpu: float, seconds: float) -> float:
    return round(cpu / seconds * 100, 1)


def grabs(state: Path) -> int:
    return json.loads((state / "video" / "q" / "frame.json").read_text())["grabs"]


def bench_idle(directory: Path, state: Path, daemon_pid: int, qemu_pid: int) -> dict:
    """The daemon on a still screen beside the bare grab loop it is built on, and QEMU's share of both."""
    from bench_agent.video.backends.qmp import QmpBackend

    d0, q0, g0 = cpu_s(daemon_pid), cpu_s(qemu_pid), grabs(state)
    time.sleep(IDLE_S)
    d1, q1, g1 = cpu_s(daemon_pid), cpu_s(qemu_pid), grabs(state)
    os.kill(daemon_pid, signal.SIGSTOP)  # the floor runs alone: the daemon must not grab meanwhile
    try:
        cam, n = QmpBackend(str(directory / "q.power.qmp")), 0  # QEMU's QMP takes one client: the daemon holds video
        c0, q2, end = time.process_time(), cpu_s(qemu_pid), time.monotonic() + IDLE_S
        while time.monotonic() < end:
            cam.grab(1)
            n += 1
        c1, q3 = time.process_time(), cpu_s(qemu_pid)
        cam.close()
        time.sleep(0.5)
        q4 = cpu_s(qemu_pid)
        time.sleep(IDLE_S)
        q5 = cpu_s(qemu_pid)
    finally:
        os.kill(daemon_pid, signal.SIGCONT)
    return {"idle_daemon_cpu_percent": percent(d1 - d0, IDLE_S), "idle_daemon_grabs_per_s": round((g1 - g0) / IDLE_S, 1),
            "idle_daemon_cpu_ms_per_grab": round((d1 - d0) * 1000 / max(1, g1 - g0), 2),
            "idle_qemu_cpu_percent_watched": percent(q1 - q0, IDLE_S),
            "idle_floor_cpu_percent": percent(c1 - c0, IDLE_S), "idle_floor_grabs_per_s": round(n / IDLE_S, 1),
            "idle_floor_cpu_ms_per_grab": round((c1 - c0) * 1000 / max(1, n), 2),
            "idle_qemu_cpu_percent_floor": percent(q3 - q2, IDLE_S),
            "idle_qemu_cpu_percent_unwatched": percent(q5 - q4, IDLE_S)}


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
            out.update(bench_idle(directory, directory / "state", proc.pid, qemu.running_pid(directory, "q")))
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
    print(f"{'idle: CPU (% of a core)':40} {out['idle_daemon_cpu_percent']:>16} {out['idle_floor_cpu_percent']:>16}"
          f"   ratio {out['idle_daemon_cpu_percent'] / max(out['idle_floor_cpu_percent'], 0.1):.2f}")
    print(f"{'idle: CPU per grab (ms)':40} {out['idle_daemon_cpu_ms_per_grab']:>16} "
          f"{out['idle_floor_cpu_ms_per_grab']:>16}")
    print(f"{'idle: grabs/s':40} {out['idle_daemon_grabs_per_s']:>16} {out['idle_floor_grabs_per_s']:>16}")
    print(f"{'idle: QEMU CPU % (watched, floor, alone)':40} {out['idle_qemu_cpu_percent_watched']:>16} "
          f"{out['idle_qemu_cpu_percent_floor']:>16} {out['idle_qemu_cpu_percent_unwatched']:>8}")


if __name__ == "__main__":
    main()
