"""The results database: job history, step results and artifacts (SQLAlchemy Core).

One store, two engines: SQLite (a file in the user's state directory, the
embedded default) and PostgreSQL (``PANIO_RESULTS_URL=postgresql://...``,
shared by the controller and the workers of every control host). The caller
passes the URL; nothing here opens a connection on import.

A job row carries both axes kept apart by design: ``health`` (did the lab
deliver a verdict: complete, incomplete, canceled, timed_out) and ``result``
(did the board pass: passed, failed). ``state`` (queued, running, done) plus
an atomic claim decide who runs a job, so a redelivered task never runs it twice.
``worker`` and ``beat_at`` say who holds a job and when its runner last showed
signs of life (``bench_agent.jobs.reconcile``); ``sent_at`` is when its broker
message was last published.
"""

from __future__ import annotations

import base64
import functools
import json
import time
from typing import Any

from bench_agent.errors import ConfigInvalid, Unreachable
from bench_agent.jobs import results_read as reads
from bench_agent.jobs import sql
from bench_agent.jobs.results_read import JOB_FILTERS, NOT_DONE, job_dict as _job_dict, step_dict as _step_dict

BINARY_SUFFIXES = (".png",)  # artifacts kept as bytes (screenshots); every other artifact is text
PRUNE_BATCH = 500  # jobs a retention transaction removes: a writer waits for at most one batch (docs/scale.md)

_ENGINES: dict[tuple[str, bool], Any] = {}
_AUTOCOMMIT: dict[tuple[str, bool], Any] = {}
_ENSURED: set[str] = set()


# Built once per process: the engine's compiled-statement cache keys on the Table objects, so fresh
# tables per call (a store per call) kept hundreds of copies alive in a long-lived `schedule serve`.
@functools.cache
def _tables():
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
    # the reads that skip SQLAlchemy (results_read) name the columns in this order
    assert tuple(jobs.c.keys()) == reads.JOB_COLUMNS and tuple(steps.c.keys()) == reads.STEP_COLUMNS
    return md, jobs, steps, artifacts


def _engine(url: str, relaxed: bool = False):
    """The engine of ``url`` (one per process). ``relaxed``: on PostgreSQL, a pool of its own whose commits do
    not wait for the WAL to reach the disk (``synchronous_commit = off``; what a job writes on its way to its
    verdict, ``ResultStore``); elsewhere the same engine (SQLite in WAL mode with ``synchronous=NORMAL`` never
    waits for the disk on commit)."""
    if relaxed and not url.startswith("postgresql"):
        return _engine(url)
    if (url, relaxed) not in _ENGINES:
        import sqlalchemy as sa

        if url.startswith("postgresql://"):
            url_eff = "postgresql+psycopg://" + url[len("postgresql://"):]
        else:
            url_eff = url
        kwargs: dict[str, Any] = {}
        if url_eff.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 30}
        try:
            engine = sa.create_engine(url_eff, **kwargs)
        except (sa.exc.ArgumentError, ImportError) as exc:
            raise ConfigInvalid(f"results database URL {url!r} is not usable: {exc}",
                                hint="use sqlite:///PATH or postgresql://USER@HOST/DB") from None
        if url_eff.startswith("sqlite"):
            sa.event.listen(engine, "connect", _sqlite_pragmas)
        if relaxed:  # once per pooled connection (an `options` argument would replace the URL's own)
            sa.event.listen(engine, "connect", _relaxed_commits)
        _ENGINES[url, relaxed] = engine
    return _ENGINES[url, relaxed]


