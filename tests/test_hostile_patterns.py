"""A hostile regular expression never stops capture, never blocks another client, and ends in a clear error.

`(\\d+)+$` against a long line of digits backtracks exponentially: under
Python's `re` it held the GIL inside the capture daemon, capture stopped and
other clients' sends were lost (issue 12, item 1).
"""

from __future__ import annotations

import threading
import time

from bench_agent.errors import PanioError, UsageError
from bench_agent.serial.control import ControlClient
from conftest import cpu_s
from jobhelp import wait_for

PROMPT = r"root@sim:~# "
EVIL = r"(\d+)+$"  # backtracks catastrophically on a long line of digits (and never matches empty)


def test_catastrophic_pattern_is_refused_and_capture_keeps_running(bench, panio):
    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    bench.wait_for("pico", PROMPT)
    status, info = bench.status("pico"), bench.discovery("pico")
    panio("serial", "send", "pico", "echo " + "1" * 6000)
    bench.wait_for("pico", "1{6000}", since=status["rx"]["cursor"])
    hostile_wait = {"op": "wait", "since": status["rx"]["cursor"], "pattern": EVIL, "timeout_ms": 600000,
                    "max_bytes": 1 << 20}

    # The bad wait runs in its own client (a thread of this test, on the capture daemon's socket) ...
    bad: dict = {}

    def hostile() -> None:
        with ControlClient(info["socket"], "pico", None) as c:
            try:
                c.call(hostile_wait)
            except PanioError as err:
                bad["error"] = err
        bad["ended"] = time.monotonic()

    idle_cpu = cpu_s(info["pid"])
    started = time.monotonic()
    t = threading.Thread(target=hostile)
    t.start()
    # ... and once the daemon is matching it (it burns CPU, which an idle capture does not) ...
    wait_for(lambda: cpu_s(info["pid"]) - idle_cpu >= 0.1 or "ended" in bad, timeout_s=60, every_s=0.01)
    assert "ended" not in bad, f"the hostile wait ended before the daemon was seen matching it: {bad}"
    # ... another client sends and waits for the echo, all while the hostile match runs.
    with ControlClient(info["socket"], "pico", 60) as other:
        sent = other.call({"op": "send", "text": "echo still-captured\n"})
        reply = other.call({"op": "wait", "since": sent["cursor"], "pattern": "still-captured\r\n",
                            "timeout_ms": 30000})
    served = time.monotonic()
    assert reply["status"] == "matched"
    t.join(60)
    assert not t.is_alive()
    assert bad["ended"] > served, "the other client was served only after the hostile match ended"

    # bounded by the matching budget, not by the wait's ten-minute timeout; a usage error that says why
    assert bad["ended"] - started < 30, bad
    assert isinstance(bad["error"], UsageError) and "backtracks catastrophically" in bad["error"].message, bad

    # through the CLI: two lines, exit 2
    r = panio.fails("serial", "wait", "pico", "--epoch", str(status["epoch"]), "--since", str(status["rx"]["cursor"]),
                    "--pattern", EVIL, "--timeout-ms", "600000", "--max-bytes", "1048576", code=2)
    assert "backtracks catastrophically" in r.err.splitlines()[0]

    # and the daemon is still healthy afterwards
    assert bench.discovery("pico")["pid"] == info["pid"]
    r = panio("serial", "transact", "pico", "echo alive", "--until", PROMPT, "--timeout-ms", "30000")
    assert "alive" in r.out


def test_invalid_pattern_is_a_usage_error(bench, panio):
    bench.board("pico")
    panio("serial", "watch", "pico")
    r = panio.fails("serial", "wait", "pico", "--epoch", "1", "--since", "0", "--pattern", "(unclosed",
                    "--timeout-ms", "100", code=2)
    assert "invalid regular expression" in r.err
    # a recursive pattern (the regex package's own syntax) took the capture to 555 MB before a MemoryError
    r = panio.fails("serial", "wait", "pico", "--epoch", "1", "--since", "0", "--pattern", "x(?R)",
                    "--timeout-ms", "100", code=2)
    assert "a recursive pattern" in r.err
