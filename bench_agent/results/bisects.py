"""Bisections in the results database: each one's range (last good, first bad), its bad build's failure, and
every probe job with its verdict. ``controller.jobs.bisect`` drives them; this only records and reads."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from bench_agent.errors import NotConfigured
from bench_agent.results.db import add_missing, bisect_tables, create_tables

_CREATED: set[str] = set()
_LOCK = threading.Lock()
_JSON = ("builds", "signature")
# a listed bisection's columns (``BisectStore.listed``): its job text left out
LIST_COLUMNS = ("id", "job_path", "target", "tag", "repeat", "state", "good", "bad", "reason", "created_at",
                "updated_at")


class BisectStore:
    """One short transaction a method, as the health store's."""

    def __init__(self, url: str) -> None:
        from bench_agent.results.store import ResultStore

        jobs = ResultStore(url)  # the same database as the jobs
        self.engine = jobs.engine
        self.md, self.bisects, self.probes = bisect_tables()
        with _LOCK:
            if url not in _CREATED:
                create_tables(self.engine, self.md, then=self._add_columns_and_indexes)
                _CREATED.add(url)

    def _add_columns_and_indexes(self, conn) -> None:
        """What a database made by an earlier panio lacks: the columns ``tag`` and a probe's ``target`` (both
        nullable), the probes' indexes (``job_id``'s came later), and a bisection's ``target`` that may be empty
        (a ``--tag`` bisection has none)."""
        import sqlalchemy as sa

        add_missing(conn, (self.bisects, self.probes))
        target = next(c for c in sa.inspect(conn).get_columns("panio_bisects") if c["name"] == "target")
        if target["nullable"]:
            return
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("ALTER TABLE panio_bisects ALTER COLUMN target DROP NOT NULL"))
            return
        # SQLite cannot drop a NOT NULL: the table is made again and its rows copied (it has no index)
        columns = ", ".join(c.name for c in self.bisects.columns)
        conn.execute(sa.text("ALTER TABLE panio_bisects RENAME TO panio_bisects_before"))
        self.bisects.create(conn)
        conn.execute(sa.text(f"INSERT INTO panio_bisects ({columns}) SELECT {columns} FROM panio_bisects_before"))
        conn.execute(sa.text("DROP TABLE panio_bisects_before"))

    def create(self, job_path: str, job_text: str, target: str | None, builds: list[dict], repeat: int,
               tag: str | None = None) -> int:
        now = time.time()
        with self.engine.begin() as c:
            r = c.execute(self.bisects.insert().values(
                job_path=job_path, job_text=job_text, target=target, tag=tag, builds=json.dumps(builds),
                repeat=repeat, state="running", good=0, bad=len(builds) - 1, created_at=now, updated_at=now))
            return int(r.inserted_primary_key[0])

    def get(self, bisect_id: int) -> dict[str, Any]:
        with self.engine.connect() as c:
            row = c.execute(self.bisects.select().where(self.bisects.c.id == bisect_id)).mappings().first()
            if row is None:
                raise NotConfigured(f"no bisection {bisect_id}", hint="see `panio bisect status`", bisect=bisect_id)
            probes = c.execute(self.probes.select().where(self.probes.c.bisect_id == bisect_id)
                               .order_by(self.probes.c.id)).mappings().all()
        out = dict(row)
        for key in _JSON:
            out[key] = json.loads(out[key]) if out[key] else None
        out["probes"] = [dict(p) for p in probes]
        return out

    def latest(self) -> int | None:
        with self.engine.connect() as c:
            return c.execute(self.bisects.select().with_only_columns(self.bisects.c.id)
                             .order_by(self.bisects.c.id.desc()).limit(1)).scalar()

    def update(self, bisect_id: int, **values: Any) -> None:
        values = {k: json.dumps(v) if k in _JSON else v for k, v in values.items()}
        with self.engine.begin() as c:
            c.execute(self.bisects.update().where(self.bisects.c.id == bisect_id)
                      .values(updated_at=time.time(), **values))

    def add_probe(self, bisect_id: int, build: int, job_id: int, verdict: str, why: str,
                  target: str | None = None) -> int:
        """A probe of ``build``: ``verdict`` "running" when its job starts (judged later: ``judge``)."""
        with self.engine.begin() as c:
            r = c.execute(self.probes.insert().values(bisect_id=bisect_id, build=build, job_id=job_id,
                                                      verdict=verdict, why=why, at=time.time(), target=target))
            c.execute(self.bisects.update().where(self.bisects.c.id == bisect_id).values(updated_at=time.time()))
            return int(r.inserted_primary_key[0])

    def judge(self, probe_id: int, verdict: str, why: str) -> None:
        """A probe's verdict (or its reason said again, once the bad build's failure is known)."""
        with self.engine.begin() as c:
            c.execute(self.probes.update().where(self.probes.c.id == probe_id)
                      .values(verdict=verdict, why=why, at=time.time()))
            of = self.probes.select().with_only_columns(self.probes.c.bisect_id).where(self.probes.c.id == probe_id)
            c.execute(self.bisects.update().where(self.bisects.c.id == of.scalar_subquery())
                      .values(updated_at=time.time()))

    def listed(self, limit: int = 50, before: int | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` bisections (ids below ``before``), each without its job text: its builds' names,
        the indexes of its last good and first bad build, and how many probes it has run."""
        import sqlalchemy as sa

        b, p = self.bisects, self.probes
        count = sa.select(sa.func.count()).where(p.c.bisect_id == b.c.id).scalar_subquery()
        q = sa.select(*(b.c[name] for name in LIST_COLUMNS), b.c.builds, count.label("probes"))
        if before is not None:
            q = q.where(b.c.id < before)
        with self.engine.connect() as c:
            rows = c.execute(q.order_by(b.c.id.desc()).limit(limit)).mappings().all()
        out = []
        for row in rows:
            item = dict(row)
            item["builds"] = [build["name"] for build in json.loads(item["builds"])]
            out.append(item)
        return out

    def probe_of(self, job_id: int) -> dict[str, Any] | None:
        """The bisection job ``job_id`` was a probe of (``bisect_id``, ``build``: its index, ``verdict``), or None."""
        p = self.probes
        with self.engine.connect() as c:
            row = c.execute(p.select().with_only_columns(p.c.bisect_id, p.c.build, p.c.verdict)
                            .where(p.c.job_id == job_id).order_by(p.c.id.desc()).limit(1)).mappings().first()
        return dict(row) if row else None
