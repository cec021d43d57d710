"""Serial benchmark: send->match round trips and capture rate, panio's daemon beside raw pyserial and labgrid.

    .venv/bin/python benchmarks/serial_roundtrip.py [--rounds 20] [--trips 100] [--flood-mb 20] [--json]

PTY responders, the same program (``_pty_responder``), each answering
``p N`` with ``ok N`` and ``flood N`` with N bytes of 66-byte lines then END;
each side has its own, so the daemon can hold its port for the whole run:

  floor    raw pyserial on the port: write the request, then
           ``read(in_waiting or 1)`` until the reply (pyserial's own read loop)
  panio    the capture daemon: a transact request over one kept control-socket
           connection (send, wait in the supervisor for ``ok N``): the path
           `panio serial transact` and the MCP server take, minus process start
  relay, relay_reader
           the architecture floors of a daemon: a minimal Python process (no JSON, no disk, no
           pattern) that holds the port and, per request line on a kept unix socket, writes it to the
           tty and sends back what the tty answers up to the end of a line (``relay_main``). The bare
           relay reads the answer in the thread that wrote; relay_reader keeps a reader thread that owns
           the port, as a capture daemon must, and hands each read to the request thread through a
           ``threading.Condition``, as the supervisor does. Above pyserial they cost the socket hop
           (and the hand-off); what panio costs above them is panio's own
  labgrid  labgrid's SerialDriver write + expect, in a child interpreter that
           has labgrid (`make bench` makes .venv-labgrid; labgrid ships its own
           fork of pyserial); left out, and said so, when there is none

Every side gets the same warm-up (100 trips). Then ``--rounds`` rounds, the
order of the sides rotating each round, each side making ``--trips`` round trips;
a round's ratio is the median trip of one side over the other's. Capture: each
round the floor (pyserial ``read(65536)`` until END, nothing stored) and the
daemon (every byte recorded to disk with its RX time; done at the RX time of the
record holding the last byte, its cursor polled only to know when to look) read the same flood, alternating; bytes lost are counted on both.
The relay rows are not goals of issue 24: they show how much of the ratio to pyserial a daemon behind a
socket pays on this machine; a panio / relay row's goal is what the 2.5x leaves once that relay is paid.
Goals (issue 24): p50 <= 2.5x the floor and <= 0.7x labgrid, panio's p99 <= 1 ms
on a quiet machine, capture >= 0.8x the floor with 0 lost.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench  # beside this script
from _pty_responder import running, serve, write_all

FLOOD_BLOCK = (b"0123456789abcdef" * 4 + b"\r\n") * 900
END = b"END\r\n"
WARMUP = 100


def responder(link: str) -> None:
    serve(link, _answer)


def _answer(fd: int, line: bytes) -> None:
    if line.startswith(b"flood "):
        _flood(fd, int(line[6:]))
    elif line:
        os.write(fd, b"ok " + line[2:] + b"\r\n")


def _flood(fd: int, size: int) -> None:
    sent = 0
    while sent < size:
        chunk = FLOOD_BLOCK[:size - sent]
        write_all(fd, chunk)
        sent += len(chunk)
    os.write(fd, END)


class Floor:
    """Raw pyserial on its own responder."""

    def __init__(self, device: str) -> None:
        import serial

        self.port = serial.serial_for_url(device, 115200, timeout=2, exclusive=True)
        self.n = 0

    def trips(self, count: int) -> list[float]:
        port, out = self.port, []
        for _ in range(count):
            self.n += 1
            want = b"ok %d\r\n" % self.n
            t0 = time.perf_counter()
            port.write(b"p %d\r" % self.n)
            buf = b""
            while not buf.endswith(want):
                buf += port.read(port.in_waiting or 1)
            out.append(time.perf_counter() - t0)
        return out

    def capture(self, size: int) -> tuple[float, int]:
        """MB/s and bytes lost reading a flood of ``size`` bytes."""
        port = self.port
        port.timeout = 0.005  # read(65536) returns soon after the flood ends (a longer wait counts against it)
        port.write(b"flood %d\r" % size)
        t0, got, tail = time.perf_counter(), 0, b""
        while not tail.endswith(END):
            data = port.read(65536)
            got += len(data)
            tail = (tail + data)[-8:]
        elapsed = time.perf_counter() - t0
        port.timeout = 2
        return size / elapsed / 1e6, size + len(END) - got

    def close(self) -> None:
        self.port.close()


class Daemon:
    """panio's capture daemon on its own responder, asked over one kept control-socket connection."""

    def __init__(self, target: str) -> None:
        from bench_agent.serial import client

        self.target = target
        self.conn = client.connect(target, timeout_s=30)
        self.conn.__enter__()
        self.n = 0

    def trips(self, count: int) -> list[float]:
        out = []
        for _ in range(count):
            self.n += 1
            req = {"op": "transact", "iface": "console", "data_b64": base64.b64encode(b"p %d\r" % self.n).decode(),
                   "until": f"ok {self.n}\r\n", "timeout_ms": 5000, "max_bytes": 4096}
            t0 = time.perf_counter()
            r = self.conn.call(req)
            out.append(time.perf_counter() - t0)
            assert r["status"] == "matched", r
        return out

    def cursor(self) -> int:
        return self.conn.call({"op": "status"})["interfaces"]["console"]["cursor"]

    def capture(self, size: int) -> tuple[float, int]:
        start = self.cursor()
        self.conn.call({"op": "send", "iface": "console",
                        "data_b64": base64.b64encode(b"flood %d\r" % size).decode()})
        t0, want = time.time(), start + size + len(END)  # the wall clock: the records' RX times are on it
        deadline = time.monotonic() + 120
        cursor = start
        while cursor < want and time.monotonic() < deadline:
            time.sleep(0.005)  # the poll is a request the daemon answers: faster steals its CPU
            cursor = self.cursor()
        # done when the daemon read the last byte (its record's RX time), as the floor is done when its read
        # returns it: not when a poll (every 5 ms) first saw it, a wait the floor does not pay
        elapsed = self.read_at(want) - t0
        return size / elapsed / 1e6, max(0, want - cursor)

    def read_at(self, cursor: int) -> float:
        """When the daemon read the byte before ``cursor`` (the RX time of the record that holds it)."""
        from bench_agent.serial import files
        from bench_agent.serial.logstore import DATA, records_backward

        for rec in records_backward(files.log_path(self.target, "console")):
            if rec.kind == DATA and rec.cursor < cursor:
                return rec.time_ns / 1e9
        raise RuntimeError(f"no record before cursor {cursor}")

    def close(self) -> None:
        self.conn.__exit__(None, None, None)


