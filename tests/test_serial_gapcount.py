"""`serial status`'s gap count from the per-segment sidecars equals the old whole-log walk, crashes included."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench_agent.serial import logstore
from bench_agent.serial.logstore import (DATA, GAP, START, STOP, LogWriter, count_outages, gaps_path,
                                         records_backward, segments)
from bench_agent.sim.console import PROMPT
from serial_fixtures import at_shell_after_plug, kill_and_reap, plug_console


def old_walk(path: Path) -> int:
    """The count as `serial status` made it before the sidecars: every record of the log, newest first."""
    return sum(1 for rec in records_backward(path) if rec.kind == GAP and not rec.note().get("reconnected"))


def sidecars_hold(path: Path) -> bool:
    """Every segment's count comes from its sidecar (an empty segment, just opened, has nothing to count)."""
    return all(logstore._sidecar_count(seg) is not None for seg in segments(path))


def with_records(path: Path) -> list[Path]:
    return [seg for seg in segments(path) if seg.stat().st_size]


def outage(w: LogWriter, t: int, reconnected: bool = False) -> None:
    fields = {"reconnected": True, "down_ms": 5} if reconnected else {}
    w.note(GAP, 1, t, reason="device lost: test" if not reconnected else "reconnected", **fields)


def test_rotation_evicts_a_segment_with_gaps_and_the_count_follows(tmp_path):
    path = tmp_path / "console.log"
    w = LogWriter(path, segment_bytes=2048, keep=2)
    outage(w, 1)
    outage(w, 2, reconnected=True)
    outage(w, 3)
    counts = []
    for i in range(120):
        w.append(DATA, 1, b"line %04d\r\n" % i, 10 + i)
        assert count_outages(path) == old_walk(path) and sidecars_hold(path)
        counts.append(count_outages(path))
    w.close()
    assert counts[0] == 2 and counts[-1] == 0 and len(segments(path)) == 2  # both outages went with their segment
    assert sorted(p.name for p in tmp_path.iterdir()) == ["console.log", "console.log.1", "console.log.1.gaps",
                                                          "console.log.gaps"]


def test_the_count_comes_from_the_sidecars_not_a_walk(tmp_path, monkeypatch):
    path = tmp_path / "console.log"
    w = LogWriter(path, segment_bytes=4096, keep=2)
    for i in range(200):
        w.append(DATA, 1, b"x" * 20, i)
        if i % 50 == 7:
            outage(w, i)
            outage(w, i, reconnected=True)
    w.close()
    expected = old_walk(path)
    assert expected > 0
    monkeypatch.setattr(logstore, "walk_outages", lambda seg: pytest.fail(f"walked {seg}"))
    assert count_outages(path) == expected


def test_a_log_of_older_panio_is_walked_then_repaired_by_the_next_writer(tmp_path, monkeypatch):
    path = tmp_path / "console.log"
    w = LogWriter(path, segment_bytes=2048, keep=2)
    for i in range(60):
        w.append(DATA, 1, b"line %04d\r\n" % i, i)
        if i in (40, 55):
            outage(w, i)
    w.close()
    for seg in segments(path):
        gaps_path(seg).unlink()  # what the old code left: segments only
    expected = old_walk(path)
    assert expected == 2 and count_outages(path) == expected and not sidecars_hold(path)
    LogWriter(path, segment_bytes=2048, keep=2).close()
    assert sidecars_hold(path)
    monkeypatch.setattr(logstore, "walk_outages", lambda seg: pytest.fail(f"walked {seg}"))
    assert count_outages(path) == expected


