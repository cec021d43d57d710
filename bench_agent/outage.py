"""The lab's own services away: the results database or Redis out of reach, as a long-lived process rides it out.

A process that must keep running (the scheduler, the recorder, the dashboard, a job's runner) does not die
when PostgreSQL or Redis goes away for a minute: it waits, tries again with backoff, says so once when the
service goes and once when it is back, and goes on by itself (docs/operations.md, "When the lab's own
services fail")::

    watch = Outages(log)
    while running:
        try:
            step()
        except Exception as exc:
            if not watch.failed(exc):
                raise                       # not a service away: a bug, raised as it came
            time.sleep(watch.delay_s())
            continue
        watch.ok()

``service_down(exc)`` tells which service an error says is away ("results database", "Redis"), or None. It
reads the exception's classes by name, so nothing here imports SQLAlchemy, psycopg or redis.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Callable

DB, REDIS = "results database", "Redis"
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 5.0)  # the waits between tries; the last one repeats (a board idles at most that
PATIENCE_S = 3600.0  # long after its service is back); how long a job's runner waits for the database to come back

# (module prefix, class name) of the errors that say a service is out of reach (not what a statement did wrong)
_DOWN = {
    ("sqlalchemy.exc", "OperationalError"): DB, ("sqlalchemy.exc", "InterfaceError"): DB,
    ("psycopg", "OperationalError"): DB, ("psycopg", "InterfaceError"): DB,
    ("redis.exceptions", "ConnectionError"): REDIS, ("redis.exceptions", "TimeoutError"): REDIS,
    ("kombu.exceptions", "OperationalError"): REDIS,
}


def service_down(exc: BaseException) -> str | None:
    """Which of the lab's services ``exc`` says is out of reach (``DB``, ``REDIS``), or None."""
    for cls in type(exc).__mro__:
        found = _DOWN.get((cls.__module__.split(".")[0] if cls.__module__.startswith("psycopg") else cls.__module__,
                           cls.__name__))
        if found:
            return found
    if type(exc).__name__ == "DBAPIError" and getattr(exc, "connection_invalidated", False):
        return DB  # a connection the server closed under a statement (pg_terminate_backend)
    if type(exc).__name__ == "Unreachable":  # panio's own, translated at a store's boundary
        said = getattr(exc, "details", {}).get("service")
        if said in (DB, REDIS):
            return said
        text = str(getattr(exc, "message", exc))
        if text.startswith("results database"):
            return DB
        if text.startswith(("Redis", "broker")):
            return REDIS
    return None


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or getattr(exc, "orig", None) or exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]


class Outages:
    """What one process knows of the lab's services being away: since when, said once a change.

    ``failed(exc)`` notes a service away (True) or says the error is not one (False); ``ok()`` says every
    service noted away is back; ``since(service)`` and ``reason()`` are what a page or an answer shows."""

    def __init__(self, log: Callable[[str], None], who: str = "") -> None:
        self.log, self.who = log, (who + ": " if who else "")
        self._since: dict[str, float] = {}
        self._tries = 0
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> bool:
        service = service_down(exc)
        if service is None:
            return False
        with self._lock:
            self._tries += 1
            if service in self._since:
                return True
            self._since[service] = time.time()
        self.log(f"{self.who}{service} unreachable since {_clock(self._since[service])}: {first_line(exc)}; "
                 "waiting for it")
        return True

    def ok(self, service: str | None = None) -> None:
        """``service`` (default: every one noted away) answered again."""
        with self._lock:
            back = [s for s in list(self._since) if service in (None, s)]
            was = {s: self._since.pop(s) for s in back}
            if not self._since:
                self._tries = 0
        for s, at in was.items():
            self.log(f"{self.who}{s} back after {time.time() - at:.0f} s (unreachable since {_clock(at)})")

    def say(self, text: str) -> None:
        """One more line of this process's about a service away (what waiting for it ended in)."""
        self.log(f"{self.who}{text}")

    def since(self, service: str) -> float | None:
        return self._since.get(service)

    def away(self) -> list[str]:
        """The services noted away now."""
        return list(self._since)

    @property
    def down(self) -> bool:
        return bool(self._since)

    def reason(self) -> str:
        """'results database unreachable since 02:14:07' (each service away), '' when none is."""
        return "; ".join(f"{s} unreachable since {_clock(at)}" for s, at in sorted(self._since.items()))

    def delay_s(self) -> float:
        """How long to wait before the next try: ``BACKOFF_S`` by the tries failed in a row."""
        return BACKOFF_S[min(max(self._tries - 1, 0), len(BACKOFF_S) - 1)]


def _clock(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def patiently(func: Callable, outages: Outages, should_stop: Callable[[], bool] = lambda: False,
              give_up_s: float | None = None, only: Callable[[BaseException], bool] | None = None):
    """``func()``, tried again while a service it needs is away (``outages`` says so once); its result. Raises
    what is not a service away at once (nor one ``only`` accepts), and the last error after ``give_up_s`` or once
    ``should_stop()``; the last wait ends at ``give_up_s``."""
    end = None if give_up_s is None else time.monotonic() + give_up_s
    while True:
        try:
            result = func()
        except Exception as exc:
            if (only is not None and not only(exc)) or not outages.failed(exc) or should_stop() or (
                    end is not None and time.monotonic() >= end):
                raise
            _sleep(outages.delay_s() if end is None else min(outages.delay_s(), end - time.monotonic()), should_stop)
            continue
        if outages.down:
            outages.ok()
        return result


def _sleep(seconds: float, should_stop: Callable[[], bool]) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not should_stop():
        time.sleep(min(0.1, max(0.0, end - time.monotonic())))


class Patient:
    """``obj`` (a results store) whose every method call waits out the lab's services away (``patiently``), for up
    to ``give_up_s``: a job's runner keeps its lease and its job while the database is away, and goes on after,
    instead of dropping the job half-recorded (which a reconciler then had to call "worker lost").

    A write whose commit was cut off by the outage is tried again: the runner's writes are upserts and
    compare-and-sets, so a second try changes nothing more (a claim that did commit reads back as not won:
    the job is then left to the reconciler, never run twice)."""

    def __init__(self, obj, outages: Outages, give_up_s: float = PATIENCE_S, meanwhile: dict | None = None) -> None:
        """``meanwhile``: methods that answer a value at once while the service is away instead of waiting (a
        poll made while a step runs, such as whether the job was canceled: the step's own timeout must still
        fire)."""
        self._obj, self._outages, self._give_up_s = obj, outages, give_up_s
        self._meanwhile = meanwhile or {}

    def alike(self, obj) -> "Patient":
        """``obj`` (another store of the same service) waited for as this one is."""
        return Patient(obj, self._outages, self._give_up_s)

    def __getattr__(self, name: str):
        value = getattr(self._obj, name)
        if not callable(value):
            return value
        if name in self._meanwhile:
            return functools.partial(_or_else, value, self._outages, self._meanwhile[name])

        def call(*args, **kwargs):
            return patiently(lambda: value(*args, **kwargs), self._outages, give_up_s=self._give_up_s)

        return call


def _or_else(func: Callable, outages: Outages, default, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except Exception as exc:
        if not outages.failed(exc):
            raise
        return default
