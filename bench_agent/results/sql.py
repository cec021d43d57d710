"""Statements built and compiled once per process, run as the driver's own SQL: the job road's hot path.

Building a SQLAlchemy Core statement, walking it for its cache key and finding its compiled form costs
about a millisecond of CPU a statement on the shared 2-core machine (a no-step job's five statements
spent more CPU there than the rest of the job did: docs/performance.md). A ``Prepared`` statement is
written once with named bind parameters, compiled once per dialect, and each run only passes its
values to ``exec_driver_sql``. On PostgreSQL the driver (psycopg) then prepares it on the server after
a few runs on a connection, so it is not planned again either.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class Prepared:
    """One statement, built by ``build(dialect_name)`` with named ``bindparam``s (a constant of the statement
    keeps the value it was built with), compiled the first time it runs on a dialect."""

    def __init__(self, build: Callable[[str], Any]) -> None:
        self._build = build
        self._compiled: dict[str, tuple[str, tuple[str, ...] | None, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def _for(self, dialect) -> tuple[str, tuple[str, ...] | None, dict[str, Any]]:
        found = self._compiled.get(dialect.name)
        if found is None:
            with self._lock:
                compiled = self._build(dialect.name).compile(dialect=dialect)
                order = tuple(compiled.positiontup) if compiled.positional else None
                found = (str(compiled), order, compiled.construct_params(_check=False))
                self._compiled[dialect.name] = found
        return found

    def run(self, conn, **values: Any):
        """Run it on ``conn`` (a SQLAlchemy connection) with ``values`` for its bind parameters; the result."""
        sql, order, defaults = self._for(conn.dialect)
        params = {**defaults, **values}
        return conn.exec_driver_sql(sql, tuple(params[k] for k in order) if order is not None else params)


# --- the job road's statements (bench_agent.results.store) ---------------------------------------------------

STEP_KEYS = ("job_id", "idx", "name", "command", "status", "exit_status", "duration_s", "checks", "captured",
             "output", "started_at")


def _insert(dialect: str):
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def job_tables():
    from bench_agent.results.db import job_tables

    return job_tables()


def step_values(prefix: str, job_id: int, idx: int, row: dict) -> dict[str, Any]:
    """The bind values of a step record (``row``: ``results._step_row``) for a statement of ``step_upsert``'s
    with ``prefix``."""
    return {f"{prefix}job_id": job_id, f"{prefix}idx": idx, **{prefix + k: v for k, v in row.items()}}


def step_upsert(dialect: str, prefix: str = "s_"):
    """INSERT a step's record, or UPDATE it where (job_id, idx) exists; its values ``step_values(prefix, ...)``."""
    import sqlalchemy as sa

    _, _, steps, _ = job_tables()
    ins = _insert(dialect)(steps).values({k: sa.bindparam(prefix + k, type_=steps.c[k].type) for k in STEP_KEYS})
    return ins.on_conflict_do_update(index_elements=["job_id", "idx"],
                                     set_={k: ins.excluded[k] for k in STEP_KEYS[2:]})


def with_step(statement, dialect: str):
    """PostgreSQL: ``statement`` that also upserts one step's record (values ``step_values("d_", ...)``) in a
    data-modifying WITH: one statement, one round trip."""
    return statement.add_cte(step_upsert(dialect, "d_").cte("recorded_steps"))


STEP = Prepared(step_upsert)

TAKE = Prepared(lambda dialect: _take())
# PostgreSQL: job ``p_id`` taken (as ``TAKE``) and target ``p_target``'s health record read, in one statement
# (``ResultStore.take``): the health gate's first read rides the take (the same snapshot, one round trip less).
TAKE_READING_HEALTH = Prepared(lambda dialect: _take_reading_health())
CLAIM = Prepared(lambda dialect: _claim(fenced=False))
CLAIM_FENCED = Prepared(lambda dialect: _claim(fenced=True))
ARTIFACT = Prepared(lambda dialect: _artifact(dialect))


def _take():
    import sqlalchemy as sa

    _, jobs, _, _ = job_tables()
    j = jobs.c
    return (jobs.update()
            .where(j.id == sa.bindparam("p_id"), j.state == "queued", j.cancel_requested.is_(False),
                   j.worker.is_(None) | (j.worker == sa.bindparam("p_worker")) | (j.beat_at < sa.bindparam("p_stale")))
            .values(worker=sa.bindparam("p_worker"), beat_at=sa.bindparam("p_now")))


def _take_reading_health():
    import sqlalchemy as sa

    from bench_agent.results.db import health_tables

    current = health_tables()[1]
    taken = _take().returning(sa.literal_column("1")).cte("taken")
    one = sa.select(sa.literal_column("1").label("one")).subquery("one")
    return (sa.select(sa.exists(sa.select(sa.literal_column("1")).select_from(taken)).label("taken"),
                      *[c.label(f"h_{c.name}") for c in current.c])
            .select_from(one.outerjoin(current, current.c.target == sa.bindparam("p_target"))))


def _claim(fenced: bool):
    import sqlalchemy as sa

    _, jobs, _, _ = job_tables()
    j = jobs.c
    leased = {"fence": sa.bindparam("p_fence"), "leased_at": sa.bindparam("p_now")} if fenced else {}
    return (jobs.update().where(j.id == sa.bindparam("p_id"), j.state == "queued")
            .values(state="running", worker=sa.bindparam("p_worker"), started_at=sa.bindparam("p_now"), **leased))


