"""Device health: whether the lab can vouch for a target (LAVA's lesson), kept in the results database.

    good         its last health check passed (or an operator said so)
    bad          its health check failed: no new job runs on it until a check passes
    maintenance  an operator took it out of rotation: no new job runs on it until lifted
    unknown      nothing vouches for it: never checked, or a job on it ended incomplete
                 (with a health check configured, the check runs before its next job)

A target an *automatic* health check marked ``bad`` (one the runner ran, not an
operator) is re-checked on its own from ``recheck_at`` on, with backoff: the
check's ``retry_s`` (60 s), doubled after each failure up to ``retry_max_s``
(30 min). A check is never burned on a lab fault that is plainly there (the
capture stopped, the host silent, the plug off): it is held, the reason says
what the lab must fix, and the lab is asked again ``retry_s`` later. An
operator's ``bad`` or ``maintenance`` is never lifted automatically.

``panio_health`` holds each target's current health with its reason, who set it
and when; ``panio_health_events`` every change, newest last. Retention
(``panio job prune``, the lab's ``[retention] jobs``) removes old events but
keeps each target's newest. The tables are built once per process and created
once per database.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from bench_agent.results.db import health_record as record
from bench_agent.results.db import health_tables
from bench_agent.results.sql import Prepared

HEALTHS = ("good", "bad", "maintenance", "unknown")
BLOCKING = ("bad", "maintenance")  # no new job runs on a target in these
RETRY_S = 60.0  # the first automatic re-check of a bad target (the lab's [targets.T.health_check] retry_s)
RETRY_MAX_S = 1800.0  # the longest pause between two re-checks (retry_max_s)
RECHECK_CLAIM_S = 900.0  # a re-check taken (``claim_recheck``) is not due again for this long unless its verdict says
_CREATED: set[str] = set()
_CREATE_LOCK = threading.Lock()


def _create(md, engine, current) -> None:
    """Create the tables unless they exist (another process creating them at the same moment is no error), and
    add the columns a database made by an older panio lacks."""
    import sqlalchemy as sa

    from bench_agent.results.db import create_tables

    def add_columns(conn) -> None:
        have = {c["name"] for c in sa.inspect(conn).get_columns("panio_health")}
        for col in current.columns:
            if col.name not in have:
                conn.execute(sa.text(f"ALTER TABLE panio_health ADD COLUMN {col.name} "
                                     f"{col.type.compile(dialect=engine.dialect)}"))

    create_tables(engine, md, then=add_columns)


def _get(dialect: str):
    import sqlalchemy as sa

    current = health_tables()[1]
    return current.select().where(current.c.target == sa.bindparam("p_target"))


_GET = Prepared(_get)


class HealthStore:
    """Targets' health and its history; every method is one short transaction."""

    def __init__(self, url: str) -> None:
        from bench_agent.results.store import ResultStore

        jobs = ResultStore(url)  # the same database (and its tables) as the jobs
        self.engine, self.single = jobs.engine, jobs.single  # single: for reads, one statement, no BEGIN
        with _CREATE_LOCK:
            self.md, self.current, self.events = health_tables()
            if url not in _CREATED:
                _create(self.md, self.engine, self.current)
                _CREATED.add(url)

    def get(self, target: str) -> dict[str, Any]:
        with self.single.connect() as c:  # before every job: a statement built once
            row = _GET.run(c, p_target=target).mappings().first()
        return record(target, row)

    def all(self) -> dict[str, dict[str, Any]]:
        with self.single.connect() as c:
            return {r["target"]: dict(r) for r in c.execute(self.current.select()).mappings()}

    def set(self, target: str, health: str, reason: str, set_by: str, job_id: int | None = None,
            checked: bool = False, recheck_at: float | None = None, failures: int = 0) -> tuple[str, dict[str, Any]]:
        """Record ``health``; returns (previous health, the new record). A change is also an event.
        ``recheck_at``: when an automatic re-check may run (only an automatic check's ``bad`` sets it)."""
        if health not in HEALTHS:
            from bench_agent.errors import UsageError

            raise UsageError(f"health must be one of {', '.join(HEALTHS)}, not {health!r}")
        now = time.time()
        row = {"health": health, "reason": reason, "set_by": set_by, "set_at": now, "job_id": job_id,
               "recheck_at": recheck_at, "failures": failures, "rechecking_at": None}
        if checked:
            row["checked_at"] = now
        c_ = self.current.c
        with self.engine.begin() as c:
            old = c.execute(self.current.select().where(c_.target == target).with_for_update()).mappings().first()
            if old is None:
                c.execute(self.current.insert().values(target=target, **row))
            else:
                c.execute(self.current.update().where(c_.target == target).values(**row))
            previous = old["health"] if old else "unknown"
            c.execute(self.events.insert().values(target=target, health=health, previous=previous, reason=reason,
                                                  set_by=set_by, at=now, job_id=job_id))
        return previous, {**(dict(old) if old else {}), "target": target, **row}

    def postpone(self, target: str, reason: str, recheck_at: float) -> bool:
        """A bad (or unknown) target's automatic re-check waits for the lab: a new reason and time, the same
        health (no event)."""
        c_ = self.current.c
        with self.engine.begin() as c:
            return c.execute(self.current.update().where(c_.target == target, c_.health.in_(("bad", "unknown")),
                                                         c_.recheck_at.is_not(None))
                             .values(reason=reason, recheck_at=recheck_at, rechecking_at=None)).rowcount == 1

    def claim_recheck(self, target: str, now: float, hold_s: float = RECHECK_CLAIM_S) -> bool:
        """Take ``target``'s due automatic re-check: one at a time per target, whoever asks (the scheduler, a
        job's runner). Its ``recheck_at`` moves ``hold_s`` on in one compare-and-set, so the next asker finds it
        not due; the check's verdict then sets it anew (a checker that died leaves it due again after ``hold_s``).
        ``rechecking_at`` says when it was taken: ``describe`` says the re-check runs now, not "from" the held
        time (issue 43). True for the one that won."""
        c_ = self.current.c
        with self.engine.begin() as c:
            return c.execute(self.current.update().where(c_.target == target, c_.health.in_(("bad", "unknown")),
                                                         c_.recheck_at.is_not(None), c_.recheck_at <= now)
                             .values(recheck_at=now + hold_s, rechecking_at=now)).rowcount == 1

    def history(self, target: str, limit: int = 20) -> list[dict[str, Any]]:
        e = self.events.c
        with self.single.connect() as c:
            rows = c.execute(self.events.select().where(e.target == target).order_by(e.id.desc())
                             .limit(limit)).mappings().all()
        return [dict(r) for r in reversed(rows)]

    def prune(self, before: float, dry_run: bool = False) -> int:
        """Remove history events recorded before ``before`` (epoch seconds), except each target's newest,
        which says why it is in its current health; current health is never touched. Returns how many."""
        import sqlalchemy as sa

        e = self.events.c
        newest = sa.select(sa.func.max(e.id)).group_by(e.target)
        old = sa.and_(e.at < before, e.id.not_in(newest))
        with self.engine.begin() as c:
            if dry_run:
                return int(c.execute(sa.select(sa.func.count()).select_from(self.events).where(old)).scalar())
            # one statement picks each target's newest and deletes the rest, so an event written meanwhile
            # cannot leave a target with no history; its count is what actually went
            return int(c.execute(self.events.delete().where(old)).rowcount)


