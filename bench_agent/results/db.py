"""The results database itself: its tables, its engines and their creation (SQLAlchemy Core).

One schema (``job_tables``: jobs, steps, artifacts, the jobs' sealed messages), built once per process; one engine
per URL and commit mode (``engine_for``: SQLite in WAL mode, or PostgreSQL, whose *relaxed* pool does not wait for
the disk on commit; ``autocommit_for``: for a statement that is a transaction by itself); and ``create_tables``,
which every store of this database (``ResultStore``, ``FenceStore``, the health and schedule stores) runs the first
time it opens one, safe against other processes doing the same at the same moment. Nothing here opens a connection
on import.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

from bench_agent.errors import ConfigInvalid
from bench_agent.results import read as reads
from bench_agent.results.read import JOB_FILTERS, NOT_DONE

_ENGINES: dict[tuple[str, bool], Any] = {}
_ENGINES_LOCK = threading.RLock()
_AUTOCOMMIT: dict[tuple[str, bool], Any] = {}


# Built once per process: the engine's compiled-statement cache keys on the Table objects, so fresh
# tables per call (a store per call) kept hundreds of copies alive in a long-lived `schedule serve`.
@functools.cache
def job_tables():
    import sqlalchemy as sa

    md = sa.MetaData()
    jobs = sa.Table(
        "panio_jobs", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("host", sa.String(64)),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("health", sa.String(16)),
        sa.Column("result", sa.String(16)),
        sa.Column("reason", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("worker", sa.String(200)),
        sa.Column("fence", sa.BigInteger),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("leased_at", sa.Float),
        sa.Column("finished_at", sa.Float),
        sa.Column("beat_at", sa.Float),
        sa.Column("sent_at", sa.Float),
    )
    # The history's reads (docs/scale.md): a filtered page newest first walks (filter, id) backwards and stops
    # at the page's end; a target's last job is the end of its (target, id); the queue (and a page of queued or
    # running jobs) is the few rows of a partial index of the jobs not done; retention walks the finish times
    # of old jobs. Without them each is a scan of all jobs. (An index of state would not do on SQLite: its
    # planner knows only that a state has many jobs on average, and scans.)
    for column in JOB_FILTERS:
        if column != "state":
            sa.Index(f"ix_panio_jobs_{column}_id", jobs.c[column], jobs.c.id)
    not_done = sa.text(NOT_DONE)
    sa.Index("ix_panio_jobs_active", jobs.c.id, sqlite_where=not_done, postgresql_where=not_done)
    sa.Index("ix_panio_jobs_ended_id", sa.func.coalesce(jobs.c.finished_at, jobs.c.created_at), jobs.c.id)
    steps = sa.Table(
        "panio_steps", md,
        sa.Column("job_id", sa.Integer, sa.ForeignKey("panio_jobs.id"), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("command", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("exit_status", sa.Integer),
        sa.Column("duration_s", sa.Float),
        sa.Column("checks", sa.Text),
        sa.Column("captured", sa.Text),
        sa.Column("output", sa.Text),
        sa.Column("started_at", sa.Float),  # wall clock: `job triage` cuts the step's window of the serial log
    )
    artifacts = sa.Table(
        "panio_artifacts", md,
        sa.Column("job_id", sa.Integer, sa.ForeignKey("panio_jobs.id"), primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("content", sa.Text, nullable=False),
    )
    # A job's broker message as the controller sealed it (``bench_agent.jobs.sealed``): the only thing a reconciler
    # sends again. Its own table: a few kB a job that no read of the history needs.
    sa.Table("panio_job_messages", md,
             sa.Column("job_id", sa.Integer, primary_key=True, autoincrement=False),
             sa.Column("message", sa.Text, nullable=False))
    # What happened to a job besides its steps, for its page (``ResultStore.add_event``): a reconciler sending it
    # again after its worker was killed or Redis lost its message, or refusing to. A few rows a job at most.
    sa.Table("panio_job_events", md,
             sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("job_id", sa.Integer, nullable=False, index=True),
             sa.Column("at", sa.Float, nullable=False),
             sa.Column("event", sa.String(32), nullable=False),
             sa.Column("text", sa.Text, nullable=False))
    # the reads that skip SQLAlchemy (results_read) name the columns in this order
    assert tuple(jobs.c.keys()) == reads.JOB_COLUMNS and tuple(steps.c.keys()) == reads.STEP_COLUMNS
    return md, jobs, steps, artifacts


def message_table():
    """``panio_job_messages`` (in ``job_tables``'s metadata: created with the job tables)."""
    return job_tables()[0].tables["panio_job_messages"]


def event_table():
    """``panio_job_events`` (in ``job_tables``'s metadata: created with the job tables)."""
    return job_tables()[0].tables["panio_job_events"]


_HEALTH_TABLES: tuple | None = None


def health_tables():
    """The health tables (``bench_agent.health.state``): each target's current health and its history."""
    global _HEALTH_TABLES
    if _HEALTH_TABLES is None:
        import sqlalchemy as sa

        md = sa.MetaData()
        current = sa.Table(
            "panio_health", md,
            sa.Column("target", sa.String(64), primary_key=True),
            sa.Column("health", sa.String(16), nullable=False),
            sa.Column("reason", sa.Text),
            sa.Column("set_by", sa.String(200)),
            sa.Column("set_at", sa.Float, nullable=False),
            sa.Column("job_id", sa.Integer),
            sa.Column("checked_at", sa.Float),
            sa.Column("recheck_at", sa.Float),  # set: an automatic check made it bad; re-checked from then on
            sa.Column("failures", sa.Integer),  # automatic checks failed in a row (the backoff's exponent)
            sa.Column("rechecking_at", sa.Float),  # set: its automatic re-check was taken then and runs now
        )
        events = sa.Table(
            "panio_health_events", md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("target", sa.String(64), nullable=False, index=True),
            sa.Column("health", sa.String(16), nullable=False),
            sa.Column("previous", sa.String(16)),
            sa.Column("reason", sa.Text),
            sa.Column("set_by", sa.String(200)),
            sa.Column("at", sa.Float, nullable=False),
            sa.Column("job_id", sa.Integer),
        )
        _HEALTH_TABLES = (md, current, events)
    return _HEALTH_TABLES


def health_record(target: str, row: Any) -> dict[str, Any]:
    """Target ``target``'s health record from its row (a mapping, None: never checked)."""
    if row is None:
        return {"target": target, "health": "unknown", "reason": "never checked", "set_by": None,
                "set_at": None, "job_id": None, "checked_at": None, "recheck_at": None, "failures": None,
                "rechecking_at": None}
    return dict(row)


@functools.cache  # once per process, like the job tables
def fence_table():
    """The fencing tokens' high-water marks (``bench_agent.leases.fences.FenceStore``): a table of their own."""
    import sqlalchemy as sa

    md = sa.MetaData()
    return md, sa.Table("panio_fences", md,
                        sa.Column("target", sa.String(64), primary_key=True),
                        sa.Column("high", sa.BigInteger, nullable=False))


@functools.cache  # once per process, like the job tables
def token_table():
    """The controller API's tokens (``controller.api.tokens``): only a hash of each secret, never the secret."""
    import sqlalchemy as sa

    md = sa.MetaData()
    return md, sa.Table("panio_api_tokens", md,
                        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
                        sa.Column("name", sa.String(64), nullable=False, index=True),
                        sa.Column("scope", sa.String(16), nullable=False),
                        sa.Column("targets", sa.Text, nullable=False),  # JSON lists: a submitter's allow list
                        sa.Column("tags", sa.Text, nullable=False),
                        sa.Column("hash", sa.String(64), nullable=False, unique=True),
                        sa.Column("created_at", sa.Float, nullable=False),
                        sa.Column("created_by", sa.String(200)),
                        sa.Column("expires_at", sa.Float),
                        sa.Column("revoked_at", sa.Float),
                        sa.Column("last_used_at", sa.Float))


POOL_ENV, POOL_DEFAULT = "PANIO_RESULTS_POOL", 4
# how long a caller waits for a connection of a full pool before ``sa.exc.TimeoutError`` (the dashboard's API
# answers it 503 busy): ``PANIO_RESULTS_POOL_WAIT_S``
POOL_WAIT_ENV, POOL_WAIT_S = "PANIO_RESULTS_POOL_WAIT_S", 30.0


def pool_size() -> int:
    """Connections this process may hold to a PostgreSQL results database: ``PANIO_RESULTS_POOL`` (default 4).

    One pool a process and URL, shared by every store, both commit modes, reads and writes; a caller that finds
    it full waits for a connection (up to ``pool_wait_s``) and never opens one more. Only the controller's
    processes connect (a worker without ``PANIO_RESULTS_URL`` holds none): the database sees at most this many
    a controller process, whatever the number of hosts (docs/scale.md)."""
    return int(_env_number(POOL_ENV, POOL_DEFAULT, int, 1, 1000, "a whole number of connections"))


def pool_wait_s() -> float:
    """How long a caller waits for a connection of a full pool: ``PANIO_RESULTS_POOL_WAIT_S`` (default 30)."""
    return _env_number(POOL_WAIT_ENV, POOL_WAIT_S, float, 0.1, 3600, "seconds")


def _env_number(name: str, default: float, kind: type, low: float, high: float, what: str) -> float:
    """The number in environment variable ``name`` (``default`` when unset), from ``low`` to ``high``;
    ``ConfigInvalid`` saying ``what`` it wants otherwise."""
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ConfigInvalid(f"{name}={raw!r}: want {what} from {low:g} to {high:g}",
                            hint=f"unset it for the default ({default:g})")
    return value


def add_missing(conn, tables) -> None:
    """What a database made by an older panio lacks of ``tables``: their newer columns (all nullable) and
    indexes, added. Indexing a long history takes a while once (seconds a million jobs), under the DDL lock."""
    import sqlalchemy as sa

    inspector = sa.inspect(conn)
    for table in tables:
        have = {c["name"] for c in inspector.get_columns(table.name)}
        for col in table.columns:
            if col.name not in have:
                kind = col.type.compile(dialect=conn.dialect)
                conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {col.name} {kind}"))
        indexed = index_names(conn, table.name)
        for index in table.indexes:
            if index.name not in indexed:
                conn.execute(sa.schema.CreateIndex(index, if_not_exists=True))


def engine_for(url: str, relaxed: bool = False):
    """The engine of ``url``: one per process and URL, over one pool (``pool_size``). ``relaxed``: on PostgreSQL,
    the same pool, whose connection is switched for the statement to commits that do not wait for the WAL to
    reach the disk (``synchronous_commit = off``; what a job writes on its way to its verdict, ``ResultStore``),
    and back for the other engine's; elsewhere the same engine (SQLite in WAL mode with ``synchronous=NORMAL``
    never waits for the disk on commit)."""
    if relaxed and not url.startswith("postgresql"):
        return engine_for(url)
    if (url, relaxed) in _ENGINES:
        return _ENGINES[url, relaxed]
    with _ENGINES_LOCK:  # the first requests of a server come at once, on threads: one engine (one pool) for all
        return _ENGINES.get((url, relaxed)) or _new_engine(url, relaxed)


def _new_engine(url: str, relaxed: bool):
    if relaxed:  # a view of the same pool: ``_commit_mode`` switches the connection it is given
        engine = _ENGINES[url, relaxed] = engine_for(url).execution_options(panio_relaxed=True)
        return engine
    import sqlalchemy as sa

    if url.startswith("postgresql://"):
        url_eff = "postgresql+psycopg://" + url[len("postgresql://"):]
    else:
        url_eff = url
    kwargs: dict[str, Any] = {}
    if url_eff.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 30}
    elif url_eff.startswith("postgresql"):
        # bounded: a caller of a full pool waits (pool_timeout), none opens an overflow connection
        kwargs.update(pool_size=pool_size(), max_overflow=0, pool_timeout=pool_wait_s())
        from bench_agent.results.libpq import application_name  # libpq's, as the light reader's

        kwargs["connect_args"] = {"fallback_application_name": application_name()}
    try:
        engine = sa.create_engine(url_eff, **kwargs)
    except (sa.exc.ArgumentError, ImportError) as exc:
        raise ConfigInvalid(f"results database URL {url!r} is not usable: {exc}",
                            hint="use sqlite:///PATH or postgresql://USER@HOST/DB") from None
    if url_eff.startswith("sqlite"):
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    elif engine.dialect.name == "postgresql":
        sa.event.listen(engine, "engine_connect", _commit_mode)
    _ENGINES[url, relaxed] = engine
    return engine


