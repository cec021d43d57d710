"""Fencing high-water marks, kept where a Redis restart cannot reach them: a SQL database.

Redis hands out a lease's fencing token (an ``INCR`` per target), but a Redis
without persistence forgets its counters when it restarts, and the next lease
would start again from 1: two holders could act on one board with the same
token. So every token is *claimed* here before its lease is handed to anyone:
``claim(target, token)`` succeeds only if ``token`` is above every token
claimed before for that target (one atomic ``UPDATE ... WHERE high < token``).
Two holders can therefore never share a token, and tokens only grow, whatever
happens to Redis. Redis is told the high-water mark when it issues a token
(``max(redis, durable) + 1``), so after a restart it carries on above it.

Where the marks are (``FenceStore(url)``):

* the results database (``results_url()``: ``PANIO_RESULTS_URL``, else SQLite
  in the state directory), for every process that has it: a worker given
  ``PANIO_RESULTS_URL`` and ``panio job run`` on the controller (with
  ``PANIO_REDIS_URL``) take one target's lease from different machines, and
  that database is the one store they already share (a file would be seen by
  one machine only). A job's own row records its token too (``fence``): a
  job's runner raises the mark and claims the job in one durable statement
  (``ResultStore.claim_fenced``, through ``leases.acquire``'s ``claim``) once
  the target's mark has a row; the first lease of a target makes the row here.
* a file, for a worker without ``PANIO_RESULTS_URL`` (it reports to the
  controller's recorder, issue 38): ``STATE/worker-HOST/fences.db``, private
  SQLite (``jobs.worker.WorkerContext.reporting_stores``), which no other machine reads. Its
  marks keep its own tokens growing; the recorder records such a job as
  started only if its token is above the target's mark in the results
  database, which it then raises (the controller's recorder), so an old
  token from a host is refused there.
"""

from __future__ import annotations

import os
from bench_agent.errors import Unreachable
from bench_agent.results.sql import RAISE_FENCE

TYPE_CHECKING = False  # avoid importing typing at start-up: `panio job status` reads the results URL from here
if TYPE_CHECKING:
    from typing import Any

_ENSURED: set[str] = set()
_PRIVATE: set[str] = set()  # results.db files made private by this process (``results_url``)


def results_url() -> str:
    """The results database: ``PANIO_RESULTS_URL``, else SQLite in the state directory (the embedded default)."""
    url = os.environ.get("PANIO_RESULTS_URL")
    if url:
        return url
    from bench_agent.private import open_private, state_dir

    path = os.path.join(state_dir(), "results.db")
    # Once a process, before it opens the database: closing any descriptor of a file drops every POSIX lock this
    # process holds on it, so an open-and-close while its SQLite connections hold locks (a dashboard running a
    # job on a thread, a page a second) let another process's writer in and gave "disk I/O error".
    if path not in _PRIVATE:
        for name in (path, f"{path}-wal", f"{path}-shm"):  # SQLite gives its -wal and -shm the database's mode
            if name == path or os.path.exists(name):
                os.close(open_private(name, os.O_RDWR))  # this user's alone, made so or brought to 0600 (issue 45)
        _PRIVATE.add(path)
    return f"sqlite:///{path}"



class FenceStore:
    """The highest fencing token ever claimed per target, in the results database at ``url``."""

    def __init__(self, url: str | None = None) -> None:
        # one engine per database and process, shared with the job history (and its way of creating tables);
        # statements that stand alone commit on their own (one round trip)
        from bench_agent.results.db import autocommit_for, engine_for, fence_table, create_tables

        self.url = url or results_url()
        self.engine, self.single = engine_for(self.url), autocommit_for(self.url)
        self.relaxed = autocommit_for(self.url, relaxed=True)
        self._seen: dict[str, int] = {}  # target -> the highest token this store claimed or read (never above)
        self.md, self.table = fence_table()
        if self.url not in _ENSURED:
            self._guard(lambda: create_tables(self.engine, self.md))  # other workers may do it now
            _ENSURED.add(self.url)

    def _guard(self, func) -> Any:
        import sqlalchemy as sa

        try:
            return func()
        except sa.exc.OperationalError as exc:
            raise Unreachable(f"results database {self.url} unreachable (it keeps the fencing tokens): "
                              f"{str(exc.orig).strip().splitlines()[0]}", hint="check PANIO_RESULTS_URL") from None

    def known(self, target: str) -> bool:
        """Whether ``high(target)`` answers without reading the database."""
        return target in self._seen

    def high(self, target: str) -> int:
        """The highest token claimed for ``target`` (0: none yet), as this store last saw it: without a read when
        it claimed or read one before. Another process may have claimed a higher one since; that is safe (a
        token at or below it is refused by ``claim``, which then forgets what it saw, so the next look reads)."""
        if target in self._seen:
            return self._seen[target]
        t = self.table

        def read() -> int:
            with self.single.connect() as c:
                return int(c.execute(t.select().with_only_columns(t.c.high).where(t.c.target == target)).scalar() or 0)

        high = self._guard(read)
        self._seen[target] = high
        return high

    def claim(self, target: str, token: int, durable: bool = True) -> bool:
        """Record ``token`` as the new high-water mark; False if it is not above every token claimed before.
        ``durable=False`` (PostgreSQL: not waiting for the disk) only for a caller that commits durably before
        it acts with the token: PostgreSQL writes its WAL in order, so that commit makes this one durable too."""
        claimed = self._guard(lambda: self._claim(target, int(token), self.single if durable else self.relaxed))
        if claimed:
            self._seen[target] = int(token)
        else:
            self._seen.pop(target, None)  # someone claimed higher: read it next time
        return claimed

    def advance(self, target: str, held: int, token: int) -> bool:
        """Move the high-water mark from ``held`` to ``token`` only if ``held`` is still the highest token claimed
        (nobody was granted the target since): a holder retaking its own vanished lease. One atomic UPDATE."""
        t = self.table

        def update() -> bool:
            with self.single.begin() as c:
                return bool(c.execute(t.update().where(t.c.target == target, t.c.high == int(held))
                                      .values(high=int(token))).rowcount)

        advanced = self._guard(update)
        if advanced:
            self._seen[target] = int(token)
        else:
            self._seen.pop(target, None)
        return advanced

    def claimed(self, target: str, token: int, claim) -> tuple[bool, bool]:
        """``claim(target, token)`` (``leases.Claim``: it raises this mark with the caller's own record, in one
        statement), remembered as ``claim`` would remember it; its answer."""
        raised, mine = self._guard(lambda: claim(target, int(token)))
        if raised:
            self._seen[target] = int(token)
        else:
            self._seen.pop(target, None)
        return raised, mine

    def _claim(self, target: str, token: int, engine) -> bool:
        import sqlalchemy as sa

        t = self.table
        for _ in range(3):  # each statement on its own (one round trip on PostgreSQL): none needs another's snapshot
            with engine.begin() as c:
                if RAISE_FENCE.run(c, p_target=target, p_fence=token).rowcount:  # built once: it runs for every lease
                    return True
            with self.single.connect() as c:
                high = c.execute(t.select().with_only_columns(t.c.high).where(t.c.target == target)).scalar()
            if high is not None:
                if high >= token:
                    return False  # this token or a higher one was claimed before
                continue  # another holder inserted the first row, below this token, just now: update it
            try:
                with engine.begin() as c:
                    c.execute(t.insert().values(target=target, high=token))
                return True
            except sa.exc.IntegrityError:
                continue  # another holder inserted the first row just now: compare against it
        return False
