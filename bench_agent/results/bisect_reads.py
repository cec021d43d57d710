"""Reads of the bisection tables for listings (the dashboard, the controller API): the bisections newest first,
and which bisection a job was a probe of. ``BisectStore`` (``bench_agent.results.bisects``) records them and reads
one whole; this only reads, through its tables."""

from __future__ import annotations

import json
from typing import Any

LIST_COLUMNS = ("id", "job_path", "target", "tag", "repeat", "state", "good", "bad", "reason", "created_at",
                "updated_at")


def listed(store, limit: int = 50, before: int | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` bisections (ids below ``before``), each without its job text: its builds' names,
    the indexes of its last good and first bad build, and how many probes it has run."""
    import sqlalchemy as sa

    b, p = store.bisects, store.probes
    count = sa.select(sa.func.count()).where(p.c.bisect_id == b.c.id).scalar_subquery()
    q = sa.select(*(b.c[name] for name in LIST_COLUMNS), b.c.builds, count.label("probes"))
    if before is not None:
        q = q.where(b.c.id < before)
    with store.engine.connect() as c:
        rows = c.execute(q.order_by(b.c.id.desc()).limit(limit)).mappings().all()
    out = []
    for row in rows:
        item = dict(row)
        item["builds"] = [build["name"] for build in json.loads(item["builds"])]
        out.append(item)
    return out


def probe_of(store, job_id: int) -> dict[str, Any] | None:
    """The bisection job ``job_id`` was a probe of (``bisect_id``, ``build``: its index, ``verdict``), or None."""
    p = store.probes
    with store.engine.connect() as c:
        row = c.execute(p.select().with_only_columns(p.c.bisect_id, p.c.build, p.c.verdict)
                        .where(p.c.job_id == job_id).order_by(p.c.id.desc()).limit(1)).mappings().first()
    return dict(row) if row else None
