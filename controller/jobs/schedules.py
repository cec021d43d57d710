"""Schedules: run a suite at a time of day or every so often, fired by exactly one scheduler.

Schedules live in the results database (table ``panio_schedules``), so
``schedule add`` on a laptop and ``schedule serve`` on the controller see the
same list. Exactly one scheduler runs: ``serve`` takes a lock first (a Redis
key with a TTL when Redis is configured, else a file lock in the state
directory) and a second one is refused naming the first. Even so, each firing
is claimed with a compare-and-set on ``next_due``, so a slot can never fire twice.

The scheduler is also who re-checks a target an automatic health check made
``bad`` when no job comes for it (``due`` and ``recheck``, given by ``panio
schedule serve``): it runs on every deployment that runs unattended, with no
broker as with one, and it has the lab file the check is built from. It looks
every ``HEAL_EVERY_S`` and runs at most one re-check per target at a time.
"""

from __future__ import annotations

import functools
import json
import re
import time
from datetime import datetime, timedelta
from pathlib import Path

from bench_agent import outage
from bench_agent.errors import AlreadyExists, NotConfigured, UsageError

DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
EVERY_MIN_S, EVERY_MAX_S = 1, 365 * 86400  # a schedule fires at most once a second, at least once a year
EVERY_HELP = "every DURATION, from 1s to 365d: 30s, 15m, 6h, 1d"


def parse_every(text: str) -> float:
    m = DURATION_RE.match(text.strip())
    if not m:
        raise UsageError(f"--every {text!r}: use a number and a unit, e.g. 30s, 15m, 6h, 1d", argument="every")
    every_s = float(m.group(1)) * UNITS_S[m.group(2)]
    if not EVERY_MIN_S <= every_s <= EVERY_MAX_S:
        raise UsageError(f"--every {text!r}: must be from 1s to 365d, e.g. 30s, 15m, 6h, 1d", argument="every")
    return every_s


def parse_at(text: str) -> str:
    m = re.fullmatch(r"([01]?\d|2[0-3]):([0-5]\d)", text.strip())
    if not m:
        raise UsageError(f"--at {text!r}: use a 24-hour local time, e.g. 02:30", argument="at")
    return f"{int(m.group(1)):02d}:{m.group(2)}"


def row_problem(row: dict) -> str | None:
    """Why a stored schedule cannot fire (a row written by hand or by an older panio), or None.

    ``schedule list`` and the dashboard show such a row with its problem; the scheduler never fires it."""
    import math

    at, every_s, due = row.get("at"), row.get("every_s"), row.get("next_due")
    if (at is None) == (every_s is None):
        return "it needs exactly one of a time (at) and an interval (every_s)"
    try:
        if at is not None and parse_at(str(at)) != at:
            raise UsageError(f"at {at!r}")
    except UsageError:
        return f"its time {at!r} is not HH:MM"
    if every_s is not None and not (isinstance(every_s, (int, float)) and EVERY_MIN_S <= every_s <= EVERY_MAX_S):
        return f"its interval {every_s!r} s is not from 1 s to 365 days"
    if not isinstance(due, (int, float)) or not math.isfinite(due) or not 0 < due < time.time() + 2 * EVERY_MAX_S:
        return f"its next run {due!r} is not a time"
    return None


def next_due(at: str | None, every_s: float | None, now: float) -> float:
    if every_s:
        return now + every_s
    hour, minute = map(int, at.split(":"))
    base = datetime.fromtimestamp(now)
    due = base.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if due.timestamp() <= now:
        due += timedelta(days=1)
    return due.timestamp()


