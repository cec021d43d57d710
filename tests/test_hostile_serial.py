"""Bytes a board prints while capture is down survive the restart (issue 12, item 9).

pyserial's `open()` flushes the kernel's input queue, so everything printed
between a capture's death and the next `serial watch` was thrown away.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import termios
import time
from pathlib import Path

import pytest

from conftest import lab
from jobhelp import wait_for
from serial_fixtures import kill_and_reap, supervisor_pids


@pytest.fixture
def tty(panio, tmp_path):
    master, slave = pty.openpty()
    name = os.ttyname(slave)
    os.close(slave)  # nobody holds the board's side: what it prints waits in the kernel
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", name)
    yield master
    for pid in supervisor_pids(Path(panio.env["PANIO_STATE_DIR"])):
        kill_and_reap(pid)
    os.close(master)


def logged(panio) -> str:
    return "\n".join(line.get("text", "") for line in panio("serial", "log", "pico", "--json").json()["lines"])


def wait_logged(panio, text: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = logged(panio)
        if text in out:
            return out
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never reached the log:\n{logged(panio)}")


def queued(device: str) -> int:
    """How many bytes wait in the kernel's input queue of ``device`` (a PTY's board side nobody reads)."""
    fd = os.open(device, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.TIOCINQ, b"\0" * 4))[0]
    finally:
        os.close(fd)


def print_while_down(panio, tty: int, data: bytes) -> None:
    """The board prints ``data`` while no capture runs; returns once the kernel holds all of it."""
    os.write(tty, data)
    device = lab(panio)["targets"]["pico"]["serial"][0]["device"]
    wait_for(lambda: queued(device) >= len(data), timeout_s=60, every_s=0.01)


def test_what_the_board_printed_before_the_first_watch_is_kept(panio, tty):
    print_while_down(panio, tty, b"printed-before-any-capture\n")
    panio("serial", "watch", "pico")
    wait_logged(panio, "printed-before-any-capture")


def test_what_the_board_printed_while_capture_was_killed_is_kept(panio, tty):
    panio("serial", "watch", "pico")
    os.write(tty, b"first-epoch\n")
    wait_logged(panio, "first-epoch")
    pid = json.loads((panio.state / "daemons" / "serial-pico.json").read_text())["pid"]
    kill_and_reap(pid)
    print_while_down(panio, tty, b"".join(b"while-down-%03d\n" % i for i in range(40)))  # 600 bytes, as reported
    panio("serial", "watch", "pico")
    out = wait_logged(panio, "while-down-039")
    assert all(f"while-down-{i:03d}" in out for i in range(40))


def test_two_watches_at_the_same_instant_both_succeed_naming_one_supervisor(panio, tty):
    import subprocess

    from conftest import PANIO

    procs = [subprocess.Popen([PANIO, "serial", "watch", "pico", "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=panio.env) for _ in range(3)]
    results = [(p.wait(60), p.stdout.read(), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _, _ in results), results
    pids = {json.loads(out)["pid"] for _, out, _ in results}
    assert len(pids) == 1 and len(supervisor_pids(Path(panio.env["PANIO_STATE_DIR"]))) == 1


def test_a_window_over_evicted_lines_says_so(tmp_path):
    from bench_agent.serial.logstore import DATA, LogWriter
    from bench_agent.serial.query import line_window

    path = tmp_path / "console.log"
    w = LogWriter(path, segment_bytes=4096, keep=2)
    for i in range(500):
        w.append(DATA, 1, b"line %04d\r\n" % i, 1_000 + i)
    w.close()
    lines, info = line_window(path, first=0, last=10)
    assert lines == [] and info["evicted_before"] > 10  # before: nothing, and no word of why
    lines, info = line_window(path, first=0, last=10_000)
    assert lines[0]["seq"] == info["evicted_before"]
    assert "evicted_before" not in line_window(path, tail=3)[1]
    small = tmp_path / "small.log"
    w = LogWriter(small)
    w.append(DATA, 1, b"only\r\n", 1)
    w.close()
    assert "evicted_before" not in line_window(small, first=0, last=5)[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tiny tmpfs as the state disk (CI runs as root)")
def test_a_full_state_disk_is_a_device_error_not_internal(panio, tmp_path):
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], check=True)
    master, slave = pty.openpty()
    name = os.ttyname(slave)
    os.close(slave)
    state = disk / "state"
    panio.env["PANIO_STATE_DIR"] = str(state)
    try:
        panio("init")
        panio("target", "add", "pico")
        panio("serial", "add", "console", "-t", "pico", "--device", name)
        panio("serial", "watch", "pico")
        with open(disk / "filler", "wb") as f:
            with pytest.raises(OSError):
                f.write(b"x" * (1 << 20))
                f.flush()
        os.write(master, b"y" * 5000 + b"\n")
        # once the capture has met those bytes (it cannot record them), a send, which it must record, is refused
        def met() -> dict | bool:
            st = panio("serial", "status", "pico", "--json", check=False).json()
            return (st["port"]["state"] == "fault" or st["rx"]["cursor"] >= 5001) and st

        wait_for(met, timeout_s=60)
        r = panio.fails("serial", "send", "pico", "hello", code=12)
        assert "is full" in r.err and "PANIO_STATE_DIR" in r.err
    finally:
        for pid in supervisor_pids(state):
            kill_and_reap(pid)
        os.close(master)
        subprocess.run(["umount", "-l", str(disk)], check=False)
