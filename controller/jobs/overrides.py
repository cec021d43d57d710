"""Operator overrides: act on a target another holder leases, explicitly, and on the record.

A job's lease refuses everyone but the job's own steps (exit 8), which is
right for power and input, and wrong when the capture under a job is wedged
and only the operator can see it. ``--override --reason TEXT`` on the
commands that manage capture (``panio serial stop``, ``panio serial watch``)
lets an operator act anyway:

1. the current lease on the target is read (holder, job, token);
2. the override is recorded in the results database (table
   ``panio_overrides``) *before* anything happens: who, when, what, why, and
   the job whose lease it overrode, so ``panio job status JOB`` shows it in
   that job's history;
3. a one-time grant for that target and command is written into the lease
   store (``bench_agent.leases.override``) and its nonce travels with the
   command; the host consumes it as it acts and lets the command through
   whatever job leases the target *then* (under back-to-back jobs the lease
   read in 1 has often ended by the time the command reaches the host, which
   a borrowed token could not survive);
4. the record gets the lease the host actually overrode (``settle``: the job
   it names is the one whose history shows it) and the outcome (done, or the
   error).

No lease on the target when it is read: the grant is written all the same (a
job may lease the target before the command reaches the host); the record is
written only if the host overrode a lease, and the output says "nothing
overridden" otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time

from bench_agent.errors import PanioError, UsageError

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    from typing import Any, Iterator


def add_flags(p) -> None:
    """``--override`` and ``--reason`` on a command that manages capture."""
    p.add_argument("--override", action="store_true",
                   help="act even though a job leases the target (needs --reason; recorded in the job's history)")
    p.add_argument("--reason", metavar="TEXT", help="why the override: kept with the job's history")


COLUMNS = ("id", "at", "target", "job_id", "holder", "token", "command", "by", "reason", "outcome")
# a job's overrides: sent by the store (SQLAlchemy) and by `panio job status`'s light read (results_read.Reader)
FOR_JOB = f"SELECT {', '.join(COLUMNS)} FROM panio_overrides WHERE job_id = :job_id ORDER BY id"


@functools.cache  # built once per process (see bench_agent.results.db.job_tables)
def _table():
    import sqlalchemy as sa

    md = sa.MetaData()
    t = sa.Table(
        "panio_overrides", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("job_id", sa.Integer),
        sa.Column("holder", sa.String(200)),
        sa.Column("token", sa.BigInteger),
        sa.Column("command", sa.Text, nullable=False),
        sa.Column("by", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("outcome", sa.Text),
    )
    assert tuple(t.c.keys()) == COLUMNS
    return md, t


class OverrideStore:
    def __init__(self, url: str | None = None) -> None:
        from bench_agent.leases.fences import results_url
        from bench_agent.results.db import engine_for

        self.engine = engine_for(url or results_url())
        md, self.t = _table()
        md.create_all(self.engine)

    def add(self, row: dict[str, Any]) -> int:
        with self.engine.begin() as c:
            return int(c.execute(self.t.insert().values(**row)).inserted_primary_key[0])

    def outcome(self, override_id: int, outcome: dict[str, Any]) -> None:
        import json

        with self.engine.begin() as c:
            c.execute(self.t.update().where(self.t.c.id == override_id).values(outcome=json.dumps(outcome)))

    def retarget(self, override_id: int, lease: dict[str, Any]) -> None:
        """The lease the host actually overrode (``job_id``, ``holder``, ``token``), when not the one first read."""
        with self.engine.begin() as c:
            c.execute(self.t.update().where(self.t.c.id == override_id).values(**lease))

    def prune(self, before: float, dry_run: bool = False) -> int:
        """Forget overrides made before ``before`` (retention: their jobs go with them); returns how many."""
        import sqlalchemy as sa

        old = self.t.c.at < before
        with self.engine.begin() as c:
            count = int(c.execute(sa.select(sa.func.count()).select_from(self.t).where(old)).scalar())
            if not dry_run:
                c.execute(self.t.delete().where(old))
        return count

    def for_job(self, job_id: int) -> list[dict[str, Any]]:
        import sqlalchemy as sa

        with self.engine.connect() as c:
            return _records(c.execute(sa.text(FOR_JOB), {"job_id": job_id}).mappings().all())


def operator() -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def check_flags(args) -> None:
    if args.override and not (args.reason or "").strip():
        raise UsageError("--override needs --reason TEXT (it is recorded in the job's history)",
                         hint="e.g. --override --reason 'capture wedged, no bytes for 10 min'")
    if args.reason and not args.override:
        raise UsageError("--reason goes with --override", hint="add --override, or drop --reason")


@contextlib.contextmanager
def acting(args, target: str, command: str) -> Iterator[dict[str, Any] | None]:
    """Run the enclosed dispatch as the override of ``target``'s lease (when ``args.override``).

    Yields the override record (None when not overriding; its ``id`` None while nothing is on the record)."""
    check_flags(args)
    if not args.override:
        yield None
        return
    from bench_agent.jobs import OVERRIDE_ENV
    from bench_agent.leases import override as lease_override
    from controller.backends import lease_store

    leases = lease_store()
    held = leases.current(target, secret=True) or {}
    store = OverrideStore()
    record = {"at": time.time(), "target": target, "job_id": held.get("job"), "holder": held.get("holder"),
              "token": held.get("token"), "command": command, "by": operator(), "reason": args.reason.strip()}
    # recorded before it acts when a job leases the target now; when none does, granted all the same (a job may
    # lease it before the command reaches the host) and recorded once the host says it overrode one
    record["id"] = store.add(record) if held else None
    nonce = lease_override.grant(leases, target, command.replace(" ", "."), record["by"], record["reason"])
    record["_settle"] = lambda: _settle(store, record, lease_override.used(leases, nonce))
    before = os.environ.get(OVERRIDE_ENV)
    os.environ[OVERRIDE_ENV] = nonce
    try:
        yield record
    except PanioError as err:
        settle(record)
        if record["id"] is not None:
            store.outcome(record["id"], {"ok": False, "error": err.to_json()})
        raise
    else:
        settle(record)
        if record["id"] is not None:
            store.outcome(record["id"], {"ok": True})
    finally:
        record.pop("_settle", None)
        if before is None:
            os.environ.pop(OVERRIDE_ENV, None)
        else:
            os.environ[OVERRIDE_ENV] = before


def settle(record: dict[str, Any] | None) -> None:
    """Once the command reached the host: ``record`` names the lease the host overrode (read once from the grant;
    the job its history shows it in), when that is not the one read before."""
    if record is not None and record.get("_settle") is not None:
        record.pop("_settle")()


def _settle(store: OverrideStore, record: dict[str, Any], overridden: list[dict] | None) -> None:
    if overridden is None:
        return  # not used: the command failed before the host acted
    lease = overridden[0] if overridden else {}  # none: the target was free as the host acted (nothing overridden)
    now = {"job_id": lease.get("job"), "holder": lease.get("holder"), "token": lease.get("token")}
    if any(record.get(k) != v for k, v in now.items()):
        record.update(now)
        if record["id"] is not None:
            store.retarget(record["id"], now)
        else:  # the target was free when read, leased when the host acted: on the record now
            record["id"] = store.add({k: v for k, v in record.items() if k not in ("id", "_settle")})


def for_job(job_id: int, reader=None) -> list[dict[str, Any]]:
    """The overrides of ``job_id``'s lease, oldest first (``panio job status`` shows them); through ``reader``
    (a ``results_read.Reader``: raises ``Unanswered`` where no override was ever recorded) if given."""
    if reader is not None:
        return _records(reader.rows(FOR_JOB, {"job_id": job_id}))
    return OverrideStore().for_job(job_id)


def _records(rows) -> list[dict[str, Any]]:
    import json

    return [{**r, "outcome": json.loads(r["outcome"]) if r["outcome"] else None} for r in rows]


def line(o: dict[str, Any]) -> str:
    """``override 10:32:01 by ops@ctl: panio serial stop pico: capture wedged (done)``."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(o["at"]))
    out = o.get("outcome")
    result = "no outcome recorded" if not out else "done" if out["ok"] else out["error"].get("message", "failed")
    return f"override {when} by {o['by']}: panio {o['command']} {o['target']}: {o['reason']} ({result})"