def dispose(url: str) -> None:
    """Close this process's pooled connections to ``url`` (before its database is dropped, say)."""
    with _ENGINES_LOCK:
        _dispose(url)


def _dispose(url: str) -> None:
    for key in [k for k in _ENGINES if k[0] == url]:
        engine = _ENGINES.pop(key)
        if not key[1]:  # the relaxed engine is a view of the same pool
            engine.dispose()
    for key in [k for k in _AUTOCOMMIT if k[0] == url]:
        del _AUTOCOMMIT[key]


def autocommit_for(url: str, relaxed: bool = False):
    """The engine of ``url`` for statements that are a transaction by themselves (a read, or a write that needs
    no other). On PostgreSQL each commits on its own: one round trip, where BEGIN and COMMIT (or ROLLBACK) around
    it cost two more. SQLite's are calls in this process, and its driver begins only before a write: there it is
    the engine itself (switching a connection's mode costs more than it saves). The same pool either way."""
    if (url, relaxed) not in _AUTOCOMMIT:
        engine = engine_for(url, relaxed)
        with _ENGINES_LOCK:
            if (url, relaxed) not in _AUTOCOMMIT:
                _AUTOCOMMIT[url, relaxed] = (engine.execution_options(isolation_level="AUTOCOMMIT")
                                             if engine.dialect.name == "postgresql" else engine)
    return _AUTOCOMMIT[url, relaxed]