def _artifact(dialect: str, prefix: str = "p_"):
    """INSERT an artifact (``{prefix}job``, ``{prefix}name``, ``{prefix}content``), or replace its content."""
    import sqlalchemy as sa

    _, _, _, artifacts = job_tables()
    ins = _insert(dialect)(artifacts).values(job_id=sa.bindparam(f"{prefix}job"), name=sa.bindparam(f"{prefix}name"),
                                             content=sa.bindparam(f"{prefix}content"))
    return ins.on_conflict_do_update(index_elements=["job_id", "name"], set_={"content": ins.excluded.content})


def artifact_values(job_id: int, artifacts: list[tuple[str, str]]) -> dict[str, Any]:
    """The bind values of ``finish(..., len(artifacts))``'s artifacts."""
    out: dict[str, Any] = {}
    for i, (name, content) in enumerate(artifacts):
        out.update({f"a{i}_job": job_id, f"a{i}_name": name, f"a{i}_content": content})
    return out


_STARTS: dict[bool, Prepared] = {}
_FINISHES: dict[tuple[str | None, bool, int], Prepared] = {}


def start(with_done: bool) -> Prepared:
    """Step ``r_idx`` of job ``r_job_id`` recorded as running (INSERT ... SELECT, or UPDATE where it exists),
    unless the job has a cancel request: one statement that reads the cancel as it writes, RETURNING a row when
    it wrote. ``with_done`` (PostgreSQL): the previous step's record rides along (``with_step``)."""
    if with_done not in _STARTS:
        def build(dialect: str):
            import sqlalchemy as sa

            _, jobs, steps, _ = job_tables()
            j = jobs.c
            canceled = sa.select(j.id).where(j.id == sa.bindparam("r_job_id"), j.cancel_requested.is_(True)).exists()
            values = sa.select(*[sa.bindparam(f"r_{k}", type_=steps.c[k].type).label(k) for k in STEP_KEYS]
                               ).where(~canceled)
            ins = _insert(dialect)(steps).from_select(list(STEP_KEYS), values)
            ins = ins.on_conflict_do_update(index_elements=["job_id", "idx"],
                                            set_={k: ins.excluded[k] for k in STEP_KEYS[2:]}
                                            ).returning(steps.c.idx)  # a row back: written (rowcount is -1 here)
            return with_step(ins, dialect) if with_done else ins

        _STARTS[with_done] = Prepared(build)
    return _STARTS[with_done]


def finish(only: str | None, with_done: bool, artifacts: int = 0) -> Prepared:
    """Job ``p_id``'s verdict (``p_health``, ``p_result``, ``p_reason``, ``p_error``, ``p_now``) unless it is
    done; ``only``: only from that state. PostgreSQL, in data-modifying WITHs of the same statement: with
    ``with_done`` a step's record rides along, and ``artifacts`` artifacts (``artifact_values``)."""
    key = (only, with_done, artifacts)
    if key not in _FINISHES:
        def build(dialect: str):
            import sqlalchemy as sa

            _, jobs, _, _ = job_tables()
            j = jobs.c
            q = jobs.update().where(j.id == sa.bindparam("p_id"), j.state != "done")
            if only is not None:
                q = q.where(j.state == only)
            q = q.values(state="done", health=sa.bindparam("p_health"), result=sa.bindparam("p_result"),
                         reason=sa.bindparam("p_reason"), error=sa.bindparam("p_error"),
                         finished_at=sa.bindparam("p_now"))
            for i in range(artifacts):
                q = q.add_cte(_artifact(dialect, f"a{i}_").cte(f"kept_artifact_{i}"))
            return with_step(q, dialect) if with_done else q

        _FINISHES[key] = Prepared(build)
    return _FINISHES[key]



def _raise_fence(dialect: str):
    import sqlalchemy as sa

    from bench_agent.results.db import fence_table

    t = fence_table()[1]
    return t.update().where(t.c.target == sa.bindparam("p_target"), t.c.high < sa.bindparam("p_fence")).values(
        high=sa.bindparam("p_fence"))


# Target ``p_target``'s fencing mark raised to ``p_fence`` if that is above it (``fences.FenceStore``).
RAISE_FENCE = Prepared(_raise_fence)
# PostgreSQL: the mark raised and, only if it was, job ``p_id`` claimed with that fence: one durable statement
# (``ResultStore.claim_fenced``). Both data-modifying WITHs see one snapshot; the claim reads the raise's RETURNING.
def _claim_fenced_pg(dialect: str):
    import sqlalchemy as sa

    return sa.text(
        "WITH raised AS (UPDATE panio_fences SET high = :p_fence WHERE target = :p_target AND high < :p_fence "
        "RETURNING 1), "
        "claimed AS (UPDATE panio_jobs SET state = 'running', worker = :p_worker, started_at = :p_now, "
        "fence = :p_fence, leased_at = :p_now WHERE id = :p_id AND state = 'queued' "
        "AND EXISTS (SELECT 1 FROM raised) RETURNING 1) "
        "SELECT EXISTS (SELECT 1 FROM raised), EXISTS (SELECT 1 FROM claimed)")


CLAIM_FENCED_PG = Prepared(_claim_fenced_pg)