@functools.cache  # once per process, like the job tables (bench_agent.results.db.job_tables)
def _table():
    import sqlalchemy as sa

    md = sa.MetaData()
    return md, sa.Table(
        "panio_schedules", md,
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("suite", sa.Text, nullable=False),
        sa.Column("at", sa.String(5)),
        sa.Column("every_s", sa.Float),
        sa.Column("next_due", sa.Float, nullable=False),
        sa.Column("last_fired", sa.Float),
        sa.Column("last_jobs", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
    )


class ScheduleStore:
    def __init__(self, url: str) -> None:
        from bench_agent.results.db import engine_for

        self.engine = engine_for(url)
        md, self.t = _table()
        md.create_all(self.engine)

    def add(self, name: str, suite: Path, at: str | None, every_s: float | None) -> dict:
        import sqlalchemy as sa

        now = time.time()
        row = {"name": name, "suite": str(suite), "at": at, "every_s": every_s,
               "next_due": next_due(at, every_s, now), "created_at": now}
        try:
            with self.engine.begin() as c:
                c.execute(self.t.insert().values(**row))
        except sa.exc.IntegrityError:
            raise AlreadyExists(f"schedule {name!r} exists", hint=f"remove it first: `panio schedule rm {name}`",
                                schedule=name) from None
        return row

    def remove(self, name: str) -> None:
        with self.engine.begin() as c:
            if c.execute(self.t.delete().where(self.t.c.name == name)).rowcount == 0:
                raise NotConfigured(f"no schedule {name!r}", hint="see `panio schedule list`", schedule=name)

    def list(self) -> list[dict]:
        """Every schedule; one the scheduler cannot fire has ``problem`` (``row_problem``) and is listed all the same."""
        with self.engine.connect() as c:
            rows = c.execute(self.t.select().order_by(self.t.c.name)).mappings().all()
        return [_readable(dict(r)) for r in rows]

    def claim_due(self, now: float) -> list[dict]:
        """Schedules due now, each moved to its next slot atomically; only the winner of a slot gets it."""
        fired = []
        for s in self.list():
            if s["problem"] or s["next_due"] > now:
                continue
            new = next_due(s["at"], s["every_s"], now)
            with self.engine.begin() as c:
                won = c.execute(self.t.update().where(self.t.c.name == s["name"], self.t.c.next_due == s["next_due"])
                                .values(next_due=new, last_fired=now)).rowcount == 1
            if won:
                fired.append(s)
        return fired

    def record(self, name: str, job_ids: list[int]) -> None:
        with self.engine.begin() as c:
            c.execute(self.t.update().where(self.t.c.name == name).values(last_jobs=json.dumps(job_ids)))


def _readable(row: dict) -> dict:
    """A stored row as ``list`` gives it: ``last_jobs`` a list, a number that is not finite None, ``problem``."""
    import math

    try:
        jobs = json.loads(row["last_jobs"] or "[]")
    except ValueError:
        jobs = []
    row["last_jobs"] = [j for j in jobs if isinstance(j, int)] if isinstance(jobs, list) else []
    for key in ("every_s", "next_due", "last_fired"):
        if isinstance(row[key], float) and not math.isfinite(row[key]):
            row[key] = None
    row["problem"] = row_problem(row)
    return row


SCHEDULER_LEASE = "_scheduler"  # not a valid target name, so it never collides with one
HEAL_EVERY_S = 2.0  # how often the scheduler looks for bad targets whose automatic re-check is due


class _Run:
    """One firing of a schedule: its thread, its jobs as (id, target) once recorded (None before)."""

    def __init__(self, seq: int) -> None:
        self.seq, self.thread, self.jobs = seq, None, None

    def created(self, payloads: list[dict]) -> None:
        self.jobs = [(p["job_id"], p["target"]) for p in payloads]


class Scheduler:
    """The one scheduler: holds the scheduler lease, fires due schedules, and re-checks bad targets when due
    (``due() -> [target]``, ``recheck(target) -> a line for the log or None``).

    ``fire(schedule, busy, created) -> [job id]`` runs the schedule's suite: ``busy`` ({target: job id}) are the
    boards still running a job of the schedule's previous run, whose part of this run ends skipped (a board never
    gets two jobs of a schedule at once, and a slow board does not make the others skip the slot; issue 43); a
    slot that finds every board of the previous run busy is skipped. ``created(payloads)`` is told the run's jobs
    once they are recorded."""

    def __init__(self, store: ScheduleStore, fire, log, ttl_s: float = 15.0, due=None, recheck=None) -> None:
        import threading

        self.store, self.fire, self.log, self.ttl_s = store, fire, log, ttl_s
        self.due, self.recheck = due, recheck
        self.outages = outage.Outages(log)  # the database or Redis away: said once, waited out (bench_agent.outage)
        self.running: dict[str, list[_Run]] = {}  # each schedule's runs still going, oldest first
        self._seq, self._recorded, self._record_lock = 0, {}, threading.Lock()
        self.checking: dict[str, object] = {}
        self.stopping = False
        self._looked_at, self._said = 0.0, ""

    def serve(self, tick_s: float = 0.5) -> None:
        from bench_agent.leases import base as leases
        from controller import backends

        from bench_agent.errors import Busy, Refused

        store = backends.lease_store(backends.NO_LAB)  # one scheduler for every lab: its lease is no lab's
        lease = outage.patiently(lambda: store.try_acquire(SCHEDULER_LEASE, {
            "holder": leases.holder_name("panio schedule serve")}, self.ttl_s), self.outages, lambda: self.stopping)
        if lease is None:
            held = store.current(SCHEDULER_LEASE) or {}
            raise Busy(f"another scheduler is running: {held.get('holder', 'unknown')}",
                       hint="exactly one `panio schedule serve` may run; see `panio lease list`",
                       holder=held.get("holder"))
        self._keep(lease)
        count = outage.patiently(lambda: len(self.store.list()), self.outages, lambda: self.stopping)
        self.log(f"scheduler running (lease token {lease.token}); {count} schedules")
        try:
            while not self.stopping:
                if lease.lost:  # Redis lost its data (a restart without persistence), or the lease expired
                    again = self._retake(store, lease)
                    if again is None:
                        time.sleep(tick_s)
                        continue
                    lease = again
                try:
                    # Redis answers and the lease is this scheduler's: only then does a slot fire (Redis away, a
                    # slot's jobs would end "not queued", one failed slot a tick; it fires once Redis is back)
                    lease.check()
                    self._tick()
                except Refused:
                    continue  # the lease is lost (``lease.lost``): taken again at the top of the loop
                except Exception as exc:
                    if not self.outages.failed(exc):
                        raise
                    outage._sleep(self.outages.delay_s(), lambda: self.stopping)  # the database or Redis away
                    continue
                if self.outages.down:
                    self.outages.ok()
                time.sleep(tick_s)
        finally:
            for th in [*(r.thread for runs in self.running.values() for r in runs), *self.checking.values()]:
                th.join()
            lease.release()

    def _tick(self) -> None:
        """Fire the due schedules, start the due re-checks."""
        import threading

        for s in self.store.claim_due(time.time()):
            going = [r for r in self.running.get(s["name"], []) if r.thread.is_alive()]
            if any(r.jobs is None for r in going):  # its jobs not recorded yet: which boards are busy is unknown
                self.log(f"schedule {s['name']}: previous run still starting; this slot is skipped")
                continue
            self._seq += 1
            run = _Run(self._seq)
            run.thread = threading.Thread(target=self._fire, args=(s, run, going), name=f"schedule-{s['name']}")
            self.running[s["name"]] = [*going, run]
            run.thread.start()
        self._heal()

    def _retake(self, store, lost):
        """The scheduler lease again after it was lost: the new lease; None while Redis is out of reach (tried
        again next tick); ``Busy`` (the process exits 8, so systemd restarts it) when another scheduler took it."""
        from bench_agent.errors import Busy, Unreachable
        from bench_agent.leases import base as leases

        lost.release()  # stops its renewals; a release with a stale token removes nothing
        try:
            lease = store.try_acquire(SCHEDULER_LEASE, {"holder": leases.holder_name("panio schedule serve")},
                                      self.ttl_s)
        except Unreachable as exc:
            said = f"scheduler lease lost; Redis out of reach ({getattr(exc, 'message', exc)}): trying again"
            if said != self._said:
                self.log(said)
            self._said = said
            return None
        if lease is None:
            held = store.current(SCHEDULER_LEASE) or {}
            self.log(f"scheduler lease lost and taken by {held.get('holder', 'another scheduler')}: stopping")
            raise Busy(f"the scheduler lease was lost and another scheduler took it: {held.get('holder', 'unknown')}",
                       hint="exactly one `panio schedule serve` may run; see `panio lease list`",
                       holder=held.get("holder"))
        self._keep(lease)
        self.log(f"scheduler lease lost (Redis restarted, or the lease expired); taken again (token {lease.token})")
        return lease

    def _keep(self, lease) -> None:
        """Keep ``lease``; its keeper retakes it at once when Redis lost its data and nobody took it meanwhile
        (``Lease.renew``): said in the log as a retake by this loop would be."""
        lease.on_retake = lambda: self.log(f"scheduler lease lost (Redis lost its data); taken again "
                                           f"(token {lease.token})")
        lease.keep(self.ttl_s)

    def _heal(self) -> None:
        """Start the due automatic re-checks, one thread per target (a check can wait for the target's lease)."""
        import threading

        if self.due is None or time.monotonic() - self._looked_at < HEAL_EVERY_S:
            return
        self._looked_at = time.monotonic()
        try:
            targets = self.due()
        except Exception as exc:  # noqa: BLE001 - no lab file yet, the database away: said once, tried again
            said = f"automatic re-checks: {getattr(exc, 'message', exc)}"
            if said != self._said:
                self.log(said)
            self._said = said
            return
        for target in targets:
            busy = self.checking.get(target)
            if busy is None or not busy.is_alive():
                th = threading.Thread(target=self._recheck, args=(target,), name=f"recheck-{target}")
                self.checking[target] = th
                th.start()

    def _recheck(self, target: str) -> None:
        try:
            said = self.recheck(target)
        except Exception as exc:  # noqa: BLE001 - one target's check must not stop the scheduler; logged
            said = f"re-check of {target}: failed: {getattr(exc, 'message', exc)}"
        if said:
            self.log(said)

    def _fire(self, s: dict, run: _Run, going: list[_Run]) -> None:
        try:
            busy = self._busy(going)
            boards = {t for r in going for _, t in r.jobs or []}
            if busy and boards <= set(busy):  # no board of the previous run is free: a run of skipped parts only
                self.log(f"schedule {s['name']}: previous run still going on every board ({', '.join(sorted(busy))}); "
                         f"this slot is skipped")
                return
            from controller.jobs.suite import still

            said = "; ".join(f"{t} skipped: {still(t, j['id'], j['state'])}" for t, j in sorted(busy.items()))
            self.log(f"schedule {s['name']}: running {s['suite']}" + (f"; {said}" if said else ""))
            job_ids = self.fire(s, {t: j["id"] for t, j in busy.items()}, run.created)
            outage.patiently(lambda: self._record(s["name"], run, job_ids), self.outages, lambda: self.stopping)
            self.log(f"schedule {s['name']}: jobs {', '.join(map(str, job_ids)) or 'none'}")
        except Exception as exc:  # noqa: BLE001 - a bad run must not stop the scheduler; it is logged and recorded
            self.log(f"schedule {s['name']}: failed: {getattr(exc, 'message', exc)}")

    def _busy(self, going: list[_Run]) -> dict[str, dict]:
        """{target: its first job not done (its row)} of the schedule's runs still going (read from the results
        database, waited for when it is away)."""
        from controller import backends

        ids = [i for r in going for i, _ in r.jobs or []]
        if not ids:
            return {}
        active = outage.patiently(lambda: backends.results_store().active_jobs(ids), self.outages,
                                  lambda: self.stopping)
        busy: dict[str, dict] = {}
        for j in active:  # oldest first
            busy.setdefault(j["target"], j)
        return busy

    def _record(self, name: str, run: _Run, job_ids: list[int]) -> None:
        """The run's jobs as the schedule's last, unless a later run of it recorded its own already (runs overlap:
        a slow board's run can end after the next one)."""
        with self._record_lock:
            if self._recorded.get(name, 0) > run.seq:
                return
            self.store.record(name, job_ids)
            self._recorded[name] = run.seq
