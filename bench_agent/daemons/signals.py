"""Stopping a daemon on a signal without deadlocking it (``set_on``).

A Python signal handler runs in the main thread between two bytecodes, and a
daemon's main thread spends its life in ``Event.wait`` on the very event the
handler sets. ``Event.wait`` holds the event's lock for a moment each time it
wakes; a handler that runs inside that moment and calls ``event.set()`` waits
for that lock, which the thread it interrupted can never release: the daemon
hangs with SIGTERM ignored (seen: the netboot daemon outliving `panio-sim
down`, its stack two handlers deep in ``Condition.__enter__``). The handler
here sets the event from a thread of its own, which takes the lock once the
main thread lets it go.
"""

from __future__ import annotations

import signal
import threading


def set_on(event: threading.Event, *signums: int) -> None:
    """Set ``event`` when any of ``signums`` arrives (default: SIGTERM and SIGINT)."""

    def handler(signum: int, frame: object) -> None:
        threading.Thread(target=event.set, name="panio-signal", daemon=True).start()

    for signum in signums or (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