@pytest.mark.parametrize("damage", ["torn", "empty", "not json", "other segment's"])
def test_a_damaged_or_misplaced_sidecar_is_detected_and_walked(tmp_path, damage):
    path = tmp_path / "console.log"
    w = LogWriter(path, segment_bytes=2048, keep=2)
    for i in range(80):
        w.append(DATA, 1, b"line %04d\r\n" % i, i)
        if i in (50, 60, 75):
            outage(w, i)
    w.close()
    older, current = segments(path)
    assert old_walk(path) == 3 and [logstore.walk_outages(seg) for seg in (older, current)] == [2, 1]
    text = gaps_path(current).read_text()
    changed = {"torn": text[:len(text) // 2], "empty": "", "not json": "PL\x00",
               "other segment's": gaps_path(older).read_text()}[damage]
    gaps_path(current).write_text(changed)
    assert logstore._sidecar_count(current) is None and count_outages(path) == old_walk(path) == 3
    LogWriter(path, segment_bytes=2048, keep=2).close()
    assert sidecars_hold(path) and count_outages(path) == 3


def test_a_sidecar_of_a_segment_without_gaps_is_not_believed_for_another(tmp_path):
    """A crash mid-rotation can leave a segment's sidecar beside another: "no outage" must not pass for it."""
    path = tmp_path / "console.log"
    w = LogWriter(path, segment_bytes=2048, keep=2)
    for i in range(70):
        w.append(DATA, 1, b"line %04d\r\n" % i, i)
    outage(w, 70)
    w.close()
    older, current = segments(path)
    assert [logstore.walk_outages(seg) for seg in (older, current)] == [0, 1]
    gaps_path(current).write_bytes(gaps_path(older).read_bytes())
    assert logstore._sidecar_count(current) is None and count_outages(path) == old_walk(path) == 1


def test_killed_between_the_sidecar_and_its_record(tmp_path):
    """The sidecar is written first, so it claims a gap that is not on disk: the reader walks; the restart repairs."""
    path = tmp_path / "console.log"
    w = LogWriter(path)
    w.append(DATA, 1, b"boot\r\n", 1)
    rec = logstore.Record(GAP, 1, w.cursor, w.seq, w.col, 2, json.dumps({"reason": "device lost: x"}).encode())
    w._mark_before(GAP, rec.payload, rec.parts()[0], len(rec.encode()))  # ... and then kill -9, before the write
    assert json.loads(gaps_path(path).read_text())["count"] == 1
    assert count_outages(path) == old_walk(path) == 0
    with open(path, "ab") as f:
        f.write(rec.encode()[:30])  # or the record itself was cut short
    assert count_outages(path) == old_walk(path) == 0
    w = LogWriter(path)  # the restart truncates the torn record and repairs the sidecar
    assert sidecars_hold(path) and count_outages(path) == 0
    w.note(GAP, 2, 3, reason="capture epoch 1 ended without a clean stop")
    assert count_outages(path) == old_walk(path) == 1 and sidecars_hold(path)


CHILD = r"""
import json, sys, time
from pathlib import Path
from bench_agent.serial.logstore import DATA, GAP, START, STOP, LogWriter
w = LogWriter(Path(sys.argv[1]), segment_bytes=1500, keep=2)
epoch = int(sys.argv[2])
if w.last is not None and w.last.kind != STOP:
    w.note(GAP, epoch, time.time_ns(), reason="capture epoch ended without a clean stop")
w.note(START, epoch, time.time_ns())
print("ready", flush=True)
i = 0
while True:
    i += 1
    w.append(DATA, epoch, b"%d\r\n" % i, time.time_ns())
    if i % 3 == 0:
        w.note(GAP, epoch, time.time_ns(), reason="device lost: flapping")
    if i % 3 == 1:
        w.note(GAP, epoch, time.time_ns(), reason="reconnected", reconnected=True, down_ms=1)
"""


def test_kill_9_at_random_moments_never_leaves_a_wrong_count(tmp_path):
    """A real writer process, rotating every few records and writing gaps all the time, killed with SIGKILL."""
    path = tmp_path / "console.log"
    rng = random.Random(7)  # the moments differ from run to run all the same: the machine decides
    for epoch in range(1, 41):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(epoch)], stdout=subprocess.PIPE,
                                 cwd=Path(__file__).resolve().parents[1])
        assert child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0, 0.03))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        child.stdout.close()
        assert count_outages(path) == old_walk(path), f"after kill {epoch}"  # torn tail and all, before a restart
    LogWriter(path, segment_bytes=1500, keep=2).close()
    assert sidecars_hold(path) and count_outages(path) == old_walk(path) > 0
    names = {p.name for p in tmp_path.iterdir()}  # no stray sidecar or temp file survives the last start
    assert names == {seg.name for seg in segments(path)} | {gaps_path(seg).name for seg in with_records(path)}, names