def backoff_s(failures: int, check: dict[str, Any]) -> float:
    """The pause before the next automatic re-check after ``failures`` failed checks in a row (at least one)."""
    base = float(check.get("retry_s") or RETRY_S)
    return min(base * 2 ** max(0, failures - 1), max(base, float(check.get("retry_max_s") or RETRY_MAX_S)))


def held(faults: list[dict[str, Any]], check: dict[str, Any], now: float) -> tuple[str, float]:
    """(reason, when to ask the lab again) for an automatic check held for the lab's ``faults`` (``lab_probe``)."""
    return f"its health check waits for the lab: {'; '.join(f['message'] for f in faults)}", now + backoff_s(1, check)


def recheck_due(record: dict[str, Any], now: float) -> bool:
    """An automatic check made the target bad (or a job lost with its worker left it unknown, nothing after it
    to check it), and its automatic re-check may run now."""
    return (record["health"] in ("bad", "unknown") and record.get("recheck_at") is not None
            and now >= record["recheck_at"])


def check_due(record: dict[str, Any], check: dict[str, Any] | None, now: float) -> str | None:
    """Why a target's health check must run before its next job, or None."""
    if not check:
        return None
    if recheck_due(record, now):
        return (f"it is {record['health']} and its automatic re-check is due "
                f"({record.get('reason') or 'no reason given'})")
    if record["health"] in BLOCKING:
        return None
    if record["health"] == "unknown":
        return f"its health is unknown ({record.get('reason') or 'never checked'})"
    every_s = check.get("every_s")
    last = record.get("checked_at")
    if every_s and (last is None or now - last >= every_s):
        return f"its last health check is older than {every_s:g} s"
    return None


def describe(record: dict[str, Any]) -> str:
    who = f", set by {record['set_by']}" if record.get("set_by") else ""
    when = f" at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(record['set_at']))}" if record.get("set_at") else ""
    again, taken = "", record.get("rechecking_at")
    if record["health"] == "bad" and taken and (record.get("recheck_at") or 0) > time.time():
        # taken and held (``claim_recheck``): its recheck_at is the hold's end, not when it runs
        again = f"; its automatic re-check is running now (since {time.strftime('%H:%M:%S', time.localtime(taken))})"
    elif record["health"] == "bad" and record.get("recheck_at"):
        again = f"; re-checked automatically from {time.strftime('%H:%M:%S', time.localtime(record['recheck_at']))}"
    return f"{record['health']} ({record.get('reason') or 'no reason given'}{who}{when}{again})"