def _commit_mode(conn) -> None:
    """A PostgreSQL connection taken from the pool: its commits relaxed for the relaxed engine, durable for the
    others. A session setting, changed outside any transaction and only when the connection's last user wanted
    the other mode (one round trip then; measured in benchmarks/results_writes.py)."""
    want = bool(conn.get_execution_options().get("panio_relaxed"))
    pooled = conn.connection
    if pooled.info.get("relaxed", False) == want:
        return
    dbapi_conn = pooled.dbapi_connection
    try:
        autocommit = dbapi_conn.autocommit
        dbapi_conn.autocommit = True
        try:
            dbapi_conn.execute("SET synchronous_commit = " + ("off" if want else "on"))
        finally:
            dbapi_conn.autocommit = autocommit
    except Exception as exc:  # a connection the server dropped (a restart): not put back; the next caller gets a new one
        # invalidated here, as SQLAlchemy never saw this error (the driver's, before its Connection exists): left
        # alone, the connection went back through the pool's reset, whose ROLLBACK failed in turn, and the pool
        # logged "Exception during reset or similar" with a traceback (tests/test_results_dropped.py)
        pooled.invalidate(exc)
        raise
    pooled.info["relaxed"] = want


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    _to_wal(cur)
    # WAL + NORMAL: a commit survives a crash of any panio process; only a power cut can lose the last ones.
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


