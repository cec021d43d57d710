"""An Android target's console and screen against adb's own one-shot commands, side by side in one run.

    .venv/bin/python benchmarks/adb.py [--rounds 30] [--json]

Starts Debian's adb server on a private port and the simulated Android device (bench_agent/sim/android.py),
then alternates the two sides of each figure (ABAB):

  transact   ``serial.transact`` of ``echo x`` on the capture's kept adb shell, through the operation registry
             in-process (as a job step or an MCP tool call runs it)
             vs ``adb -s SERIAL shell echo x`` (a new adb process per command).      Goal: <= 0.5x
  shot       ``video.shot --changed-since`` the last frame (the capture daemon polling screencap every 50 ms):
             a fresh frame, as PNG
             vs ``adb -s SERIAL exec-out screencap -p`` alone.                        Goal: <= 1.2x

The panio CLI's own start-up (tens of ms) is not part of either figure: benchmarks/startup.py measures it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import emit, paired, row  # noqa: E402

PROMPT = r"panio_sim:/ \$ "


def timed(func) -> float:
    t = time.perf_counter()
    func()
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PANIO_STATE_DIR"] = tmp
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from adbhelp import adb_server, android

        with adb_server() as port, android(Path(tmp) / "sim", "tab", "1080x1920") as dev:
            os.environ["ANDROID_ADB_SERVER_PORT"] = str(port)
            rows = measure(dev["serial"], a.rounds)
    emit(__file__, rows, a.json)


def measure(serial: str, rounds: int) -> list[dict]:
    from bench_agent import ops

    iface = {"name": "console", "device": f"adb://{serial}"}
    ops.call("serial.watch", {"target": "tab", "interfaces": [iface]})
    ops.call("video.watch", {"target": "tab", "video": {"device": f"adb:{serial}", "poll_ms": 50}})
    try:
        ops.call("serial.transact", {"target": "tab", "iface": iface, "text": "echo warm", "until": r"\nwarm",
                                     "timeout_ms": 20000})  # the shell is up (its first prompt came before)
        transact = {"target": "tab", "iface": iface, "text": "echo x", "until": PROMPT, "timeout_ms": 10000}

        def one_shot() -> None:
            subprocess.run(["adb", "-s", serial, "shell", "echo", "x"], check=True, capture_output=True)

        rows = [row("serial transact on adb (kept shell) / adb shell one-shot",
                    paired(lambda: timed(one_shot), lambda: timed(lambda: ops.call("serial.transact", transact)),
                           rounds), "<=", 0.5, unit="ms", scale=1000)]
        last = {"hash": ops.call("video.shot", {"target": "tab", "timeout_ms": 20000})["hash"]}

        def screencap() -> None:
            subprocess.run(["adb", "-s", serial, "exec-out", "screencap", "-p"], check=True, capture_output=True)

        def shot() -> None:  # a frame newer than the last: the screen changes between shots
            subprocess.run(["adb", "-s", serial, "shell", "input", "text", f"n{time.monotonic_ns() % 997}"],
                           check=True, capture_output=True)
            t = time.perf_counter()
            last["hash"] = ops.call("video.shot", {"target": "tab", "changed_since": last["hash"],
                                                   "timeout_ms": 10000})["hash"]
            return time.perf_counter() - t

        def screencap_after_input() -> float:
            subprocess.run(["adb", "-s", serial, "shell", "input", "text", f"n{time.monotonic_ns() % 997}"],
                           check=True, capture_output=True)
            return timed(screencap)

        rows.append(row("video shot on adb (fresh frame) / adb exec-out screencap -p",
                        paired(screencap_after_input, shot, rounds), "<=", 1.2, unit="ms", scale=1000))
        return rows
    finally:
        ops.call("serial.stop", {"target": "tab"})
        ops.call("video.stop", {"target": "tab"})


if __name__ == "__main__":
    sys.exit(main())