# -- the supervisor on a simulated board (a real PTY) --------------------------------------------------------


def test_status_count_through_stops_kills_unplugs_and_eviction(bench, panio, tmp_path):
    panio.env["PANIO_SERIAL_SEGMENT_BYTES"] = str(64 * 1024)  # the supervisor inherits it
    link = tmp_path / "ttyGAPS"
    log = bench.state / "serial" / "pico" / "console.log"

    def until(state: str) -> None:
        deadline = time.monotonic() + 60
        while bench.status("pico")["port"]["state"] != state and time.monotonic() < deadline:
            time.sleep(0.05)

    def counted(expected: int) -> None:
        st = bench.status("pico")
        assert st["log"]["gaps_recorded"] == old_walk(log) == expected, st["log"]
        assert sidecars_hold(log)

    board = plug_console(link)
    try:
        panio("target", "add", "pico")
        panio("serial", "add", "console", "-t", "pico", "--device", str(link))
        panio("serial", "watch", "pico")
        panio("serial", "transact", "pico", "", "--until", PROMPT, "--timeout-ms", "5000")
        counted(0)
        panio("serial", "stop", "pico")  # a clean stop is no gap
        counted(0)
        panio("serial", "watch", "pico")
        counted(0)
        pid = bench.discovery("pico")["pid"]
        os.kill(pid, signal.SIGKILL)
        kill_and_reap(pid)
        assert bench.status("pico")["log"]["gaps_recorded"] == old_walk(log) == 0
        panio("serial", "watch", "pico")  # the restart records the gap
        counted(1)
        board.terminate()
        board.wait(10)
        until("disconnected")
        counted(2)
        board = plug_console(link)
        until("open")
        at_shell_after_plug(panio, "pico")
        kinds = [(r.kind, bool(r.note().get("reconnected"))) for r in records_backward(log) if r.kind == GAP]
        assert kinds == [(GAP, True), (GAP, False), (GAP, False)]  # newest first: reconnected, lost, restart
        counted(2)  # the reconnection closes the outage, it is not a second one
        panio("serial", "stop", "pico")
        for seg in segments(log):
            gaps_path(seg).unlink()  # as a log of older panio is: segments only
        assert bench.status("pico")["log"]["gaps_recorded"] == old_walk(log) == 2 and not sidecars_hold(log)
        panio("serial", "watch", "pico")  # the next start repairs them
        counted(2)
        panio("serial", "send", "pico", "flood 200000")  # fills more than the two kept 64 KiB segments
        deadline = time.monotonic() + 30
        while old_walk(log) and time.monotonic() < deadline:
            time.sleep(0.1)
        counted(0)
        assert not any(r.kind in (START, STOP) and r.epoch < bench.status("pico")["epoch"]
                       for r in records_backward(log))  # the segments that held the gaps are gone
    finally:
        board.terminate()
        board.wait(10)
        link.unlink(missing_ok=True)


def test_a_segment_killed_before_its_first_record_counts_nothing_and_keeps_no_sidecar(tmp_path):
    """A kill -9 after rotation opened the new segment and wrote its sidecar, before the first record."""
    path = tmp_path / "console.log"
    w = LogWriter(path, segment_bytes=200, keep=2)
    while not segments(path)[0].name.endswith(".1"):
        outage(w, 1)
    rec = logstore.Record(DATA, 1, w.cursor, w.seq, w.col, 9, b"x" * 300)
    w._rotate()
    w._mark_before(DATA, rec.payload, rec.parts()[0], len(rec.encode()))  # ... then SIGKILL: an empty segment beside its sidecar
    assert path.stat().st_size == 0 and gaps_path(path).exists()
    assert count_outages(path) == old_walk(path)
    LogWriter(path, segment_bytes=200, keep=2).close()
    assert not gaps_path(path).exists() and sidecars_hold(path) and count_outages(path) == old_walk(path)
