"""ser2net benchmark: panio's capture through a real ser2net vs plain pyserial on the same URL.

    .venv/bin/python benchmarks/ser2net_capture.py [--lines 100000] [--rfc2217-lines 5000] [--repeat 5]
                                                   [--bufsize 4096] [--json]

One PTY responder process answers ``flood N`` with N numbered 73-byte lines
then ``END``. Debian's ser2net exports that PTY on a loopback port, as
``socket://`` (raw TCP) and as ``rfc2217://`` (telnet + RFC 2217). In the same
run, for each URL kind:

  pyserial  plain pyserial on the URL: write the request, ``read(65536)`` until END
  panio     panio's supervisor (what `panio serial watch` starts) capturing the URL to
            its on-disk log: time until it read the last byte (that record's RX time; its
            cursor is polled every 10 ms only to know when to look)

Both count the numbered lines they got (lost = N - distinct numbers seen).
The sides run in ``--repeat`` pairs, alternating (the first side swapping each
pair, after one warm-up run of each); the figure is the median of the pairs'
ratios with its spread and the load average, and the worst loss of any run.
Also measured on panio's log: bytes on disk per byte received, and the time
`panio serial log` takes to read 5,000 lines. Goals (issue 24): socket://
panio >= 0.9x pyserial's rate, rfc2217:// >= 0.8x, 0 lines lost. rfc2217 is slower for both: pyserial's
RFC 2217 client queues every received byte on its own.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import _bench  # beside this script
from _pty_responder import running, serve, write_all

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the same ser2net launcher the peer tests use

LINE_BODY = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n"
NUMBERED = re.compile(rb"(\d{8}) 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n")
END = b"END\r\n"
GOALS = {"socket": 0.9, "rfc2217": 0.8}


def responder(link: str) -> None:
    serve(link, _answer)


def _answer(fd: int, line: bytes) -> None:
    if line.startswith(b"flood "):
        _flood(fd, int(line[6:]))


def _flood(fd: int, lines: int) -> None:
    for first in range(0, lines, 1000):
        write_all(fd, b"".join(b"%08d " % i + LINE_BODY for i in range(first, min(lines, first + 1000))))
    os.write(fd, END)


def lost(data: bytes, lines: int) -> int:
    return lines - len({int(m.group(1)) for m in NUMBERED.finditer(data)})


def plain(url: str, lines: int) -> dict[str, float]:
    import serial

    from bench_agent.serial.device import port_url

    # a short timeout: read(65536) returns when the flood ends, not 50 ms later (that wait counted against it)
    port = serial.serial_for_url(port_url(url), 115200, timeout=0.005)  # rfc2217 needs ign_set_control too
    try:
        port.write(b"flood %d\r" % lines)
        t0, got = time.perf_counter(), bytearray()
        while not got.endswith(END):
            got += port.read(65536)
        elapsed = time.perf_counter() - t0
    finally:
        port.close()
    return {"mb_s": round(len(got) / elapsed / 1e6, 3), "lines_lost": lost(bytes(got), lines),
            "seconds": round(elapsed, 2)}


def captured(url: str, lines: int) -> dict[str, float]:
    from bench_agent import ops
    from bench_agent.serial import client, files
    from bench_agent.serial.logstore import DATA, records_backward, segments

    ops.call("serial.watch", {"target": "bench", "interfaces": [{"name": "console", "device": url, "baud": 115200}]})
    log = files.log_path("bench", "console")
    try:
        with client.connect("bench") as c:
            start = c.call({"op": "status"})["interfaces"]["console"]["cursor"]
            c.call({"op": "send", "iface": "console", "data_b64": base64.b64encode(b"flood %d\r" % lines).decode()})
            t0, cursor = time.time(), start  # the wall clock: the records' RX times are on it
            while cursor < start + lines * (9 + len(LINE_BODY)) + len(END):
                time.sleep(0.01)  # a faster poll steals CPU from the capture on a small machine
                cursor = c.call({"op": "status"})["interfaces"]["console"]["cursor"]
        records = [rec for rec in reversed(list(records_backward(log))) if rec.kind == DATA and rec.cursor >= start]
        # done when the capture read the last byte (its record's RX time), as pyserial's side is done when its
        # read returns it: not when a poll (every 10 ms) first saw it, a wait the other side does not pay
        elapsed = records[-1].time_ns / 1e9 - t0
        data = b"".join(rec.payload for rec in records)
        t1 = time.perf_counter()
        window = ops.call("serial.log", {"target": "bench", "iface": {"name": "console", "device": url},
                                         "tail": 5000})
        read_ms = (time.perf_counter() - t1) * 1000
        assert len(window["lines"]) == min(5000, lines + 1), len(window["lines"])
        on_disk = sum(p.stat().st_size for p in segments(log))
    finally:
        ops.call("serial.stop", {"target": "bench"})
        for p in segments(log):
            p.unlink()
    return {"mb_s": round(len(data) / elapsed / 1e6, 3), "lines_lost": lost(data, lines), "seconds": round(elapsed, 2),
            "disk_per_byte": round(on_disk / max(cursor, 1), 3), "log_5000_lines_ms": round(read_ms, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lines", type=int, default=100_000, help="flood size on socket:// (default 100000)")
    p.add_argument("--rfc2217-lines", type=int, default=5_000,
                   help="flood size on rfc2217:// (default 5000: pyserial reads RFC 2217 at ~0.1-0.3 MB/s)")
    p.add_argument("--repeat", type=int, default=5, help="pairs of runs, alternating (default 5)")
    p.add_argument("--bufsize", type=int, default=4096,
                   help="ser2net's dev-to-net-bufsize (default 4096, as docs/remote-serial.md advises for fast "
                        "ports; ser2net's own default is 64)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--responder", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.responder:
        responder(a.responder)
        return 0
    from ser2net import SER2NET, Ser2net

    if not shutil.which(SER2NET) and not os.path.exists(SER2NET):
        sys.stderr.write("ser2net is not installed (scripts/system-deps.sh installs it)\n")
        return 1
    with tempfile.TemporaryDirectory(prefix="panio-bench-") as tmp:
        os.environ["PANIO_STATE_DIR"] = tmp
        link = os.path.join(tmp, "tty")
        with running(__file__, link):
            out = {"ser2net_dev_to_net_bufsize": a.bufsize}
            rows = []
            for kind, lines in (("socket", a.lines), ("rfc2217", a.rfc2217_lines)):
                exporter = Ser2net(Path(tmp) / "ser2net", link, kind, bufsize=a.bufsize)
                try:
                    pairs = _bench.paired(lambda u=exporter.url, n=lines: plain(u, n),
                                          lambda u=exporter.url, n=lines: captured(u, n), a.repeat,
                                          key=lambda r: r["mb_s"])
                finally:
                    exporter.stop()
                lost = max(r["lines_lost"] for r in pairs["floor"] + pairs["panio"])
                last = pairs["panio"][-1]
                out[kind] = {"lines": lines, "url": exporter.url, "pyserial": pairs["floor"], "panio": pairs["panio"]}
                rates = {**pairs, "floor": [r["mb_s"] for r in pairs["floor"]],
                         "panio": [r["mb_s"] for r in pairs["panio"]]}
                row = _bench.row(f"capture rate via ser2net {kind}://, panio to disk / pyserial", rates, ">=",
                                 GOALS[kind], unit="MB/s", lines_lost=lost, lines=lines,
                                 disk_per_byte=last["disk_per_byte"], log_5000_lines_ms=last["log_5000_lines_ms"])
                row["met"] = row["met"] and lost == 0
                rows.append(row)
    _bench.emit(__file__, rows, a.json, {"ser2net_dev_to_net_bufsize": a.bufsize, "runs": out})
    if not a.json:
        for row in rows:
            print(f"  {row['figure'].split(',')[0]}: {row['lines_lost']} lines lost, {row['disk_per_byte']} log "
                  f"bytes per byte, `serial log --tail 5000` {row['log_5000_lines_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
