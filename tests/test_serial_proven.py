"""The capture guarantees, proven on real PTYs and processes: no byte lost, crash and unplug survived."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from bench_agent.serial.lines import advance
from bench_agent.serial.logstore import DATA, GAP, START, records_backward
from bench_agent.sim.console import PROMPT, flood_bytes
from serial_fixtures import Bench, at_shell_after_plug, kill_and_reap, plug_console


def log_records(bench: Bench, target: str = "pico", iface: str = "console") -> list:
    return list(reversed(list(records_backward(bench.state / "serial" / target / f"{iface}.log"))))


def received(records, epoch: int | None = None) -> bytes:
    return b"".join(r.payload for r in records if r.kind == DATA and (epoch is None or r.epoch == epoch))


def assert_contiguous(records) -> None:
    """Cursors and line numbers run on without a hole or a reuse, gaps included."""
    cursor, seq, col = records[0].cursor, records[0].seq, records[0].col
    for r in records:
        if r.kind == GAP:
            seq, col = (seq + 1, 0) if col else (seq, col)
        assert (r.cursor, r.seq, r.col) == (cursor, seq, col), r
        if r.kind == DATA:
            cursor += len(r.payload)
            seq, col = advance(seq, col, r.payload)


def wait_cursor(bench: Bench, target: str, at_least: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cursor = bench.status(target)["rx"]["cursor"]
        if cursor >= at_least:
            return cursor
        time.sleep(0.2)
    raise AssertionError(f"cursor {cursor} never reached {at_least}")


def booted(bench: Bench, panio, sim) -> int:
    panio("serial", "watch", "pico")
    sim.power_on()
    return bench.wait_for("pico", PROMPT)["cursor"]


def test_20_mb_flood_loses_nothing_and_numbers_every_line(bench, panio):
    sim = bench.board("pico")["console"]
    start = booted(bench, panio, sim)
    size = 20_000_000
    expected = f"flood {size}\r\n".encode() + flood_bytes(size) + b"\r\n" + PROMPT.encode()
    began = time.monotonic()
    panio("serial", "send", "pico", f"flood {size}")
    wait_cursor(bench, "pico", start + len(expected), timeout_s=180)
    elapsed = time.monotonic() - began
    records = log_records(bench)
    got = received(records)
    assert got[start:] == expected, "captured bytes differ from what the board sent"
    assert_contiguous(records)
    tail = panio("serial", "log", "pico", "--tail", "3", "--json").json()["lines"]
    assert [line["seq"] for line in tail] == [tail[0]["seq"], tail[0]["seq"] + 1, tail[0]["seq"] + 2]
    # a wait from a cursor long out of the supervisor's memory reads the disk
    epoch = bench.status("pico")["epoch"]
    r = panio("serial", "wait", "pico", "--epoch", str(epoch), "--since", str(start), "--pattern", r"flood \d+",
              "--max-bytes", "100").json()
    assert r["status"] == "matched" and r["match"]["text"] == f"flood {size}" and r["start"] == start
    print(f"20 MB captured in {elapsed:.1f} s ({size / elapsed / 1e6:.1f} MB/s)")


def test_kill_9_mid_stream_then_watch_again(bench, panio):
    sim = bench.board("pico")["console"]
    start = booted(bench, panio, sim)
    size = 20_000_000
    expected = f"flood {size}\r\n".encode() + flood_bytes(size) + b"\r\n" + PROMPT.encode()
    first = bench.discovery("pico")
    log_file = bench.state / "serial" / "pico" / "console.log"
    panio("serial", "send", "pico", f"flood {size}")
    deadline = time.monotonic() + 30
    while log_file.stat().st_size < 2_000_000 and time.monotonic() < deadline:
        time.sleep(0.002)
    os.kill(first["pid"], signal.SIGKILL)
    kill_and_reap(first["pid"])
    on_disk = received(log_records(bench))
    assert expected.startswith(on_disk[start:]) and 1_000_000 < len(on_disk) - start < len(expected), \
        "the kill did not land mid-stream"

    assert "started" in panio("serial", "watch", "pico").out
    second = bench.discovery("pico")
    assert second["epoch"] == first["epoch"] + 1
    deadline = time.monotonic() + 60
    while not next(records_backward(log_file)).payload.endswith(PROMPT.encode()) and time.monotonic() < deadline:
        time.sleep(0.05)
    records = log_records(bench)
    assert received(records)[:len(on_disk)] == on_disk, "the log before the crash changed"
    assert_contiguous(records)
    gaps = [r for r in records if r.kind == GAP]
    assert len(gaps) == 1 and "without a clean stop" in gaps[0].note()["reason"]
    assert gaps[0].epoch == second["epoch"] and gaps[0].cursor == len(on_disk)
    assert [r.epoch for r in records if r.kind == START] == [first["epoch"], second["epoch"]]
    after = received(records, second["epoch"])
    assert after and expected.endswith(after[-1000:]) and after in expected
    view = panio("serial", "log", "pico", "--from", str(gaps[0].seq - 2), "--to", str(gaps[0].seq + 2)).out
    assert "-- gap: capture epoch" in view


def test_unplug_is_a_disconnect_then_capture_resumes(bench, panio, tmp_path):
    link = tmp_path / "ttyUNPLUG"

    board = plug_console(link)
    try:
        panio("target", "add", "pico")
        panio("serial", "add", "console", "-t", "pico", "--device", str(link))
        panio("serial", "watch", "pico")
        before = bench.status("pico")
        board.terminate()
        board.wait(10)
        deadline = time.monotonic() + 60
        while bench.status("pico")["port"]["state"] != "disconnected" and time.monotonic() < deadline:
            time.sleep(0.05)
        st = bench.status("pico")
        assert st["port"]["state"] == "disconnected" and st["port"]["disconnects"] == 1
        r = panio.fails("serial", "wait", "pico", "--epoch", str(st["epoch"]), "--since", str(st["rx"]["cursor"]),
                        "--pattern", "x", "--timeout-ms", "2000", code=4)
        assert r.json()["status"] == "disconnect"
        panio.fails("serial", "send", "pico", "ls", code=4)
        board = plug_console(link)
        deadline = time.monotonic() + 60
        while bench.status("pico")["port"]["state"] != "open" and time.monotonic() < deadline:
            time.sleep(0.05)
        at_shell_after_plug(panio, "pico")
        after = bench.status("pico")
        assert after["epoch"] == before["epoch"] and after["log"]["gaps_recorded"] == 1
        assert "-- gap: device lost" in panio("serial", "log", "pico").out
    finally:
        board.terminate()
        board.wait(10)
        Path(link).unlink(missing_ok=True)


def test_seq_stays_put_when_old_segments_are_evicted(bench, panio):
    panio.env["PANIO_SERIAL_SEGMENT_BYTES"] = str(256 * 1024)  # the supervisor inherits it
    sim = bench.board("pico")["console"]
    booted(bench, panio, sim)
    size = 5_000_000  # more than the supervisor keeps in memory (4 MiB) and on disk (2 x 256 KiB)
    start = bench.status("pico")["rx"]["cursor"]
    panio("serial", "send", "pico", f"flood {size}")
    wait_cursor(bench, "pico", start + len(f"flood {size}\r\n") + size + 2 + len(PROMPT), timeout_s=60)
    log_file = bench.state / "serial" / "pico" / "console.log"
    assert sorted(p.name for p in log_file.parent.glob("console.log*")) == [  # older segments were evicted
        "console.log", "console.log.1", "console.log.1.gaps", "console.log.gaps"]
    lines = panio("serial", "log", "pico", "--tail", "500", "--json").json()["lines"]
    flood = [(line["seq"], int(line["text"][:8])) for line in lines if line["text"][:8].isdigit()]
    offsets = {seq - number for seq, number in flood}
    assert len(flood) > 400 and len(offsets) == 1  # one constant offset: no line lost, none renumbered
    epoch = bench.status("pico")["epoch"]
    r = panio("serial", "wait", "pico", "--epoch", str(epoch), "--since", str(start), "--pattern", r"\d{8} ",
              "--max-bytes", "200", "--timeout-ms", "1000").json()
    assert r["status"] == "matched" and r["evicted_bytes"] > 1_000_000 and r["start"] == start + r["evicted_bytes"]
    first = panio("serial", "log", "pico", "--from", "0", "--to", str(flood[0][0]), "--json").json()["lines"]
    assert first[0]["seq"] > 0 and first[0]["seq"] - int(first[0]["text"][:8]) == offsets.pop()
