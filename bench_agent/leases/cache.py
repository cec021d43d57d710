"""The lease check's reads, kept in memory and kept true by Redis (``LeaseCache``).

Every side effect checks its target's lease: one HGETALL, a Redis round trip
(0.25-0.4 ms on a 2-core control host: two process wake-ups), as long as the
side effect itself. A process that makes many side effects (a worker running
a job's steps, the MCP server, a pytest session) reads the same few lease
keys over and over. Redis can say when a key changes: with ``CLIENT
TRACKING ... BCAST PREFIX`` it sends an invalidation message for every write
under the lease prefixes (a grant, a renewal, a release, a break, an expiry,
a flush) to a connection of ours. A read answered from memory is then as
fresh as one that went to Redis: before it is used, the invalidations that
have arrived are applied (a ``poll`` of that connection that does not wait),
and Redis queues a write's invalidation before the writer's own reply
(``beforeSleep`` puts the tracking client at the head of the clients it
writes to): once a holder on this machine has its lease, the message that
says so is already in our socket.

What keeps it safe where the invalidations could stop coming:

- an entry lives at most ``MAX_AGE_S``, and a held lease no longer than the
  TTL it had when read (Redis expires a key nobody asks for lazily);
- the tracking connection closed or failing (Redis restarted, lost its data)
  drops every entry, and reads go to Redis until it is set up again;
- a Redis that refuses ``CLIENT TRACKING`` (older than 6, an ACL user that
  may not track or subscribe to ``__redis__:invalidate``) is read every
  time, as before;
- a forked child never uses its parent's connection or entries.

The first read of a process goes straight to Redis: a command line that
checks one lease makes no extra connection.
"""

from __future__ import annotations

import os
import select
import threading
import time
from typing import Any, Callable

MAX_AGE_S = 1.0  # the longest an entry is trusted, whatever the invalidations say
RETRY_S = (1.0, 30.0)  # after the tracking connection failed: reads go to Redis this long, doubling up to the max
CHANNEL = "__redis__:invalidate"

Fetch = Callable[[bool], "tuple[dict, int | None]"]  # fetch(with_ttl) -> (the hash, its PTTL in ms or None)


class LeaseCache:
    """Lease hashes by key, for one Redis, invalidated by Redis (broadcast tracking of ``prefixes``)."""

    def __init__(self, url: str, prefixes: tuple[str, ...]) -> None:
        self.url, self.prefixes = url, prefixes
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[dict, float]] = {}  # key -> (its hash, trusted until: monotonic)
        self._gen = 0  # moves on whenever entries may have gone stale: a fetch from before is not kept
        self._conn: Any = None  # the tracking connection (RESP2, subscribed to its own invalidations)
        self._ready: Callable[[], bool] = _always  # whether anything may have arrived on it (cheap)
        self._pid = os.getpid()
        self._reads = 0
        self._retry_at, self._retry_s = 0.0, RETRY_S[0]
        self._refused = False  # Redis refused tracking: read every time
        self.hits = 0  # reads answered from memory (tests and benchmarks count them)
        self.client_id: int | None = None  # the tracking connection's id in Redis (CLIENT LIST, tests)

    def read(self, key: str, fetch: Fetch) -> dict:
        """The hash at ``key``, from memory while Redis keeps it true, else ``fetch``'s."""
        with self._lock:
            now = time.monotonic()
            tracking = self._tracking(now)
            if tracking:
                self._apply_invalidations(now)
                hit = self._entries.get(key)
                if hit is not None and now < hit[1]:
                    self.hits += 1
                    return hit[0]
                tracking, gen = self._conn is not None, self._gen
        if not tracking:
            return fetch(False)[0]
        raw, pttl_ms = fetch(True)  # outside the lock: a Redis that restarts holds up only this thread
        with self._lock:
            if self._gen == gen:  # no invalidation applied meanwhile (it might have been this key's)
                ttl_s = pttl_ms / 1000 if pttl_ms and pttl_ms > 0 else MAX_AGE_S
                self._entries[key] = (raw, now + min(MAX_AGE_S, ttl_s))
        return raw

    # --- the tracking connection -------------------------------------------------

    def _tracking(self, now: float) -> bool:
        if self._pid != os.getpid():  # a forked child: its parent's socket is not its own (_drop leaves it)
            self._drop()
            self._pid, self._reads = os.getpid(), 0
        if self._conn is not None:
            return True
        self._reads += 1
        if self._refused or self._reads < 2 or now < self._retry_at:
            return False
        self._connect(now)
        return self._conn is not None

    def _connect(self, now: float) -> None:
        import redis

        conn = None
        try:
            client = redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=2,
                                          decode_responses=True, protocol=2)
            conn = client.connection_pool.make_connection()
            conn.connect()
            conn.send_command("CLIENT", "ID")
            own = int(conn.read_response())
            prefixes = [word for p in self.prefixes for word in ("PREFIX", p)]
            conn.send_command("CLIENT", "TRACKING", "ON", "REDIRECT", own, "BCAST", *prefixes)
            conn.read_response()
            conn.send_command("SUBSCRIBE", CHANNEL)
            conn.read_response()
        except redis.exceptions.ResponseError:
            self._refused = True  # no tracking here (Redis < 6, or an ACL user without it): never ask again
            _close(conn)
            return
        except (redis.exceptions.RedisError, OSError):
            self._retry_at, self._retry_s = now + self._retry_s, min(self._retry_s * 2, RETRY_S[1])
            _close(conn)
            return
        self._conn, self._ready, self.client_id = conn, _arrival_check(conn), own
        self._entries, self._gen, self._retry_s = {}, self._gen + 1, RETRY_S[0]

    def _apply_invalidations(self, now: float) -> None:
        if not self._ready():  # one poll(2), where redis-py's can_read costs three system calls
            return
        try:
            while self._conn.can_read(timeout=0):
                message = self._conn.read_response()
                if not (isinstance(message, list) and len(message) == 3 and message[0] == "message"):
                    continue
                self._gen += 1
                keys = message[2]
                if keys is None:  # FLUSHDB / FLUSHALL: everything went
                    self._entries.clear()
                    continue
                for key in keys:
                    self._entries.pop(key, None)
        except Exception:  # noqa: BLE001 - any failure of the connection: trust nothing, read Redis for a while
            self._drop()
            self._retry_at = now + self._retry_s

    def _drop(self) -> None:
        conn, self._conn, self._entries, self._ready = self._conn, None, {}, _always
        self._gen += 1
        if conn is not None and self._pid == os.getpid():
            _close(conn)


def _always() -> bool:
    return True


def _arrival_check(conn: Any) -> Callable[[], bool]:
    """A cheap look for anything that arrived on ``conn``'s socket (a message, its close): ``poll`` with no
    wait, and a TLS socket's decrypted bytes not read yet. Sound because every look that finds something
    reads until redis-py's own buffer is empty (``can_read``); without a socket to poll, always look."""
    sock = getattr(conn, "_sock", None)
    if sock is None or not hasattr(sock, "fileno"):
        return _always
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
    pending = getattr(sock, "pending", None)  # ssl.SSLSocket
    if pending is None:
        return lambda: bool(poller.poll(0))
    return lambda: bool(poller.poll(0)) or pending() > 0


def _close(conn: Any) -> None:
    if conn is None:
        return
    try:
        conn.disconnect()
    except Exception:  # noqa: BLE001 - closing a connection that already failed
        pass
