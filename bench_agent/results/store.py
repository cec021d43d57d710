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
message was last published, and ``panio_job_messages`` keeps that message as the
controller signed it (``keep_messages``): all a reconciler may send again.

Three modules: this one writes (``ResultStore``), ``results_history`` reads back and prunes (``History``,
which ``ResultStore`` is too), ``results_db`` holds the tables and engines both use.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from bench_agent.errors import ConfigInvalid, Unreachable
from bench_agent.results import read as reads
from bench_agent.results import sql
from bench_agent.results.db import add_missing, autocommit_for, engine_for, health_record, job_tables, create_tables
from bench_agent.results.history import BINARY_SUFFIXES, History

_ENSURED: set[str] = set()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class ResultStore(History):
    """Job history in SQLite or PostgreSQL. Every method is one short transaction: one statement committed on its
    own (``_one``, ``_reading``) where that is enough, ``engine.begin()`` where it takes several.

    Durable where it matters: a job's creation, its claim, its verdict and a cancel wait for the disk on
    PostgreSQL. What a job writes on its way there (take, beats, step records, artifacts, sent marks) commits
    *relaxed* (``engine_for``): it does not wait for the WAL to be flushed (4.5 ms a commit on the shared machine,
    against 0.05 ms), so a PostgreSQL server crash may lose its last ~0.6 s of them, never a verdict. PostgreSQL
    writes its WAL in order, so the job's durable verdict also makes everything it wrote before it durable."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine, self.single = engine_for(url), autocommit_for(url)
        self.relaxed, self.relaxed_single = engine_for(url, relaxed=True), autocommit_for(url, relaxed=True)
        self.md, self.jobs, self.steps, self.artifacts = job_tables()
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
            raise Unreachable(f"results database {self.url} unreachable: {_first_line(exc.orig)}",
                              hint="check PANIO_RESULTS_URL") from None
        except sa.exc.DBAPIError as exc:
            if exc.statement is not None:  # the connection was made: a statement failed, a bug of ours
                raise
            # refused before connecting: a query option the driver does not know (`?foo=bar`), say
            raise ConfigInvalid(f"results database URL {self.url!r} is not usable: {_first_line(exc.orig)}",
                                hint="use sqlite:///PATH or postgresql://USER@HOST/DB with libpq's "
                                     "options (sslmode=..., connect_timeout=...)") from None

    def _add_columns_and_indexes(self, conn) -> None:
        """A database made by an older panio lacks the newer job columns (all nullable) and indexes: add them."""
        add_missing(conn, (self.jobs, self.steps))

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

    def keep_messages(self, messages: list[tuple[int, str]]) -> None:
        """Keep each job's broker message ``(job_id, sealed)`` as its sender sealed it (``bench_agent.jobs.sealed``),
        in one transaction, before it is published: what a reconciler may send again. Durable, like the job."""
        from bench_agent.results.db import message_table

        with (self.single if len(messages) == 1 else self.engine).begin() as c:
            c.execute(message_table().insert(), [{"job_id": i, "message": m} for i, m in messages])

    def message(self, job_id: int) -> str | None:
        """Job ``job_id``'s kept message (``keep_messages``); None when there is none."""
        from bench_agent.results.db import message_table

        m = message_table()
        with self._reading() as c:
            return c.execute(m.select().with_only_columns(m.c.message).where(m.c.job_id == job_id)).scalar()

    def take(self, job_id: int, worker: str, stale_before: float) -> bool:
        """Hold a queued job for ``worker`` (it waits for its lease); False if a live runner holds it,
        it was canceled or it started. A holder whose beat is older than ``stale_before`` counts as gone."""
        return self._run(sql.TAKE, relaxed=True, p_id=job_id, p_worker=worker, p_stale=stale_before,
                         p_now=time.time()) == 1

    def take_reading_health(self, job_id: int, worker: str, stale_before: float,
                            target: str) -> tuple[bool, dict[str, Any] | None]:
        """``take``, and on PostgreSQL ``target``'s health record (``HealthStore.get``) read in the same statement:
        (taken, the record, or None where it was not read). The health tables must exist (``HealthStore``)."""
        if self.relaxed is self.engine:
            return self.take(job_id, worker, stale_before), None
        with self.relaxed_single.begin() as c:
            row = sql.TAKE_READING_HEALTH.run(c, p_id=job_id, p_worker=worker, p_stale=stale_before,
                                              p_now=time.time(), p_target=target).mappings().one()
        health = {k[2:]: v for k, v in row.items() if k.startswith("h_")}
        return bool(row["taken"]), health_record(target, health if health["target"] is not None else None)

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

    def add_event(self, job_id: int, event: str, text: str) -> None:
        """Record what happened to a job besides its steps (``resent``: a reconciler sent it again, and why)."""
        from bench_agent.results.db import event_table

        self._one(event_table().insert().values(job_id=job_id, at=time.time(), event=event[:32], text=text))

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


_STEP_COLUMNS = reads.STEP_COLUMNS[2:]  # a step's record, without its key (job_id, idx)


def _step_row(step: dict) -> dict:
    return {"name": step["name"], "command": step["command"], "status": step["status"],
            "exit_status": step.get("exit_status"), "duration_s": step.get("duration_s"),
            "checks": json.dumps(step.get("checks", [])), "captured": json.dumps(step.get("captured", {})),
            "output": step.get("output", ""), "started_at": step.get("started_at")}
