"""Serial status benchmark: `panio serial status` on a small log and on a full log of tiny records.

    .venv/bin/python benchmarks/serial_status.py [--rounds 9] [--segment-mib 32] [--json]

Builds two logs with panio's own writer (``LogWriter``, what the capture
supervisor uses): a small one (a boot's worth of records) and a full one, two
segments of ``--segment-mib`` each (the default keeps two of 32 MiB: 64 MiB)
filled with 4-byte records (what a chatty board printing ``ok`` lines leaves),
an outage and its reconnection every 50,000 records. In the same run:

  status small    `panio serial status` (the CLI, process start included) on the small log
  status full     the same on the full log: its cost should not grow with the log
  status old      the same on the full log with the gap sidecars removed, which is
                  what the status cost before them (and costs on a log of older panio
                  until the next `serial watch` repairs it): a walk of every record
  count / walk    the gap count alone, in-process: sidecars vs the old whole-log walk

Runs alternate between the cases, so a busy machine slows all of them; each
prints its median and its ratio to "status small". Also printed: what the next
writer start costs once on a log of older panio (it walks the log to write the
sidecars).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_agent.serial.logstore import (DATA, GAP, LogWriter, count_outages, gaps_path,  # noqa: E402
                                         records_backward, segments)

PANIO = str(Path(sys.executable).parent / "panio")


def old_walk(path: Path) -> int:
    """The gap count as `serial status` made it before the sidecars."""
    return sum(1 for rec in records_backward(path) if rec.kind == GAP and not rec.note().get("reconnected"))


def fill(path: Path, records: int | None, segment_bytes: int) -> int:
    w = LogWriter(path, segment_bytes=segment_bytes, keep=2)
    n, t = 0, time.time_ns()
    while records is None or n < records:
        if records is None and len(segments(path)) == 2 and w._size + 48 > segment_bytes:
            break  # two full segments: the next record would evict the oldest
        n += 1
        w.append(DATA, 1, b"ok\r\n", t + n)
        if n % 50_000 == 0:
            w.note(GAP, 1, t + n, reason="device lost: benchmark")
            w.note(GAP, 1, t + n, reason="reconnected", reconnected=True, down_ms=1)
    w.close()
    return n


def status_s(env: dict[str, str], target: str) -> float:
    began = time.perf_counter()
    r = subprocess.run([PANIO, "serial", "status", target], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - began
    assert r.returncode == 10, r.stderr  # 10: no capture running; the JSON is printed all the same
    json.loads(r.stdout)
    return elapsed


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--segment-mib", type=int, default=32)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="panio-status-bench-"))
    try:
        return run(tmp, a)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path, a) -> int:
    env = {**os.environ, "PANIO_LAB": str(tmp / "lab.toml"), "PANIO_STATE_DIR": str(tmp / "state"),
           "HOME": str(tmp)}
    for args in (["init"], ["target", "add", "small"], ["target", "add", "full"],
                 ["serial", "add", "console", "-t", "small", "--device", str(tmp / "ttyNONE")],
                 ["serial", "add", "console", "-t", "full", "--device", str(tmp / "ttyNONE")]):
        subprocess.run([PANIO, *args], env=env, check=True, capture_output=True)
    from bench_agent.paths import lab_key_of

    lab_state = tmp / "state" / "labs" / lab_key_of(str(tmp / "lab.toml"))  # docs/state.md
    small, full = (lab_state / "serial" / t / "console.log" for t in ("small", "full"))
    full.parent.mkdir(parents=True)
    small.parent.mkdir(parents=True)
    fill(small, 500, a.segment_mib << 20)
    began = time.perf_counter()
    n = fill(full, None, a.segment_mib << 20)
    fill_s = time.perf_counter() - began
    size = sum(s.stat().st_size for s in segments(full))
    assert count_outages(full) == old_walk(full) > 0

    marks = {s: gaps_path(s).read_bytes() for s in segments(full)}
    runs: dict[str, list[float]] = {k: [] for k in ("status small", "status full", "status old", "count", "walk")}
    for i in range(a.rounds):
        runs["status small"].append(status_s(env, "small"))
        runs["status full"].append(status_s(env, "full"))
        runs["count"].append(timed(lambda: count_outages(full)))
        if i < max(3, a.rounds // 3):  # seconds each: fewer rounds
            for s in marks:
                gaps_path(s).unlink()
            runs["status old"].append(status_s(env, "full"))
            runs["walk"].append(timed(lambda: old_walk(full)))
            for s, text in marks.items():
                gaps_path(s).write_bytes(text)
    for s in marks:
        gaps_path(s).unlink()
    repair_s = timed(lambda: LogWriter(full, segment_bytes=a.segment_mib << 20, keep=2).close())
    assert all(gaps_path(s).read_bytes() == text for s, text in marks.items())

    med = {k: statistics.median(v) for k, v in runs.items()}
    report = {"full_log": {"bytes": size, "records": n, "fill_s": round(fill_s, 1)},
              "median_s": {k: round(v, 5) for k, v in med.items()},
              "ratio_to_status_small": {k: round(med[k] / med["status small"], 2) for k in med},
              "old_over_new": {"status": round(med["status old"] / med["status full"], 1),
                               "count": round(med["walk"] / med["count"], 1)},
              "legacy_repair_s": round(repair_s, 2)}
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"full log: {size / (1 << 20):.1f} MiB, {n:,} data records (written in {fill_s:.1f} s)")
    print(f"{'case':<14} {'median':>10} {'x status small':>15}")
    for k, v in med.items():
        print(f"{k:<14} {v * 1000:>8.2f} ms {v / med['status small']:>15.2f}")
    print(f"status on the full log: old / new = {report['old_over_new']['status']}x; "
          f"gap count alone: walk / sidecars = {report['old_over_new']['count']}x")
    print(f"one-time repair by the next writer on a log of older panio: {repair_s:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
