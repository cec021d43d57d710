"""Serial benchmark: send->match round trips through the capture daemon vs a raw pyserial floor.

    .venv/bin/python benchmarks/serial_roundtrip.py [--trips 2000] [--flood-mb 20] [--idle-s 10] [--json]

One PTY responder process answers each request line ``p N`` with ``ok N``.
In the same run, on that responder:

  floor   raw pyserial on the port: write the request, read until the reply
  daemon  panio's supervisor: a transact request over one kept control-socket
          connection (send, then wait in the supervisor for ``ok N``), i.e. the
          path `panio serial transact` and the MCP server take, minus process start

  labgrid labgrid's SerialDriver (write, then expect the reply), run by a
          separate interpreter that has labgrid (`make bench` creates
          .venv-labgrid: labgrid ships its own fork of pyserial, so it must not
          share panio's venv); skipped, with the issue's figures quoted, when
          there is none

plus capture throughput (the responder floods N MB; time until the daemon's
cursor has it all on disk) and the daemon's idle CPU and RSS.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _pty_responder import running, serve, write_all  # beside this script

LABGRID = {"p50_ms": 0.64, "p99_ms": 0.99}
FLOOD_BLOCK = (b"0123456789abcdef" * 4 + b"\r\n") * 900


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
    os.write(fd, b"END\r\n")


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples_s)
    return {"p50_ms": round(statistics.median(ms), 3), "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 3),
            "mean_ms": round(statistics.fmean(ms), 3), "n": len(ms)}


def floor(device: str, trips: int) -> dict[str, float]:
    import serial

    port = serial.serial_for_url(device, 115200, timeout=2, exclusive=True)
    samples = []
    for i in range(trips):
        want = b"ok %d\r\n" % i
        t0 = time.perf_counter()
        port.write(b"p %d\r" % i)
        buf = b""
        while not buf.endswith(want):
            ready, _, _ = select.select([port.fd], [], [], 2)
            buf += os.read(port.fd, 4096)
        samples.append(time.perf_counter() - t0)
    port.close()
    return percentiles(samples)


def floor_capture(device: str, size: int) -> float:
    import serial

    port = serial.serial_for_url(device, 115200, timeout=2, exclusive=True)
    port.write(b"flood %d\r" % size)
    t0, got = time.perf_counter(), 0
    tail = b""
    while not tail.endswith(b"END\r\n"):
        select.select([port.fd], [], [], 2)
        data = os.read(port.fd, 65536)
        got += len(data)
        tail = (tail + data)[-8:]
    elapsed = time.perf_counter() - t0
    port.close()
    return got / elapsed / 1e6


def labgrid_client(device: str, trips: int) -> None:
    """Runs inside the labgrid interpreter: print the round-trip percentiles as JSON."""
    from labgrid import Target
    from labgrid.driver import SerialDriver
    from labgrid.resource import RawSerialPort

    target = Target("bench")
    RawSerialPort(target, name=None, port=device, speed=115200)
    driver = SerialDriver(target, name=None)
    target.activate(driver)
    for i in range(100):  # warm-up, like the daemon's
        driver.write(b"p %d\r" % i)
        driver.expect("ok %d\r\n" % i, timeout=2)
    samples = []
    for i in range(trips):
        t0 = time.perf_counter()
        driver.write(b"p %d\r" % i)
        driver.expect("ok %d\r\n" % i, timeout=2)
        samples.append(time.perf_counter() - t0)
    target.deactivate(driver)
    print(json.dumps(percentiles(samples)))


def labgrid(python: str | None, device: str, trips: int) -> dict[str, float] | None:
    if not python or not os.path.exists(python):
        return None
    out = subprocess.run([python, __file__, "--labgrid-client", device, "--trips", str(trips)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.stderr.write(f"labgrid run failed: {out.stderr.strip().splitlines()[-1:]}\n")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def daemon(target: str, trips: int) -> dict[str, float]:
    from bench_agent.serial import client

    samples = []
    with client.connect(target, timeout_s=10) as c:
        for i in range(trips):
            req = {"op": "transact", "iface": "console", "data_b64": base64.b64encode(b"p %d\r" % i).decode(),
                   "until": f"ok {i}\r\n", "timeout_ms": 5000, "max_bytes": 4096}
            t0 = time.perf_counter()
            r = c.call(req)
            samples.append(time.perf_counter() - t0)
            assert r["status"] == "matched", r
    return percentiles(samples)


def daemon_capture(target: str, size: int) -> float:
    from bench_agent.serial import client

    with client.connect(target) as c:
        start = c.call({"op": "status"})["interfaces"]["console"]["cursor"]
        c.call({"op": "send", "iface": "console", "data_b64": base64.b64encode(b"flood %d\r" % size).decode()})
        t0 = time.perf_counter()
        while c.call({"op": "status"})["interfaces"]["console"]["cursor"] < start + size + 5:
            time.sleep(0.002)
        return size / (time.perf_counter() - t0) / 1e6


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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trips", type=int, default=2000)
    p.add_argument("--flood-mb", type=float, default=20)
    p.add_argument("--idle-s", type=float, default=10)
    p.add_argument("--json", action="store_true")
    default_lg = Path(__file__).resolve().parent.parent / ".venv-labgrid" / "bin" / "python"
    p.add_argument("--labgrid-python", default=str(default_lg),
                   help="an interpreter with labgrid installed (default: .venv-labgrid, made by `make bench`)")
    p.add_argument("--responder", help=argparse.SUPPRESS)
    p.add_argument("--labgrid-client", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.responder:
        responder(a.responder)
        return 0
    if a.labgrid_client:
        labgrid_client(a.labgrid_client, a.trips)
        return 0
    with tempfile.TemporaryDirectory(prefix="panio-bench-") as tmp:
        os.environ["PANIO_STATE_DIR"] = tmp
        link = os.path.join(tmp, "tty")
        with running(__file__, link):
            return _run(a, link)


def _run(a: argparse.Namespace, link: str) -> int:
    from bench_agent import ops

    size = int(a.flood_mb * 1e6)
    out = {"trips": a.trips, "floor": floor(link, a.trips), "floor_capture_mb_s": round(floor_capture(link, size), 1)}
    out["labgrid"] = labgrid(a.labgrid_python, link, a.trips)
    iface = {"name": "console", "device": link, "baud": 115200}
    started = ops.call("serial.watch", {"target": "bench", "interfaces": [iface]})
    try:
        for _ in range(100):  # warm-up
            daemon("bench", 1)
        out["daemon"] = daemon("bench", a.trips)
        out["daemon_capture_mb_s"] = round(daemon_capture("bench", size), 1)
        out.update(idle(started["pid"], a.idle_s))
    finally:
        ops.call("serial.stop", {"target": "bench"})
    if out["labgrid"] is None:
        out["labgrid_quoted"] = LABGRID
        out["labgrid_note"] = "no labgrid interpreter (run `make bench`); figures quoted from the issue"
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        f, d = out["floor"], out["daemon"]
        print(f"send->match round trip over {a.trips} trips (ms)     p50      p99     mean")
        print(f"  raw pyserial floor                        {f['p50_ms']:7.3f}  {f['p99_ms']:7.3f}  {f['mean_ms']:7.3f}")
        print(f"  panio daemon (transact, kept socket)      {d['p50_ms']:7.3f}  {d['p99_ms']:7.3f}  {d['mean_ms']:7.3f}")
        lg = out["labgrid"]
        if lg:
            print(f"  labgrid SerialDriver (same run)           {lg['p50_ms']:7.3f}  {lg['p99_ms']:7.3f}  {lg['mean_ms']:7.3f}")
            print(f"  panio/labgrid: p50 {d['p50_ms'] / lg['p50_ms']:.2f}x, p99 {d['p99_ms'] / lg['p99_ms']:.2f}x")
        else:
            print(f"  labgrid SerialDriver (quoted, not run)    {LABGRID['p50_ms']:7.3f}  {LABGRID['p99_ms']:7.3f}")
        print(f"capture: floor {out['floor_capture_mb_s']} MB/s read-only; daemon {out['daemon_capture_mb_s']} MB/s to disk")
        print(f"daemon idle: {out['idle_cpu_percent']} % CPU, {out['rss_mb']} MB RSS over {a.idle_s} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