class Relay:
    """An architecture floor: a minimal relay process between a unix socket and the tty (``relay_main``)."""

    def __init__(self, device: str, address: str, reader_thread: bool) -> None:
        import socket

        self.proc = subprocess.Popen([sys.executable, __file__, "--relay", device, "--relay-socket", address]
                                     + (["--relay-reader-thread"] if reader_thread else []))
        deadline = time.monotonic() + 30
        while not os.path.exists(address):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the relay did not start")
            time.sleep(0.01)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(address)
        self.n = 0

    def trips(self, count: int) -> list[float]:
        sock, out = self.sock, []
        for _ in range(count):
            self.n += 1
            want = b"ok %d\r\n" % self.n
            t0 = time.perf_counter()
            sock.sendall(b"p %d\r\n" % self.n)
            buf = sock.recv(4096)
            while not buf.endswith(b"\n"):
                more = sock.recv(4096)
                if not more:
                    raise RuntimeError("the relay exited")
                buf += more
            out.append(time.perf_counter() - t0)
            assert buf == want, buf
        return out

    def close(self) -> None:
        self.sock.close()
        self.proc.terminate()
        self.proc.wait(10)


def relay_main(device: str, address: str, reader_thread: bool) -> None:
    """Accept one connection; for each request line, write it (less its \\n) to the tty and send back what the
    tty answers up to the end of a line. The port is opened as panio opens it (pyserial, exclusive) and read
    as panio reads it (``select``, then ``os.read``: pyserial's descriptor never blocks).

    Without ``reader_thread`` the thread that wrote reads the answer: a socket hop and nothing else. With it,
    a reader thread owns the port, as a capture daemon's must (it reads while no request is in flight), and
    hands what it read to the waiting request thread through a ``threading.Condition``: the one hand-off
    panio's supervisor makes (channel.Channel's reader thread, matcher.wait)."""
    import select
    import socket
    import threading

    port = __import__("serial").serial_for_url(device, 115200, timeout=2, exclusive=True)
    fd = port.fd
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(address + ".tmp")
    srv.listen(1)
    os.rename(address + ".tmp", address)
    conn, _ = srv.accept()
    got, cond = bytearray(), threading.Condition()

    def read() -> bytes:
        select.select([fd], [], [])
        return os.read(fd, 65536)

    def reader() -> None:
        while True:
            data = read()
            with cond:
                got.extend(data)
                cond.notify_all()

    if reader_thread:
        threading.Thread(target=reader, daemon=True).start()
    pending = b""
    while True:
        data = conn.recv(4096)
        if not data:
            return
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if reader_thread:
                with cond:
                    start = len(got)
                os.write(fd, line)
                with cond:
                    while got.find(b"\n", start) < 0:
                        cond.wait()
                    reply = bytes(got[start:])
            else:
                os.write(fd, line)
                reply = read()
                while not reply.endswith(b"\n"):
                    reply += read()
            conn.sendall(reply)


