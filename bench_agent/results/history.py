"""The results database's history side: what ``ResultStore`` reads back, and its retention.

``History`` is the half of ``ResultStore`` (``bench_agent.results.store``) that reads jobs, steps and
artifacts back (a job's state for its runner, a page of the history, each target's last job) and that prunes
old jobs (``prune``: ``panio job prune``); the other half writes them. It uses the store's tables and
connections (``jobs``, ``steps``, ``artifacts``, ``engine``, ``_reading``), which ``ResultStore`` sets up
from ``results_db``.
"""

from __future__ import annotations

import base64
import json

from bench_agent.results import read as reads
from bench_agent.results.read import NOT_DONE, job_dict as _job_dict, step_dict as _step_dict

BINARY_SUFFIXES = (".png",)  # artifacts kept as bytes (screenshots); every other artifact is text
PRUNE_BATCH = 500  # jobs a retention transaction removes: a writer waits for at most one batch (docs/scale.md)


class History:
    """``ResultStore``'s reads and retention (a mixin: ``ResultStore`` gives the tables and connections)."""

    # --- retention -----------------------------------------------------

    def prune(self, before: float, artifacts_only: bool = False, dry_run: bool = False,
              batch: int = PRUNE_BATCH) -> dict[str, int]:
        """Remove the artifacts (and unless ``artifacts_only`` the steps and rows) of jobs that finished
        before ``before`` (epoch seconds); queued and running jobs are never touched. Returns the counts.

        ``batch`` jobs a transaction, oldest first: a month of a busy lab's history is hundreds of thousands
        of jobs, and one transaction deleting them all would hold SQLite's write lock (or PostgreSQL's locks
        on the rows and the WAL) for minutes while every runner waits to record a step (docs/scale.md)."""
        import sqlalchemy as sa

        from bench_agent.results.db import event_table, message_table

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
                c.execute(message_table().delete().where(message_table().c.job_id.in_(ids)))  # never sent again
                c.execute(event_table().delete().where(event_table().c.job_id.in_(ids)))
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

    def job(self, job_id: int, steps: bool = True) -> dict:
        """The job's row; with ``steps``, its step records under ``"steps"`` (a second statement: the recorder,
        which checks each report against the row, reads without)."""
        import sqlalchemy as sa

        with self._reading() as c:  # the statements results_read.Reader sends too
            row = c.execute(sa.text(reads.JOB), {"id": job_id}).mappings().first()
            if row is None:
                raise reads.no_such_job(self.url, job_id)
            if not steps:
                return _job_dict(row)
            records = c.execute(sa.text(reads.STEPS), {"id": job_id}).mappings().all()
        return {**_job_dict(row), "steps": [_step_dict(s) for s in records]}

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

    def jobs_by_id(self, ids: list[int]) -> dict[int, dict]:
        """The rows of the jobs ``ids`` (spec included, steps not), by id, in one statement whose ids are one
        parameter; an id with no job is left out."""
        import sqlalchemy as sa

        if not ids:
            return {}
        pg = self.engine.dialect.name == "postgresql"
        these = _THESE_FULL_PG if pg else _THESE_FULL_SQLITE
        with self._reading() as c:
            rows = c.execute(sa.text(these), {"ids": list(ids) if pg else json.dumps(list(ids))}).mappings().all()
        return {r["id"]: _job_dict(r) for r in rows}

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

    def events(self, job_id: int) -> list[dict]:
        """What happened to the job besides its steps (``ResultStore.add_event``), oldest first."""
        from bench_agent.results.db import event_table

        e = event_table()
        with self._reading() as c:
            rows = c.execute(e.select().where(e.c.job_id == job_id).order_by(e.c.id)).mappings().all()
        return [{"at": r["at"], "event": r["event"], "text": r["text"]} for r in rows]

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
# The jobs of a list of ids given as one parameter (an array on PostgreSQL, JSON on SQLite), with these columns
_IDS_PG, _IDS_SQLITE = "id = ANY(CAST(:ids AS bigint[]))", "id IN (SELECT value FROM json_each(:ids))"
_BRIEF = ", ".join(c for c in reads.JOB_COLUMNS if c != "spec")
_FULL = ", ".join(reads.JOB_COLUMNS)
_THESE_PG, _THESE_SQLITE = (f"SELECT {_BRIEF} FROM panio_jobs WHERE {ids}" for ids in (_IDS_PG, _IDS_SQLITE))
_THESE_FULL_PG, _THESE_FULL_SQLITE = (f"SELECT {_FULL} FROM panio_jobs WHERE {ids}" for ids in (_IDS_PG, _IDS_SQLITE))