def _autocommit(url: str, relaxed: bool = False):
    """The engine of ``url`` for statements that are a transaction by themselves (a read, or a write that needs
    no other). On PostgreSQL each commits on its own: one round trip, where BEGIN and COMMIT (or ROLLBACK) around
    it cost two more. SQLite's are calls in this process, and its driver begins only before a write: there it is
    the engine itself (switching a connection's mode costs more than it saves). The same pool either way."""
    if (url, relaxed) not in _AUTOCOMMIT:
        engine = _engine(url, relaxed)
        _AUTOCOMMIT[url, relaxed] = (engine.execution_options(isolation_level="AUTOCOMMIT")
                                     if engine.dialect.name == "postgresql" else engine)
    return _AUTOCOMMIT[url, relaxed]


def _relaxed_commits(dbapi_conn, _record) -> None:
    """A relaxed pool's new PostgreSQL connection: its commits do not wait for the WAL to reach the disk."""
    autocommit = dbapi_conn.autocommit
    dbapi_conn.autocommit = True  # a session setting, outside any transaction
    cur = dbapi_conn.cursor()
    cur.execute("SET synchronous_commit = off")
    cur.close()
    dbapi_conn.autocommit = autocommit


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    # WAL + NORMAL: a commit survives a crash of any panio process; only a power cut can lose the last ones.
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


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


def _index_names(conn, table: str) -> set[str]:
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


