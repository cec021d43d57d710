"""Leases in Redis (``RedisLeaseStore``): the store of a lab with a broker.

A lease is a Redis hash with a TTL that a keeper thread renews while the job
runs; a crashed holder's lease expires within its TTL. Each token is claimed
in the results database before its lease is handed out (``fences``), and a
kept lease whose key vanished because Redis lost its data is retaken under a
new token when nobody was granted the target since (``retake``). The atomic steps are FCALLs of panio's Redis
functions (``bench_agent.redis_functions``). The lease model and policy live in ``bench_agent.leases.base``.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid

from bench_agent.errors import Refused, Unreachable
from bench_agent.leases.cache import LeaseCache
from bench_agent.leases.base import Claim, Lease, gives_up, lab_prefix, redact
from bench_agent.redis_functions import fcall

RETRY_S = 3.0  # how long a Redis call keeps retrying (a restart) before it fails as unreachable

# The Lua behind a lease (acquire, retake, renew, release) is in panio's Redis function library
# (bench_agent.redis_functions): no broker user may run Lua of its own.


class RedisLeaseStore:
    """Leases in Redis; ``fences`` (default: the results database) keeps the tokens' high-water mark."""

    def __init__(self, url: str, prefix: str = "panio:", fences=None) -> None:
        import redis

        self.url, self.prefix, self._fences = url, prefix, fences
        self.base_prefix = prefix  # the prefix of no lab's leases, which each lab's extends (``for_lab``)
        self.r = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, decode_responses=True)
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        self._labs: dict[str, RedisLeaseStore] = {}
        # the lease check's reads, kept true by Redis's invalidations (every key under these prefixes)
        self.cache = LeaseCache(url, (f"{prefix}lease:", f"{prefix}lab:"))

    def for_lab(self, lab_key: str | None) -> "RedisLeaseStore":
        """The store of lab ``lab_key``'s leases (this one for None), on this store's own connection: a worker
        that runs many labs' jobs (a job's payload names its lab) keeps one Redis client."""
        if not lab_key:
            return self
        if lab_key not in self._labs:
            lab = RedisLeaseStore.__new__(RedisLeaseStore)
            lab.url, lab.prefix, lab._fences = self.url, lab_prefix(self.base_prefix, lab_key), self._fences
            lab.base_prefix, lab.r, lab._errors, lab._labs = self.base_prefix, self.r, self._errors, self._labs
            lab.cache = self.cache
            self._labs[lab_key] = lab
        return self._labs[lab_key]

    def labs_with(self, target: str) -> list[str]:
        """The labs that have a lease key for ``target`` (what a caller naming no lab is also checked against)."""
        head, tail = f"{self.base_prefix}lab:", f":lease:{target}"
        keys = self.call(lambda: list(self.r.scan_iter(match=f"{head}*{tail}", count=1000)))
        return sorted({k[len(head):-len(tail)] for k in keys} - {""})

    def _key(self, target: str) -> str:
        return f"{self.prefix}lease:{target}"

    def call(self, func, *args, retry_s: float = RETRY_S):
        """Run one Redis call, riding out a restart of up to ``retry_s`` before calling Redis unreachable; less
        while a lease is ridden out in this thread and its wait ends or stops first (``base.gives_up``)."""
        deadline = time.monotonic() + retry_s
        while True:
            try:
                return func(*args)
            except self._errors as exc:
                if time.monotonic() >= deadline or gives_up():
                    raise Unreachable(f"Redis at {redact(self.url)} unreachable: {exc}",
                                      hint="check PANIO_REDIS_URL") from None
                time.sleep(0.2)

    @property
    def fences(self):
        if self._fences is None:
            from bench_agent.leases.fences import FenceStore

            self._fences = FenceStore()
        return self._fences

    def try_acquire(self, target: str, info: dict, ttl_s: float, durable_fence: bool = True,
                    claim: Claim | None = None) -> Lease | None:
        key = self._key(target)
        if not self.fences.known(target) and self.call(self.r.exists, key):
            return None  # held: no database round trip while a job waits for the lease (the script checks too)
        owner, secret = uuid.uuid4().hex, secrets.token_hex(16)
        high = self.fences.high(target)
        taken_at = time.monotonic()  # the key's TTL runs from about here, not from the grant below
        token = int(self.call(fcall, self.r, "acquire", [key, f"{self.prefix}fence:{target}"],
                              [json.dumps(info), int(ttl_s * 1000), time.time(), high, owner, secret]))
        if not token:
            return None
        try:
            if claim is not None and self.fences.high(target) > 0:  # read above: the mark has a row to raise
                # Confirmed first, then claimed with the caller's record. Should Redis restart in between and
                # hand this token to another holder, only one of the two claims it; the other is refused, and
                # the host's lease guard refuses every request of a holder whose lease Redis no longer has.
                self.check(target, token, owner)
                claimed, mine = self.fences.claimed(target, token, claim)
                if claimed:
                    return self._granted(target, token, info, owner, secret, taken_at, mine)
            # Claimed durably before anyone acts with it; then confirmed, in case Redis restarted in between.
            elif self.fences.claim(target, token, durable_fence):
                self.check(target, token, owner)
                return self._granted(target, token, info, owner, secret, taken_at)
        except Refused:
            return None
        except BaseException:
            self.release(target, token, owner)
            raise
        self.release(target, token, owner)  # another holder claimed this token while Redis forgot: try again
        return None

    def retake(self, lease: Lease) -> bool:
        """``lease``'s key vanished because Redis lost its data (a restart without persistence: the target's token
        counter is gone too; not a lease that expired unrenewed or was broken): take the target again under a
        new token, only if nobody was granted it since (the durable high-water mark is still ``lease``'s token:
        ``FenceStore.advance``). True: ``lease`` holds it again."""
        target, key = lease.target, self._key(lease.target)
        owner, secret = uuid.uuid4().hex, secrets.token_hex(16)
        token = int(self.call(fcall, self.r, "retake", [key, f"{self.prefix}fence:{target}"],
                              [json.dumps(lease.info), int(lease.ttl_s * 1000), time.time(), lease.token, owner,
                               secret]))
        if not token:
            return False
        try:
            advanced = self.fences.advance(target, lease.token, token)
        except BaseException:
            self.release(target, token, owner)
            raise
        if not advanced:
            self.release(target, token, owner)
            return False
        lease.token, lease.owner, lease.secret = token, owner, secret
        return True
    def _granted(self, target: str, token: int, info: dict, owner: str, secret: str, taken_at: float,
                 claimed: bool | None = None) -> Lease:
        lease = Lease(self, target, token, info, owner, secret)
        lease.granted_at, lease.claimed, lease.taken_at = time.monotonic(), claimed, taken_at
        return lease

    def renew(self, target: str, token: int, ttl_s: float, owner: str | None = None) -> bool:
        return bool(self.call(fcall, self.r, "renew", [self._key(target)],
                              [str(token), owner or "", int(ttl_s * 1000)]))

    def check(self, target: str, token: int, owner: str | None = None) -> None:
        held, held_by = self.call(self.r.hmget, self._key(target), "token", "owner")
        if held != str(token) or (owner is not None and held_by != owner):
            raise Refused(f"lease on {target!r} with token {token} is no longer held"
                          + (f" (now token {held})" if held and held != str(token) else "")
                          + ("" if held else " (it expired or was broken)"), target=target)

    def release(self, target: str, token: int, owner: str | None = None) -> None:
        self.call(fcall, self.r, "release", [self._key(target)], [str(token), owner or ""])

    def current(self, target: str, secret: bool = False) -> dict | None:
        """The lease on ``target`` as ``lease list`` shows it; ``secret=True`` adds its secret (lease checks)."""
        raw, pttl = self._read_hash(self._key(target), True)
        found = _describe(target, raw, pttl / 1000 if pttl and pttl > 0 else None) if raw else None
        if found and secret and raw.get("secret"):
            found["secret"] = raw["secret"]
        return found

    def holder(self, target: str) -> dict | None:
        """The lease on ``target`` as ``current(secret=True)`` says it, less ``ttl_left_s`` (None), for the check
        before every side effect: from memory while Redis keeps it true (``lease_cache``), else one HGETALL."""
        key = self._key(target)
        raw = self.cache.read(key, lambda with_ttl: self._read_hash(key, with_ttl))
        found = _describe(target, raw, None) if raw else None
        if found and raw.get("secret"):
            found["secret"] = raw["secret"]
        return found

    def _read_hash(self, key: str, with_ttl: bool) -> tuple[dict, int | None]:
        """The hash at ``key``, and with ``with_ttl`` its PTTL in ms, read together (MULTI/EXEC)."""
        if not with_ttl:
            return self.call(self.r.hgetall, key), None
        pipe = self.r.pipeline()
        pipe.hgetall(key)
        pipe.pttl(key)
        raw, pttl_ms = self.call(pipe.execute)
        return raw, pttl_ms

    def list(self, retry_s: float = RETRY_S) -> list[dict]:
        """Every lease held now; a Redis that does not answer within ``retry_s`` is ``Unreachable`` (a page that
        is looked at again passes 0: it says "unknown" at once instead of riding out a restart)."""
        keys = sorted(self.call(lambda: list(self.r.scan_iter(match=f"{self.prefix}lease:*", count=500)),
                                retry_s=retry_s))
        out = [self.current(k[len(self.prefix) + len("lease:"):]) for k in keys]
        return [x for x in out if x]

    def break_(self, target: str, by: str) -> dict | None:
        held = self.current(target)
        if held is None:
            return None
        self.call(self.r.delete, self._key(target))
        record = {"target": target, "broken_by": by, "at": time.time(), "was": held}
        self.call(self.r.lpush, f"{self.prefix}lease-breaks", json.dumps(record))
        self.call(self.r.ltrim, f"{self.prefix}lease-breaks", 0, 999)
        return record

    def breaks(self, limit: int = 20) -> list[dict]:
        return [json.loads(x) for x in self.call(self.r.lrange, f"{self.prefix}lease-breaks", 0, limit - 1)]


def _describe(target: str, raw: dict, ttl_left_s: float | None) -> dict:
    if "token" not in raw:
        return None  # expired between the two reads
    info = json.loads(raw.get("info") or "{}")
    return {"target": target, "token": int(raw["token"]), "since": float(raw.get("since", 0)),
            "ttl_left_s": ttl_left_s, **info}
