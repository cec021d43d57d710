"""Real peer: Debian's ser2net exporting a PTY board as rfc2217:// and socket://, driven by the panio CLI.

The board is panio's simulated console on a PTY; ser2net (the real one, YAML
config written per test, loopback port) exports that PTY; the lab file names
only the URL, exactly as a lab would (no pyserial options).
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
import tty
from pathlib import Path

import pytest

from bench_agent.serial.logstore import DATA, GAP, records_backward
from bench_agent.sim.console import PROMPT, UNAME, SimConsole, flood_bytes
from jobhelp import wait_for
from ser2net import SER2NET, Ser2net, free_port
from serial_fixtures import Bench

pytestmark = pytest.mark.skipif(not os.path.exists(SER2NET), reason="ser2net is not installed "
                                "(scripts/system-deps.sh installs it)")
KINDS = ("rfc2217", "socket")


@pytest.fixture
def bench(panio, tmp_path):
    b = Bench(panio, tmp_path)
    exporters: list[Ser2net] = []
    b.exporters = exporters
    yield b
    b.close()
    for s in exporters:
        s.stop()


def exported(bench: Bench, tmp_path: Path, kind: str, target: str = "pico") -> tuple[SimConsole, Ser2net]:
    """A powered-off simulated board on a PTY, exported by ser2net, named in the lab by its URL only."""
    sim = SimConsole(str(tmp_path / f"tty-{target}"), boot_s=0.1, countdown_s=0.2, powered=False,
                     banner=f"{target} console")
    sim.start()
    bench.sims[f"{target}/console"] = sim
    s2n = Ser2net(tmp_path / "ser2net", sim.device, kind)
    bench.exporters.append(s2n)
    bench.panio("target", "add", target)
    bench.panio("serial", "add", "console", "-t", target, "--device", s2n.url)
    return sim, s2n


def log_path(bench: Bench, target: str = "pico") -> Path:
    return bench.state / "serial" / target / "console.log"


def records(bench: Bench, target: str = "pico") -> list:
    return list(reversed(list(records_backward(log_path(bench, target)))))


def received(recs) -> bytes:
    return b"".join(r.payload for r in recs if r.kind == DATA)


def wait_cursor(bench: Bench, at_least: int, timeout_s: float) -> int:
    deadline, cursor = time.monotonic() + timeout_s, -1
    while time.monotonic() < deadline:
        cursor = bench.status("pico")["rx"]["cursor"]
        if cursor >= at_least:
            return cursor
        time.sleep(0.2)
    raise AssertionError(f"cursor {cursor} never reached {at_least}")


def caught_up(bench: Bench, timeout_s: float = 180) -> None:
    """Wait until the capture's log ends at the board's prompt: the tail of a flood the board has finished writing
    can still be on its way through ser2net (the PTY, ser2net's buffer, the socket), and a transact sent meanwhile
    would read that tail first."""
    def at_prompt() -> bool:
        tail = b""
        for rec in records_backward(log_path(bench)):
            tail = (rec.payload if rec.kind == DATA else b"") + tail
            if len(tail) >= len(PROMPT):
                break
        return tail.endswith(PROMPT.encode())
    wait_for(at_prompt, timeout_s=timeout_s, every_s=0.05)


def jumps(flood: bytes) -> list[tuple[int, int]]:
    """Where the numbered lines of a flood skip: (last line before, first line after) for each hole."""
    numbers = [int(n) for n in re.findall(rb"\r\n(\d{8}) ", flood)]
    return [(a, b) for a, b in zip(numbers, numbers[1:]) if b != a + 1]


def keepalive_probes(pid: int, port: int) -> bool:
    """Whether process ``pid``'s connection to ``port`` runs the kernel's keepalive timer (/proc/net/tcp "timer 2")."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        link = os.readlink(f"/proc/{pid}/fd/{fd}")
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in list(f)[1:]]
    mine = [r for r in rows if r[9] in inodes and r[2].endswith(f":{port:04X}")]
    return bool(mine) and all(r[5].split(":")[0] == "02" for r in mine)