class ResultStore:
    """Job history in SQLite or PostgreSQL. Every method is one short transaction: one statement committed on its
    own (``_one``, ``_reading``) where that is enough, ``engine.begin()`` where it takes several.

    Durable where it matters: a job's creation, its claim, its verdict and a cancel wait for the disk on
    PostgreSQL. What a job writes on its way there (take, beats, step records, artifacts, sent marks) commits
    *relaxed* (``_engine``): it does not wait for the WAL to be flushed (4.5 ms a commit on the shared machine,
    against 0.05 ms), so a PostgreSQL server crash may lose its last ~0.6 s of them, never a verdict. PostgreSQL
    writes its WAL in order, so the job's durable verdict also makes everything it wrote before it durable."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine, self.single = _engine(url), _autocommit(url)
        self.relaxed, self.relaxed_single = _engine(url, relaxed=True), _autocommit(url, relaxed=True)
        self.md, self.jobs, self.steps, self.artifacts = _tables()
        # the job road's statements built once (``sql``): both engines have INSERT ... ON CONFLICT
        self._prepared = self.engine.dialect.name in ("postgresql", "sqlite")
        if url not in _ENSURED:  # create the tables once per process and database
            self._ensure()
            _ENSURED.add(url)

    def _ensure(self) -> None:
        import sqlalchemy as sa

        try:
            create_tables(self.engine, self.md, then=self._add_columns_and_indexes)
        except sa.exc.OperationalError as exc:
            raise Unreachable(f"results database {self.url} unreachable: {str(exc.orig).strip().splitlines()[0]}",
                              hint="check PANIO_RESULTS_URL") from None

    def _add_columns_and_indexes(self, conn) -> None:
        """A database made by an older panio lacks the newer job columns (all nullable) and indexes: add them.
        Indexing a long history takes a while once (seconds a million jobs), under the DDL lock."""
        import sqlalchemy as sa

        inspector = sa.inspect(conn)
        for table in (self.jobs, self.steps):
            have = {c["name"] for c in inspector.get_columns(table.name)}
            for col in table.columns:
                if col.name not in have:
                    kind = col.type.compile(dialect=self.engine.dialect)
                    conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {col.name} {kind}"))
        indexed = _index_names(conn, "panio_jobs")
        for index in self.jobs.indexes:
            if index.name not in indexed:
                conn.execute(sa.schema.CreateIndex(index, if_not_exists=True))

    def _one(self, statement, relaxed: bool = False) -> int:
        """Run one statement as its own transaction (``relaxed``: not waiting for the disk); how many rows it
        changed."""
        with (self.relaxed_single if relaxed else self.single).begin() as c:  # autocommit: begin sends nothing
            return c.execute(statement).rowcount

    def _run(self, prepared: sql.Prepared, relaxed: bool = False, **values: Any) -> int:
        """``_one`` for a statement built once (``sql.Prepared``); how many rows it changed."""
        with (self.relaxed_single if relaxed else self.single).begin() as c:
            return prepared.run(c, **values).rowcount

    def _reading(self):
        """A connection for reads: each statement sees what is committed when it starts, as in a transaction at
        READ COMMITTED (PostgreSQL's default; SQLite reads outside a write), without BEGIN and ROLLBACK."""
        return self.single.connect()

    def _upsert(self, table, keys: dict, row: dict):
        """One statement that inserts ``keys`` + ``row``, or updates ``row`` where ``keys`` exist (both engines
        have INSERT ... ON CONFLICT); None for another engine (the caller deletes and inserts)."""
        name = self.engine.dialect.name
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            return None
        return insert(table).values(**keys, **row).on_conflict_do_update(index_elements=list(keys), set_=row)

    # --- writing -------------------------------------------------------

    def create_job(self, name: str, target: str, host: str | None, spec: dict) -> int:
        """A queued job. One that goes to a broker (``spec["via"] == "broker"``) counts as sent from now: its
        message is published right after (a reconciler calls it vanished only after two looks seconds apart)."""
        return self.create_jobs([(name, target, host, spec)], sent=spec.get("via") == "broker")[0]

    def create_jobs(self, jobs: list[tuple[str, str, str | None, dict]], sent: bool = False) -> list[int]:
        """Queued jobs ``(name, target, host, spec)`` in one transaction (a suite's: one commit for all);
        ``sent``: their messages go out right now (else ``mark_sent`` says when they did)."""
        now = time.time()
        with (self.single if len(jobs) == 1 else self.engine).begin() as c:
            return [int(c.execute(self.jobs.insert().values(
                name=name, target=target, host=host, state="queued", spec=json.dumps(spec), cancel_requested=False,
                created_at=now, sent_at=now if sent else None)).inserted_primary_key[0])
                for name, target, host, spec in jobs]

    def take(self, job_id: int, worker: str, stale_before: float) -> bool:
        """Hold a queued job for ``worker`` (it waits for its lease); False if a live runner holds it,
        it was canceled or it started. A holder whose beat is older than ``stale_before`` counts as gone."""
        return self._run(sql.TAKE, relaxed=True, p_id=job_id, p_worker=worker, p_stale=stale_before,
                         p_now=time.time()) == 1

    def beat(self, job_ids: list[int]) -> None:
        """The runners of ``job_ids`` are alive."""
        self._one(self.jobs.update().where(self.jobs.c.id.in_(job_ids), self.jobs.c.state != "done")
                  .values(beat_at=time.time()), relaxed=True)

    def release(self, job_id: int, worker: str, stale_before: float) -> bool:
        """Take a queued job back from a dead holder so it can be sent again; True if this caller did."""
        j = self.jobs.c
        return self._one(self.jobs.update()
                         .where(j.id == job_id, j.state == "queued", j.worker == worker,
                                j.beat_at.is_(None) | (j.beat_at < stale_before))
                         .values(worker=None, beat_at=None, sent_at=time.time())) == 1

    def mark_sent(self, job_id: int | list[int], previous: float | None = None) -> bool:
        """Record a (re)publication (of one job or several); with ``previous``, only if nobody re-sent it since
        (True if this caller did)."""
        j = self.jobs.c
        q = self.jobs.update().where(j.id.in_(job_id) if isinstance(job_id, list) else j.id == job_id,
                                     j.state == "queued")
        if previous is not None:
            q = q.where(j.worker.is_(None), j.sent_at == previous)
        return self._one(q.values(sent_at=time.time()), relaxed=True) > 0

    def claim(self, job_id: int, worker: str, fence: int | None = None) -> bool:
        """Move a queued job to running for ``worker`` (with ``fence``, the token of the lease it holds);
        False if someone else already has (or had) it."""
        if fence is None:
            return self._run(sql.CLAIM, p_id=job_id, p_worker=worker, p_now=time.time()) == 1
        return self._run(sql.CLAIM_FENCED, p_id=job_id, p_worker=worker, p_now=time.time(), p_fence=fence) == 1

    def claim_fenced(self, job_id: int, worker: str, target: str, fence: int) -> tuple[bool, bool]:
        """Raise ``target``'s fencing mark to ``fence`` (``fences``: only if above it) and, only if that was done,
        ``claim`` the job with it, durably: one statement on PostgreSQL, one transaction on SQLite. (mark raised,
        job claimed); a mark without a row yet is not raised (``FenceStore.claim`` makes it)."""
        values = {"p_target": target, "p_fence": int(fence), "p_id": job_id, "p_worker": worker, "p_now": time.time()}
        if self.relaxed is not self.engine:
            with self.single.begin() as c:
                raised, claimed = sql.CLAIM_FENCED_PG.run(c, **values).one()
            return bool(raised), bool(claimed)
        with self.engine.begin() as c:
            if not sql.RAISE_FENCE.run(c, p_target=target, p_fence=int(fence)).rowcount:
                return False, False
            return True, sql.CLAIM_FENCED.run(c, **values).rowcount == 1

    def set_fence(self, job_id: int, fence: int) -> None:
        self._one(self.jobs.update().where(self.jobs.c.id == job_id).values(fence=fence, leased_at=time.time()),
                  relaxed=True)

    def record_step(self, job_id: int, idx: int, step: dict) -> None:
        if self._prepared:
            self._run(sql.STEP, relaxed=True, **sql.step_values("s_", job_id, idx, _step_row(step)))
            return
        with self.relaxed.begin() as c:
            self._put_step(c, job_id, idx, step)

    def record_steps(self, job_id: int, steps: list[tuple[int, dict]]) -> None:
        """Several ``(idx, step)`` records in one transaction (one commit)."""
        if len(steps) == 1:
            self.record_step(job_id, *steps[0])
        elif steps:
            with self.relaxed.begin() as c:
                for idx, step in steps:
                    self._put_step(c, job_id, idx, step)

    def start_step(self, job_id: int, idx: int, step: dict, done: list[tuple[int, dict]] = ()) -> bool:
        """The records of the steps ``done`` since the last write, then, unless someone asked to cancel the job,
        step ``idx`` as running (one statement that reads the cancel as it writes). False when canceled
        (``done`` is recorded). SQLite: one transaction (one commit); PostgreSQL: one relaxed statement, the
        ``done`` records in its WITH (one round trip, where a transaction costs two more)."""
        if self.relaxed is self.engine:
            with self.engine.begin() as c:
                for i, record in done:
                    self._put_step(c, job_id, i, record)
                return self._start(c, job_id, idx, step)
        with self.relaxed_single.begin() as c:
            return self._start(c, job_id, idx, step, done)

    def _start(self, c, job_id: int, idx: int, step: dict, done: list[tuple[int, dict]] = ()) -> bool:
        """``done`` (PostgreSQL only: SQLite's caller writes them first, in its transaction) ride along."""
        if self._prepared and len(done) <= 1:  # the usual case (a step's start carries the previous step's record)
            values = sql.step_values("r_", job_id, idx, _step_row(step))
            if done:
                values.update(sql.step_values("d_", job_id, done[0][0], _step_row(done[0][1])))
            return sql.start(bool(done)).run(c, **values).first() is not None
        start = self._start_unless_canceled(job_id, idx, step)
        if start is not None:
            return c.execute(self._with_steps(start, job_id, done)).first() is not None
        if c.execute(self.jobs.select().with_only_columns(self.jobs.c.cancel_requested)
                     .where(self.jobs.c.id == job_id)).scalar():
            return False
        self._put_step(c, job_id, idx, step)
        return True

    def _start_unless_canceled(self, job_id: int, idx: int, step: dict):
        """INSERT (or update) the step's record SELECTed only where the job has no cancel request; None for an
        engine without INSERT ... ON CONFLICT."""
        import sqlalchemy as sa

        name = self.engine.dialect.name
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            return None
        j, row = self.jobs.c, {"job_id": job_id, "idx": idx, **_step_row(step)}
        canceled = sa.select(j.id).where(j.id == job_id, j.cancel_requested.is_(True)).exists()
        values = sa.select(*[sa.literal(v, self.steps.c[k].type).label(k) for k, v in row.items()]).where(~canceled)
        ins = insert(self.steps).from_select(list(row), values)
        return ins.on_conflict_do_update(index_elements=["job_id", "idx"],
                                         set_={k: ins.excluded[k] for k in row if k not in ("job_id", "idx")}
                                         ).returning(self.steps.c.idx)  # a row back: written (rowcount is -1 here)

    def _with_steps(self, statement, job_id: int, steps: list[tuple[int, dict]]):
        """PostgreSQL: ``statement`` that also upserts the ``(idx, step)`` records, in a data-modifying WITH (one
        statement, one round trip; it writes them whatever the statement itself finds)."""
        if not steps:
            return statement
        from sqlalchemy.dialects.postgresql import insert

        rows = [{"job_id": job_id, "idx": idx, **_step_row(step)} for idx, step in steps]
        ins = insert(self.steps).values(**rows[0]) if len(rows) == 1 else insert(self.steps).values(rows)  # one: cached
        ins = ins.on_conflict_do_update(index_elements=["job_id", "idx"],
                                        set_={k: ins.excluded[k] for k in _STEP_COLUMNS})
        return statement.add_cte(ins.cte("recorded_steps"))

    def _put_step(self, c, job_id: int, idx: int, step: dict) -> None:
        if self._prepared:
            sql.STEP.run(c, **sql.step_values("s_", job_id, idx, _step_row(step)))
            return
        upsert = self._upsert(self.steps, {"job_id": job_id, "idx": idx}, _step_row(step))
        if upsert is not None:
            c.execute(upsert)
            return
        c.execute(self.steps.delete().where(self.steps.c.job_id == job_id, self.steps.c.idx == idx))
        c.execute(self.steps.insert().values(job_id=job_id, idx=idx, **_step_row(step)))

    def finish_lost(self, job_id: int, reason: str, error: dict, checks: list[dict],
                    planned: list[dict]) -> bool:
        """A running job whose runner died, in one transaction (a reader never sees it done with a step still
        running): the job ends incomplete, its running step becomes an error with ``checks``, and each step
        of ``planned`` (name, command) never recorded is skipped. True if this caller settled it."""
        j, s = self.jobs.c, self.steps.c
        with self.engine.begin() as c:
            res = c.execute(self.jobs.update().where(j.id == job_id, j.state == "running")
                            .values(state="done", health="incomplete", result=None, reason=reason,
                                    error=json.dumps(error), finished_at=time.time()))
            if res.rowcount != 1:
                return False
            c.execute(self.steps.update().where(s.job_id == job_id, s.status == "running")
                      .values(status="error", checks=json.dumps(checks)))
            recorded = {r[0] for r in c.execute(self.steps.select().with_only_columns(s.idx)
                                                .where(s.job_id == job_id))}
            for idx, step in enumerate(planned):
                if idx not in recorded:
                    self._put_step(c, job_id, idx, {**step, "status": "skipped"})
        return True

    def add_artifact(self, job_id: int, name: str, content: str | bytes) -> None:
        """Text, or bytes for a binary name (``BINARY_SUFFIXES``: kept base64 in the same text column)."""
        if isinstance(content, bytes) != name.endswith(BINARY_SUFFIXES):
            raise ValueError(f"artifact {name!r}: bytes go with {BINARY_SUFFIXES} names, text with the others")
        if isinstance(content, bytes):
            content = base64.b64encode(content).decode()
        if self._prepared:
            self._run(sql.ARTIFACT, relaxed=True, p_job=job_id, p_name=name, p_content=content)
            return
        upsert = self._upsert(self.artifacts, {"job_id": job_id, "name": name}, {"content": content})
        if upsert is not None:
            self._one(upsert, relaxed=True)
            return
        with self.relaxed.begin() as c:
            c.execute(self.artifacts.delete().where(self.artifacts.c.job_id == job_id, self.artifacts.c.name == name))
            c.execute(self.artifacts.insert().values(job_id=job_id, name=name, content=content))

    def finish(self, job_id: int, health: str, result: str | None, reason: str = "",
               error: dict | None = None, only_if_running: bool = False, only_if_queued: bool = False,
               steps: list[tuple[int, dict]] = (), artifacts: list[tuple[str, str]] = ()) -> bool:
        """The verdict (durable); ``steps``: ``(idx, step)`` records and ``artifacts``: ``(name, text)`` written
        with it: in the same transaction on SQLite, in the verdict's own statement on PostgreSQL (WITHs: one
        round trip). They are written even if the job was done already (its verdict then stays)."""
        only = "running" if only_if_running else "queued" if only_if_queued else None
        pg = self.relaxed is not self.engine
        if self._prepared and not (only_if_running and only_if_queued) and (len(steps) <= 1 or not pg):
            values = {"p_id": job_id, "p_health": health, "p_result": result, "p_reason": reason,
                      "p_error": json.dumps(error) if error else None, "p_now": time.time()}
            if pg or not (steps or artifacts):  # one statement
                values.update(sql.artifact_values(job_id, list(artifacts)))
                if steps:
                    values.update(sql.step_values("d_", job_id, steps[0][0], _step_row(steps[0][1])))
                return self._run(sql.finish(only, bool(steps), len(artifacts)), **values) == 1
            with self.engine.begin() as c:
                for idx, step in steps:
                    self._put_step(c, job_id, idx, step)
                for name, content in artifacts:
                    sql.ARTIFACT.run(c, p_job=job_id, p_name=name, p_content=content)
                return sql.finish(only, False).run(c, **values).rowcount == 1
        q = self.jobs.update().where(self.jobs.c.id == job_id, self.jobs.c.state != "done")
        if only_if_running:
            q = q.where(self.jobs.c.state == "running")
        if only_if_queued:
            q = q.where(self.jobs.c.state == "queued")
        q = q.values(state="done", health=health, result=result, reason=reason,
                     error=json.dumps(error) if error else None, finished_at=time.time())
        if steps and pg:
            done = self._one(self._with_steps(q, job_id, steps)) == 1  # one round trip: the records ride along
        elif not steps:
            done = self._one(q) == 1
        else:
            with self.engine.begin() as c:
                for idx, step in steps:
                    self._put_step(c, job_id, idx, step)
                done = c.execute(q).rowcount == 1
        for name, content in artifacts:
            self.add_artifact(job_id, name, content)
        return done

    def request_cancel(self, job_id: int) -> None:
        self._one(self.jobs.update().where(self.jobs.c.id == job_id).values(cancel_requested=True))

    def prune(self, before: float, artifacts_only: bool = False, dry_run: bool = False,
              batch: int = PRUNE_BATCH) -> dict[str, int]:
        """Remove the artifacts (and unless ``artifacts_only`` the steps and rows) of jobs that finished
        before ``before`` (epoch seconds); queued and running jobs are never touched. Returns the counts.

        ``batch`` jobs a transaction, oldest first: a month of a busy lab's history is hundreds of thousands
        of jobs, and one transaction deleting them all would hold SQLite's write lock (or PostgreSQL's locks
        on the rows and the WAL) for minutes while every runner waits to record a step (docs/scale.md)."""
        import sqlalchemy as sa

        j, a = self.jobs.c, self.artifacts.c
        ended = sa.func.coalesce(j.finished_at, j.created_at)
        old = sa.select(j.id).where(j.state == "done", ended < before)
        if dry_run:
            return self._prune_counts(old, artifacts_only)
        counts = {"jobs": 0, "steps": 0, "artifacts": 0, "artifact_chars": 0}
        after = None  # artifacts only: the jobs stay, so walk past the ones done (ended, id) in order
        while True:
            q = old.order_by(ended, j.id).limit(batch)
            if after is not None:
                q = q.where(sa.tuple_(ended, j.id) > sa.tuple_(*after))
            with self.engine.begin() as c:
                page = c.execute(q.add_columns(ended)).all()
                if not page:
                    break
                ids = [r[0] for r in page]
                chars = c.execute(sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(a.content)), 0))
                                  .where(a.job_id.in_(ids))).scalar()
                counts["artifact_chars"] += int(chars)
                counts["artifacts"] += c.execute(self.artifacts.delete().where(a.job_id.in_(ids))).rowcount
                if not artifacts_only:
                    counts["steps"] += c.execute(self.steps.delete().where(self.steps.c.job_id.in_(ids))).rowcount
                    counts["jobs"] += c.execute(self.jobs.delete().where(j.id.in_(ids))).rowcount
            if len(page) < batch:
                break
            after = (page[-1][1], page[-1][0])
        return counts

    def _prune_counts(self, old, artifacts_only: bool) -> dict[str, int]:
        """What ``prune`` would remove (reads only)."""
        import sqlalchemy as sa

        j, s, a = self.jobs.c, self.steps.c, self.artifacts.c
        with self._reading() as c:
            artifacts, size = c.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(
                sa.func.length(a.content)), 0)).where(a.job_id.in_(old))).one()
            jobs = 0 if artifacts_only else c.execute(sa.select(sa.func.count()).where(j.id.in_(old))).scalar()
            steps = 0 if artifacts_only else c.execute(sa.select(sa.func.count()).where(s.job_id.in_(old))).scalar()
        return {"jobs": int(jobs), "steps": int(steps), "artifacts": int(artifacts), "artifact_chars": int(size)}

    # --- reading -------------------------------------------------------

    def state(self, job_id: int) -> str | None:
        with self._reading() as c:
            return c.execute(self.jobs.select().with_only_columns(self.jobs.c.state)
                             .where(self.jobs.c.id == job_id)).scalar()

    def still_queued(self, job_id: int) -> bool:
        """True while the job is queued and nobody asked to cancel it (one read, for a runner waiting to start)."""
        j = self.jobs.c
        with self._reading() as c:
            row = c.execute(self.jobs.select().with_only_columns(j.state, j.cancel_requested)
                            .where(j.id == job_id)).first()
        return row is not None and row[0] == "queued" and not row[1]

    def cancel_requested(self, job_id: int) -> bool:
        with self._reading() as c:
            return bool(c.execute(self.jobs.select().with_only_columns(self.jobs.c.cancel_requested)
                                  .where(self.jobs.c.id == job_id)).scalar())

    def job(self, job_id: int) -> dict:
        import sqlalchemy as sa

        with self._reading() as c:  # the statements results_read.Reader sends too
            row = c.execute(sa.text(reads.JOB), {"id": job_id}).mappings().first()
            if row is None:
                raise reads.no_such_job(self.url, job_id)
            steps = c.execute(sa.text(reads.STEPS), {"id": job_id}).mappings().all()
        return {**_job_dict(row), "steps": [_step_dict(s) for s in steps]}

    def list_jobs(self, limit: int = 20, target: str | None = None, state: str | None = None,
                  before: int | None = None, **equal: str | None) -> list[dict]:
        """Newest first; ``before``: only ids below it (the next page); ``equal``: more column filters
        (name, host, health, result). The statement is ``results_read.page``'s."""
        import sqlalchemy as sa

        sql, params = reads.page(limit, before, target=target, state=state, **equal)
        with self._reading() as c:
            return [_job_dict(r) for r in c.execute(sa.text(sql), params).mappings().all()]

    def last_jobs(self, targets: list[str]) -> dict[str, dict]:
        """The newest job of each of ``targets`` (a target with none is left out), without its spec."""
        import sqlalchemy as sa

        if not targets:
            return {}
        # Each target's newest job id by the end of its (target, id) index, one lookup each, in one statement
        # whose list of targets is one parameter (GROUP BY target would read every job of those targets; a
        # statement with a term per target costs more to compile and plan than to run); then those jobs, their
        # ids one parameter too (an IN list of 1,000 terms took 0.1 s to compile; parsing 1,000 specs 25 ms).
        pg = self.engine.dialect.name == "postgresql"
        newest, these = (_NEWEST_PG, _THESE_PG) if pg else (_NEWEST_SQLITE, _THESE_SQLITE)
        with self._reading() as c:
            ids = [r[0] for r in c.execute(sa.text(newest), {"targets": list(targets) if pg else json.dumps(targets)})
                   if r[0] is not None]
            rows = c.execute(sa.text(these), {"ids": ids if pg else json.dumps(ids)}).mappings().all() if ids else []
        return {r["target"]: _job_dict(r) for r in rows}

    def later_job_started(self, job: dict) -> bool:
        """Whether a job of ``job``'s target submitted after it has started (it has held the target since: its
        own health gate and verdict speak for the board now). A range of the (target, id) index."""
        j = self.jobs.c
        q = (self.jobs.select().with_only_columns(j.id)
             .where(j.target == job["target"], j.id > job["id"], j.started_at > (job.get("started_at") or 0))
             .limit(1))
        with self._reading() as c:
            return c.execute(q).first() is not None

    def active_jobs(self, ids: list[int] | None = None) -> list[dict]:
        """Jobs not done yet (queued or running), oldest first, without their steps."""
        import sqlalchemy as sa

        q = self.jobs.select().where(sa.text(NOT_DONE)).order_by(self.jobs.c.id)
        if ids is not None:
            q = q.where(self.jobs.c.id.in_(ids))
        with self._reading() as c:
            return [_job_dict(r) for r in c.execute(q).mappings().all()]

    def list_artifacts(self, job_id: int) -> dict[str, str | bytes]:
        """Name -> content: text, or bytes for a binary name (a screenshot)."""
        with self._reading() as c:
            rows = c.execute(self.artifacts.select().where(self.artifacts.c.job_id == job_id)
                             .order_by(self.artifacts.c.name)).mappings().all()
        return {r["name"]: base64.b64decode(r["content"]) if r["name"].endswith(BINARY_SUFFIXES) else r["content"]
                for r in rows}


_NEWEST_PG = ("SELECT (SELECT max(id) FROM panio_jobs WHERE target = t.name) "
              "FROM unnest(CAST(:targets AS text[])) AS t(name)")
_NEWEST_SQLITE = "SELECT (SELECT max(id) FROM panio_jobs WHERE target = t.value) FROM json_each(:targets) AS t"
_BRIEF = ", ".join(c for c in reads.JOB_COLUMNS if c != "spec")
_THESE_PG = f"SELECT {_BRIEF} FROM panio_jobs WHERE id = ANY(CAST(:ids AS bigint[]))"
_THESE_SQLITE = f"SELECT {_BRIEF} FROM panio_jobs WHERE id IN (SELECT value FROM json_each(:ids))"


_STEP_COLUMNS = reads.STEP_COLUMNS[2:]  # a step's record, without its key (job_id, idx)


def _step_row(step: dict) -> dict:
    return {"name": step["name"], "command": step["command"], "status": step["status"],
            "exit_status": step.get("exit_status"), "duration_s": step.get("duration_s"),
            "checks": json.dumps(step.get("checks", [])), "captured": json.dumps(step.get("captured", {})),
            "output": step.get("output", ""), "started_at": step.get("started_at")}