WAL_WAIT_S = 30.0


def _to_wal(cur) -> None:
    """``PRAGMA journal_mode=WAL``. The first processes to open a fresh database (a night's scheduler, dashboard
    and workers starting together) turn it to WAL at the same moment, and SQLite fails the losers at once with
    "database is locked", without its busy handler (8 processes at once: 1 in 8 failed here). Once one has
    done it the pragma is a no-op, so the others try again, for up to ``WAL_WAIT_S``, as the busy timeout would."""
    import sqlite3
    import time

    deadline, delay = time.monotonic() + WAL_WAIT_S, 0.005
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 0.25)


# Any constant will do: it only has to be the same in every panio process (a 64-bit key, "panio DDL").
_DDL_LOCK_KEY = 0x70616E696F_44444C
# What a concurrent creator of the same table makes PostgreSQL report: unique_violation (the table's row
# type in pg_type), duplicate_table, duplicate_object, duplicate_column.
_CREATED_MEANWHILE = {"23505", "42P07", "42710", "42701"}


def create_tables(engine, md, then=None) -> None:
    """Create the tables of ``md`` that do not exist yet, then ``then(connection)`` in the same transaction.

    Every panio process does this the first time it uses a database, so the workers of a fresh database
    do it at the same moment (issue 21). On PostgreSQL the creators take one advisory lock, held until
    their transaction ends: the next one then finds the tables and creates nothing. A creator that lost
    the race anyway (one that takes no lock, say an older panio) makes ours fail with "already exists"
    or a unique violation in the catalog: we look again, and then the tables are there. Any other error
    is raised as it came.
    """
    import sqlalchemy as sa

    for attempt in range(3):
        try:
            with engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _DDL_LOCK_KEY})
                md.create_all(conn)  # checkfirst: only the missing tables
                if then is not None:
                    then(conn)
            return
        except sa.exc.DBAPIError as exc:
            if attempt == 2 or not _created_meanwhile(exc):
                raise


