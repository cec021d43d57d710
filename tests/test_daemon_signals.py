"""A daemon stops on SIGTERM even when the signal lands while its main thread holds its stop event's lock
(``bench_agent.daemons.signals.set_on``): the netboot daemon once outlived `panio-sim down` that way."""

from __future__ import annotations

import subprocess
import sys

import pytest

# The main thread holds the event's lock (as ``Event.wait`` does for a moment each time it wakes) when the
# signal arrives: the handler runs at the next bytecode, inside that moment.
SCRIPT = """
import os, signal, sys, threading
from bench_agent.daemons.signals import set_on
stop = threading.Event()
if sys.argv[1] == "plain":
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
else:
    set_on(stop)
with stop._cond:
    os.kill(os.getpid(), signal.SIGTERM)
    held = True
print("stopped" if stop.wait(30) else "not stopped", flush=True)
"""


def run(how: str, timeout_s: float) -> str:
    return subprocess.run([sys.executable, "-c", SCRIPT, how], capture_output=True, text=True, timeout=timeout_s,
                          check=True).stdout.strip()


def test_a_signal_inside_the_events_own_lock_still_stops_the_daemon():
    assert run("set_on", 60) == "stopped"


def test_the_handler_it_replaces_hangs_there():
    """What the test above would see without ``set_on``: the handler waits for a lock its own thread holds."""
    with pytest.raises(subprocess.TimeoutExpired):
        run("plain", 3)
