"""A hostile regular expression never stops capture, never blocks another client, and ends in a clear error.

`(\\d+)+$` against a long line of digits backtracks exponentially: under
Python's `re` it held the GIL inside the capture daemon, capture stopped and
other clients' sends were lost (issue 12, item 1).
"""

from __future__ import annotations

import subprocess
import threading
import time

from conftest import PANIO

PROMPT = r"root@sim:~# "
EVIL = r"(\d+)+$"  # backtracks catastrophically on a long line of digits (and never matches empty)


def test_catastrophic_pattern_is_refused_and_capture_keeps_running(bench, panio):
    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    bench.wait_for("pico", PROMPT)
    status, pid = bench.status("pico"), bench.discovery("pico")["pid"]
    panio("serial", "send", "pico", "echo " + "1" * 6000)
    bench.wait_for("pico", "1{6000}", since=status["rx"]["cursor"])

    # the bad wait runs in its own client while another client sends and waits
    bad: dict = {}

    def hostile() -> None:
        started = time.monotonic()
        p = subprocess.run([PANIO, "serial", "wait", "pico", "--epoch", str(status["epoch"]), "--since",
                            str(status["rx"]["cursor"]), "--pattern", EVIL, "--timeout-ms", "600000",
                            "--max-bytes", "1048576"], capture_output=True, text=True, env=panio.env, timeout=120)
        bad.update(code=p.returncode, err=p.stderr, seconds=time.monotonic() - started)

    t = threading.Thread(target=hostile)
    t.start()
    time.sleep(0.3)
    mark = bench.status("pico")["rx"]["cursor"]
    panio("serial", "send", "pico", "echo still-captured")
    reply = bench.wait_for("pico", "still-captured\r\n", since=mark, timeout_ms=10000)
    assert reply["status"] == "matched"
    t.join(60)
    assert not t.is_alive()

    # bounded by the matching budget, not by the wait's ten-minute timeout
    assert bad["seconds"] < 30, bad
    assert bad["code"] == 2, bad
    lines = bad["err"].strip().splitlines()
    assert len(lines) == 2 and "backtracks catastrophically" in lines[0] and "Traceback" not in bad["err"]

    # and the daemon is still healthy afterwards
    assert bench.discovery("pico")["pid"] == pid
    r = panio("serial", "transact", "pico", "echo alive", "--until", PROMPT, "--timeout-ms", "5000")
    assert "alive" in r.out


def test_invalid_pattern_is_a_usage_error(bench, panio):
    bench.board("pico")
    panio("serial", "watch", "pico")
    r = panio.fails("serial", "wait", "pico", "--epoch", "1", "--since", "0", "--pattern", "(unclosed",
                    "--timeout-ms", "100", code=2)
    assert "invalid regular expression" in r.err