def index_names(conn, table: str) -> set[str]:
    """The names of ``table``'s indexes, expression indexes included (SQLAlchemy's inspector skips those on
    SQLite)."""
    import sqlalchemy as sa

    if conn.dialect.name == "postgresql":
        q = "SELECT indexname FROM pg_indexes WHERE tablename = :t AND schemaname = current_schema()"
    else:
        q = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t"
    return {r[0] for r in conn.execute(sa.text(q), {"t": table})}


def _created_meanwhile(exc) -> bool:
    code = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    if code:  # PostgreSQL
        return code in _CREATED_MEANWHILE
    return "already exists" in str(exc.orig)  # SQLite: "table panio_jobs already exists"


@functools.cache  # once per process, like the job tables
def bisect_tables():
    """The bisections (``bench_agent.results.bisects``): each one's range and state, and its probes' verdicts.
    A bisection's whole state is here, so ``panio bisect resume`` continues one whose process died."""
    import sqlalchemy as sa

    md = sa.MetaData()
    bisects = sa.Table(
        "panio_bisects", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_path", sa.Text, nullable=False),
        sa.Column("job_text", sa.Text, nullable=False),  # the job file as started (a later edit does not count)
        sa.Column("target", sa.String(64)),  # the board every probe runs on; None: any board of ``tag``
        sa.Column("tag", sa.String(64)),  # probes in parallel on the boards carrying this tag (``--tag``)
        sa.Column("builds", sa.Text, nullable=False),  # JSON: [{name, artifacts}], good first, bad last
        sa.Column("repeat", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),  # running | done | stopped | failed
        sa.Column("good", sa.Integer, nullable=False),  # index in builds of the last known good build
        sa.Column("bad", sa.Integer, nullable=False),  # index of the first known bad build
        sa.Column("signature", sa.Text),  # JSON: the bad build's failure (step, divergent lines)
        sa.Column("reference", sa.Integer),  # a passing job of the good build: what failures are compared with
        sa.Column("reason", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    probes = sa.Table(
        "panio_bisect_probes", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("bisect_id", sa.Integer, nullable=False, index=True),
        sa.Column("build", sa.Integer, nullable=False),  # index in builds
        sa.Column("job_id", sa.Integer, nullable=False, index=True),  # a job's page asks which bisection probed it
        # running (its job not judged yet: a resumed bisection settles it) | reference | pass | bad | unrelated |
        # inconclusive
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("why", sa.Text, nullable=False),
        sa.Column("at", sa.Float, nullable=False),  # when it started, then when it was judged
        sa.Column("target", sa.String(64)),  # the board it ran on
    )
    return md, bisects, probes