def wait_state(bench: Bench, state: str, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = bench.status("pico")
        if st["port"]["state"] == state:
            return st
        time.sleep(0.05)
    raise AssertionError(f"port never became {state}: {st['port']}")


@pytest.mark.parametrize("kind", KINDS)
def test_watch_send_transact_wait_log(bench, panio, tmp_path, kind):
    sim, s2n = exported(bench, tmp_path, kind)
    assert "started" in panio("serial", "watch", "pico").out  # rfc2217 crashed here: NotImplementedError
    sim.power_on()
    boot = bench.wait_for("pico", PROMPT, timeout_ms=20000)
    assert boot["status"] == "matched" and "Welcome to the panio simulated board" in boot["text"]
    r = panio("serial", "transact", "pico", "uname -a", "--until", PROMPT, "--timeout-ms", "10000", "--json").json()
    assert r["status"] == "matched" and UNAME in r["text"]
    st = bench.status("pico")
    assert st["port"]["state"] == "open" and st["active"]["device"] == s2n.url
    assert keepalive_probes(bench.discovery("pico")["pid"], s2n.port), "an idle link must be probed"
    sent = panio("serial", "send", "pico", "echo via-ser2net", "--json").json()
    r = panio("serial", "wait", "pico", "--epoch", str(st["epoch"]), "--since", str(sent["cursor"]),
              "--pattern", r"via-ser2net\r\n", "--timeout-ms", "10000").json()
    assert r["status"] == "matched"
    lines = panio("serial", "log", "pico", "--json").json()["lines"]
    texts = [line.get("text") for line in lines]
    assert "pico console" in texts and UNAME in texts and "via-ser2net" in texts
    assert "root@sim:~# echo via-ser2net" in panio("serial", "log", "pico").out
    panio("serial", "stop", "pico")
    assert s2n.proc.poll() is None, "ser2net must outlive panio's capture"


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_listening_is_unreachable_and_nothing_keeps_running(bench, panio, kind):
    url = f"{kind}://127.0.0.1:{free_port()}"
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", url)
    r = panio.fails("serial", "watch", "pico", code=4)
    assert f"cannot reach serial device {url}: " in r.err and "ign_set_control" not in r.err
    assert r.error["device"] == url
    assert bench.discovery("pico") is None and panio("daemons", "--json").json() == []
    panio.fails("serial", "connect", "pico", code=4)


@pytest.mark.parametrize("kind", KINDS)
def test_flood_of_100k_lines_loses_none_in_batched_records(bench, panio, tmp_path, kind):
    sim, _ = exported(bench, tmp_path, kind)
    panio("serial", "watch", "pico")
    sim.power_on()
    start = bench.wait_for("pico", PROMPT, timeout_ms=20000)["cursor"]
    size = 100_000 * len(flood_bytes(1000).split(b"\n")[0] + b"\n")  # 100k whole numbered lines
    assert flood_bytes(size).endswith(b"\r\n")
    expected = f"flood {size}\r\n".encode() + flood_bytes(size) + PROMPT.encode()
    panio("serial", "send", "pico", f"flood {size}")
    wait_cursor(bench, start + len(expected), timeout_s=120)
    recs = records(bench)
    assert received(recs)[start:] == expected, "captured bytes differ from what the board sent"
    flood = [r for r in recs if r.kind == DATA and r.cursor >= start]
    assert len(flood) < size // 1000, f"{len(flood)} records for {size} bytes: reads are not batched"
    st = bench.status("pico")
    assert st["log"]["bytes_on_disk"] < 1.2 * st["rx"]["cursor"], st["log"]
    numbered = []
    since = None
    while len(numbered) < 100_000:
        args = ("--since", str(since)) if since is not None else ("--from", "0")
        page = panio("serial", "log", "pico", *args, "--json").json()
        numbered += [line for line in page["lines"] if line.get("text", "")[:8].isdigit()]
        if "more_after" not in page:
            break
        since = page["more_after"]
    assert [int(line["text"][:8]) for line in numbered] == list(range(100_000)), "a line is missing or repeated"
    assert len({line["seq"] - int(line["text"][:8]) for line in numbered}) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_ser2net_restart_mid_capture_is_a_recorded_gap_and_capture_resumes(bench, panio, tmp_path, kind):
    sim, s2n = exported(bench, tmp_path, kind)
    panio("serial", "watch", "pico")
    sim.power_on()
    bench.wait_for("pico", PROMPT, timeout_ms=20000)
    before = bench.status("pico")
    size = 30_000_000  # a few seconds of flood
    log_file = log_path(bench)
    at_least = log_file.stat().st_size + 1_000_000
    panio("serial", "send", "pico", f"flood {size}")
    deadline = time.monotonic() + 30
    while log_file.stat().st_size < at_least and time.monotonic() < deadline:
        time.sleep(0.002)
    s2n.kill()
    st = wait_state(bench, "disconnected")
    assert st["port"]["disconnects"] == 1
    r = panio.fails("serial", "wait", "pico", "--epoch", str(st["epoch"]), "--since", str(st["rx"]["cursor"]),
                    "--pattern", "never", "--timeout-ms", "2000", code=4)
    assert r.json()["status"] == "disconnect"
    time.sleep(0.5)  # a few reconnect attempts meet a closed port
    s2n.start()
    wait_state(bench, "open")
    # what ser2net had read from the PTY but not yet sent died with it; the board is at its prompt again (the
    # rest of the flood first: it goes on through the new ser2net)
    wait_for(lambda: sim.state == "shell", timeout_s=180, every_s=0.05)
    caught_up(bench)
    r = panio("serial", "transact", "pico", "echo back-again", "--until", r"back-again\r\n" + PROMPT,
              "--timeout-ms", "10000", "--json").json()
    assert r["status"] == "matched"
    after = bench.status("pico")
    assert after["epoch"] == before["epoch"] and after["log"]["gaps_recorded"] == 1
    recs = records(bench)
    lost_at = next(i for i, rec in enumerate(recs) if rec.kind == GAP)
    flood = received(recs[:lost_at])[before["rx"]["cursor"]:]
    board_said = f"flood {size}\r\n".encode() + flood_bytes(size)
    assert 200_000 < len(flood) < len(board_said) and board_said.startswith(flood), "the kill was not mid-flood"
    gaps = [rec for rec in recs if rec.kind == GAP]
    notes = [g.note() for g in gaps]
    assert [n.get("reconnected", False) for n in notes] == [False, True], notes
    assert notes[0]["reason"].startswith("device lost") and notes[1]["down_ms"] >= 500
    view = panio("serial", "log", "pico", "--from", str(gaps[0].seq - 2), "--to", str(gaps[1].seq + 2)).out
    assert "-- gap: device lost" in view and f"-- gap: reconnected to {s2n.url} after" in view
    assert view.index("-- gap: device lost") < view.index("-- gap: reconnected")
    # nothing the board printed after the reconnect is lost: what follows the "reconnected" record is the rest
    # of the flood, whole, from where the new ser2net picked it up (rfc2217's open used to purge it: 148,489 lines)
    back_at = next(i for i, rec in enumerate(recs) if rec.kind == GAP and rec.note().get("reconnected"))
    after = received(recs[back_at + 1:])
    flood_after = after[:after.index(PROMPT.encode())]
    board_ended = board_said + (b"" if board_said.endswith(b"\n") else b"\r\n")  # the shell ends the last line
    assert flood_after and board_ended.endswith(flood_after), f"lines missing after the reconnect: {jumps(flood_after)}"
    assert not any(rec.kind == GAP for rec in recs[back_at + 1:])
    lost = len(board_ended) - len(flood) - len(flood_after)
    assert 0 <= lost < 65536, f"{lost} bytes lost across the restart: more than the killed ser2net held"


@pytest.mark.parametrize("kind", KINDS)
def test_what_the_board_printed_before_the_capture_connected_is_kept(bench, panio, tmp_path, kind):
    """pyserial's rfc2217 open asks ser2net to purge the port (it flushes the device) and drops what its reader
    thread queued meanwhile: on every reconnect the output waiting in the device was lost, silently."""
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        s2n = Ser2net(tmp_path / "ser2net", os.ttyname(slave), kind)
        bench.exporters.append(s2n)
        panio("target", "add", "pico")
        panio("serial", "add", "console", "-t", "pico", "--device", s2n.url)
        waiting = b"".join(b"printed-while-nobody-listened %04d\r\n" % i for i in range(100))
        os.write(master, waiting)  # sits in the PTY until ser2net opens it for the capture's connection
        panio("serial", "watch", "pico")
        os.write(master, b"after the capture connected\r\n")
        wait_cursor(bench, len(waiting) + 29, timeout_s=60)
        assert received(records(bench)) == waiting + b"after the capture connected\r\n"
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize("kind", KINDS)
def test_connect_through_ser2net_and_refused_while_watched(bench, panio, tmp_path, kind):
    sim, s2n = exported(bench, tmp_path, kind)
    sim.power_on()
    wait_for(lambda: sim.state == "shell", timeout_s=60, every_s=0.05)
    out = panio("serial", "connect", "pico", input="echo piped-in\r", timeout=60).out
    assert "echo piped-in\npiped-in\n" in out
    master, slave = os.openpty()
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "panio"), "serial", "connect", "pico"],
                            stdin=slave, stdout=slave, stderr=slave, env=panio.env)
    os.close(slave)
    try:
        def read_until(marker: bytes) -> bytes:
            seen, end = b"", time.monotonic() + 60
            while marker not in seen and time.monotonic() < end:
                if select.select([master], [], [], 0.5)[0]:
                    seen += os.read(master, 4096)
            assert marker in seen, seen
            return seen

        read_until(b"Ctrl-] quits")
        os.write(master, b"echo typed-in\r")
        read_until(b"typed-in\r\nroot@sim:~# ")
        os.write(master, b"\x1d")
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(master)
    # ser2net going away under a person's terminal ends it as unreachable, not a hang or a traceback
    master, slave = os.openpty()
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "panio"), "serial", "connect", "pico"],
                            stdin=slave, stdout=slave, stderr=slave, env=panio.env)
    os.close(slave)
    try:
        seen = read_until(b"Ctrl-] quits")
        s2n.kill()
        assert proc.wait(20) == 4
        while select.select([master], [], [], 0.5)[0]:
            try:
                seen += os.read(master, 4096)
            except OSError:  # EIO: the terminal's last opener is gone
                break
        assert b"panio: lost serial device " + s2n.url.encode() in seen and b"Traceback" not in seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(master)
    s2n.start()
    panio("serial", "watch", "pico")
    pid = bench.discovery("pico")["pid"]
    r = panio.fails("serial", "connect", "pico", code=8)
    assert f"pid {pid}" in r.err and "panio serial stop pico" in r.err
    assert bench.status("pico")["port"]["disconnects"] == 0, "connect must not kick the capture off ser2net"


@pytest.mark.parametrize("kind", KINDS)
def test_every_byte_value_arrives_exactly(bench, panio, tmp_path, kind):
    """0xff is telnet's IAC: ser2net doubles it on rfc2217 ports, and the capture must undo exactly that."""
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        s2n = Ser2net(tmp_path / "ser2net", os.ttyname(slave), kind)
        bench.exporters.append(s2n)
        panio("target", "add", "pico")
        panio("serial", "add", "console", "-t", "pico", "--device", s2n.url)
        panio("serial", "watch", "pico")
        payload = bytes(range(256)) * 2048 + b"\xff\xff\xfa\xf0 done\n"
        view = memoryview(payload)
        while view:
            if select.select([], [master], [], 5)[1]:
                view = view[os.write(master, view[:4096]):]
        wait_cursor(bench, len(payload), timeout_s=60)
        assert received(records(bench)) == payload
        sent = panio("serial", "send", "pico", "\u00ff typed", "--json").json()
        got = b""
        deadline = time.monotonic() + 60
        while not got.endswith(b"typed\r") and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                got += os.read(master, 4096)
        assert got == "\u00ff typed\r".encode() and sent["sent_bytes"] == len(got)
    finally:
        os.close(master)
        os.close(slave)
