"""Keeping leases alive: one thread per process renews every kept lease, and a release wakes local waiters.

A job's lease is renewed every third of its TTL while the job runs
(``Lease.keep``). One daemon thread does it for every lease this process
keeps, instead of a thread per lease: starting one and joining it cost every
job two thread hand-offs, milliseconds each on a busy machine. A renewal that
finds the lease gone marks it lost (the runner stops at its next check); one
that cannot reach the store is tried again a third of the TTL later, so the TTL
alone decides when a lease is really gone. Renewals run one after the other: a
store that hangs holds the others up for its own retry bound
(``redis_leases.RETRY_S``), far less than any TTL's two spare thirds.

``released`` tells the jobs of this process that wait for a lease that one was
given back, so a job waiting behind another on the same board (both on this
host's worker) starts at once instead of at its next poll.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class Keeper:
    def __init__(self) -> None:
        self._due: dict[Any, tuple[float, float]] = {}  # lease -> (monotonic time of its next renewal, ttl_s)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, lease: Any, ttl_s: float) -> None:
        """Keep ``lease``: renewed a third of its TTL after it was taken (``Lease.taken_at``), at once if that
        passed already (a job's claim in the results database comes between taking and keeping, and on a
        starved machine it took most of a 30 s TTL: docs/scale.md), then every third."""
        first = time.monotonic() + ttl_s / 3
        if lease.taken_at is not None:
            first = min(first, lease.taken_at + ttl_s / 3)
        with self._cond:
            self._due[lease] = (first, ttl_s)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="panio-lease-keeper", daemon=True)
                self._thread.start()
            self._cond.notify()

    def discard(self, lease: Any) -> None:
        with self._cond:
            self._due.pop(lease, None)

    def _loop(self) -> None:
        while True:
            for lease, ttl_s in self._next_due():
                if not lease.renew(ttl_s):
                    self.discard(lease)

    def _next_due(self) -> list[tuple[Any, float]]:
        """Wait until a lease is due, then the due ones (their next renewal scheduled already)."""
        with self._cond:
            while True:
                now = time.monotonic()
                due = [(lease, ttl_s) for lease, (at, ttl_s) in self._due.items() if at <= now]
                if due:
                    for lease, ttl_s in due:
                        self._due[lease] = (now + ttl_s / 3, ttl_s)
                    return due
                soonest = min((at for at, _ in self._due.values()), default=None)
                self._cond.wait(None if soonest is None else soonest - now)


class Released:
    """A count of the leases given back in this process, and a way to wait for the next one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.count = 0

    def tell(self) -> None:
        with self._cond:
            self.count += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` unless a lease was given back since the count was ``seen``."""
        with self._cond:
            if self.count == seen:
                self._cond.wait(timeout_s)


KEEPER = Keeper()
RELEASED = Released()