class Labgrid:
    """labgrid's SerialDriver in its own interpreter, asked for N trips at a time over a pipe."""

    def __init__(self, python: str, device: str) -> None:
        self.proc = subprocess.Popen([python, __file__, "--labgrid-client", device], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def trips(self, count: int) -> list[float]:
        self.proc.stdin.write(f"{count}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except BrokenPipeError:  # it failed already; what it said is on stderr
            pass
        self.proc.wait(30)


def has_labgrid(python: str | None) -> bool:
    return bool(python) and os.path.exists(python) and subprocess.run(
        [python, "-c", "import labgrid"], capture_output=True).returncode == 0


def labgrid_client(device: str) -> None:
    """Runs inside the labgrid interpreter: for each count read on stdin, that many trips, as JSON seconds."""
    from labgrid import Target
    from labgrid.driver import SerialDriver
    from labgrid.resource import RawSerialPort

    target = Target("bench")
    RawSerialPort(target, name=None, port=device, speed=115200)
    driver = SerialDriver(target, name=None)
    target.activate(driver)
    n = 0
    for line in sys.stdin:
        out = []
        for _ in range(int(line)):
            n += 1
            t0 = time.perf_counter()
            driver.write(b"p %d\r" % n)
            driver.expect("ok %d\r\n" % n, timeout=2)
            out.append(time.perf_counter() - t0)
        print(json.dumps(out), flush=True)
    target.deactivate(driver)


def idle(pid: int, seconds: float) -> dict[str, float]:
    def cpu_s() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    c0, t0 = cpu_s(), time.monotonic()
    time.sleep(seconds)
    cpu = (cpu_s() - c0) / (time.monotonic() - t0) * 100
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    return {"idle_cpu_percent": round(cpu, 3), "rss_mb": round(rss / 1024, 1)}


def measure(a: argparse.Namespace, links: dict[str, str]) -> tuple[list[dict], dict]:
    from bench_agent import ops

    sides = {"floor": Floor(links["floor"]), "relay": Relay(links["relay"], links["relay"] + ".sock", False),
             "relay_reader": Relay(links["relay_reader"], links["relay_reader"] + ".sock", True)}
    lg_python = a.labgrid_python if has_labgrid(a.labgrid_python) else None
    started = ops.call("serial.watch", {"target": "bench",
                                        "interfaces": [{"name": "console", "device": links["panio"], "baud": 115200}]})
    extra: dict = {"labgrid": "run" if lg_python else "no labgrid interpreter (run `make bench`): not compared"}
    try:
        sides["panio"] = Daemon("bench")
        if lg_python:
            sides["labgrid"] = Labgrid(lg_python, links["labgrid"])
        for side in sides.values():
            side.trips(WARMUP)
        samples: dict[str, list[list[float]]] = {name: [] for name in sides}
        loads = [_bench.load()]
        names = list(sides)
        for i in range(a.rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                samples[name].append(sides[name].trips(a.trips))
            loads.append(_bench.load())
        size = int(a.flood_mb * 1e6)
        cap = _bench.paired(lambda: sides["floor"].capture(size), lambda: sides["panio"].capture(size),
                            a.capture_rounds, key=lambda r: r[0]) if a.capture_rounds else {}
        extra.update(idle(started["pid"], a.idle_s))
    finally:
        for side in sides.values():
            side.close()
        ops.call("serial.stop", {"target": "bench"})
    rows = [ratio_row("serial round trip p50, panio / raw pyserial", samples["panio"], samples["floor"], 2.5, loads)]
    # the architecture floors: how far the goal is from what a daemon behind a socket reaches here. A
    # panio / floor row's goal is what is left of the 2.5x once that floor's own ratio is paid (< 1: unreachable)
    for name, what in (("relay_reader", "relay daemon with a reader thread"), ("relay", "bare relay daemon")):
        floor = ratio_row(f"serial round trip p50, {what} / raw pyserial", samples[name], samples["floor"], 2.5,
                          loads)
        rows.append(ratio_row(f"serial round trip p50, panio / {what} (architecture floor)", samples["panio"],
                              samples[name], round(2.5 / floor["ratio"], 2), loads))
        rows.append(floor)
    if "labgrid" in samples:
        rows.append(ratio_row("serial round trip p50, panio / labgrid", samples["panio"], samples["labgrid"], 0.7,
                              loads))
    every = [s for batch in samples["panio"] for s in batch]
    floor_all = [s for batch in samples["floor"] for s in batch]
    rows.append(_bench.value_row("serial round trip p99, panio", _bench.percentile(every, 99) * 1000, "<=", 1.0,
                                 "ms", [min(loads), max(loads)],
                                 floor_p99=round(_bench.percentile(floor_all, 99) * 1000, 4)))
    if not a.capture_rounds:
        return rows, extra  # --capture-rounds 0: the round trips only
    rates = {"floor": [r for r, _ in cap["floor"]], "panio": [r for r, _ in cap["panio"]]}
    lost = max(lost for _, lost in cap["panio"]) + max(lost for _, lost in cap["floor"])
    cap_pairs = {**cap, **rates}
    rows.append(_bench.row("capture rate, panio to disk / pyserial read loop (PTY)", cap_pairs, ">=", 0.8,
                           unit="MB/s", lost_bytes=lost, flood_mb=a.flood_mb))
    if lost:
        rows[-1]["met"] = False
    return rows, extra


def ratio_row(figure: str, ours: list[list[float]], theirs: list[list[float]], goal: float, loads: list[float]) -> dict:
    pairs = {"panio": [statistics.median(b) for b in ours], "floor": [statistics.median(b) for b in theirs]}
    pairs["ratios"] = [p / f for p, f in zip(pairs["panio"], pairs["floor"])]
    pairs["load"] = [min(loads), max(loads)]
    return _bench.row(figure, pairs, "<=", goal, unit="ms", scale=1000)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=20, help="rounds of round trips (default 20)")
    p.add_argument("--trips", type=int, default=100, help="round trips per side per round (default 100)")
    # 20 MB: a flood of 5 MB lasts 30-50 ms here, and one round's ratio then spans 0.5-1.3x (scheduling noise
    # over a few wake-ups); 20 MB is sustained capture (past the daemon's 4 MiB in-memory tail), 4x the window
    p.add_argument("--flood-mb", type=float, default=20, help="flood size per capture round (default 20 MB)")
    p.add_argument("--capture-rounds", type=int, default=6, help="capture rounds (default 6; 0: round trips only)")
    p.add_argument("--idle-s", type=float, default=5)
    p.add_argument("--json", action="store_true", help="print one JSON object (the rows) instead of the table")
    default_lg = Path(__file__).resolve().parent.parent / ".venv-labgrid" / "bin" / "python"
    p.add_argument("--labgrid-python", default=str(default_lg),
                   help="an interpreter with labgrid installed (default: .venv-labgrid, made by `make bench`)")
    p.add_argument("--responder", help=argparse.SUPPRESS)
    p.add_argument("--labgrid-client", help=argparse.SUPPRESS)
    p.add_argument("--relay", help=argparse.SUPPRESS)
    p.add_argument("--relay-socket", help=argparse.SUPPRESS)
    p.add_argument("--relay-reader-thread", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.responder:
        responder(a.responder)
        return 0
    if a.relay:
        relay_main(a.relay, a.relay_socket, a.relay_reader_thread)
        return 0
    if a.labgrid_client:
        labgrid_client(a.labgrid_client)
        return 0
    with tempfile.TemporaryDirectory(prefix="panio-bench-") as tmp:
        os.environ["PANIO_STATE_DIR"] = tmp
        links = {name: os.path.join(tmp, f"tty-{name}") for name in ("floor", "panio", "relay", "relay_reader", "labgrid")}
        with running(__file__, links["floor"]), running(__file__, links["panio"]), \
                running(__file__, links["relay"]), running(__file__, links["relay_reader"]), \
                running(__file__, links["labgrid"]):
            rows, extra = measure(a, links)
    _bench.emit(__file__, rows, a.json, extra)
    if not a.json:
        print(f"  labgrid: {extra['labgrid']}; daemon idle: {extra['idle_cpu_percent']} % CPU, "
              f"{extra['rss_mb']} MB RSS over {a.idle_s:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
