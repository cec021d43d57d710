"""Exclusive target leases: who may touch a target right now.

A job takes a lease before its first step and holds it to the end. Every
lease carries a *fencing token* (a number that only grows per target): each
step checks, before any side effect, that the lease still holds that token,
so a holder that stalled past its TTL and lost the lease can never act again.

Two stores, one interface:

``RedisLeaseStore``  the lease is a Redis hash with a TTL (``ttl_s``) that a
                     keeper thread renews while the job runs; a crashed
                     holder's lease expires within its TTL. Keys live under a
                     prefix (``PANIO_REDIS_PREFIX``) so parallel runs never collide.
``FileLeaseStore``   the embedded default (no broker): an ``flock`` on a file in
                     the state directory. The kernel drops it the instant the
                     holder dies, so no TTL is needed; it cannot be broken from
                     outside (stop the job instead).

Each lab's leases are its own: a Redis store of lab ``K`` keeps its keys under
``<prefix>lab:K:`` (``lab_prefix``), a file store in that lab's state directory
(``bench_agent.paths.lab_state_dir``), so a lease on lab A's ``h`` never blocks
lab B's ``h``. A caller with no lab uses the bare prefix, as before labs were keyed.

Tokens never go backwards, even when a Redis without persistence restarts and
forgets its counters: each token is claimed in the results database before its
lease is handed out (``bench_agent.jobs.fences``), and each Redis lease also carries
an owner nonce, so a holder whose key vanished can never pass as the next one.
A kept lease whose key vanished because Redis lost its data is *retaken* by its
holder under a new token when nobody was granted the target since
(``RedisLeaseStore.retake``; docs/operations.md says why that is safe).

Each lease also carries a *secret* (random, kept in the store beside the
token: a field of the Redis hash, the owner-only lease file) that only its
holder is handed (``Lease.credential``, ``TOKEN:SECRET``). ``panio lease list``
shows the token, never the secret, so the number it prints cannot stand in
for the holder.

Who may act on a leased target is decided by ``access``: a job's own steps
present the lease's credential (the runner passes it with each request; a
process holding a lease presents it in ``PANIO_LEASE_TOKEN``); a token that is
not the current one is refused even while the lease is free; the current token
without its secret, or without a token, is refused naming the holder. The host
enforces it for every side-effecting operation (``bench_agent.jobs.lease_guard``),
whatever the caller. Whoever can read the store itself (the broker's password,
the lease file's user, root) can read the secret too: docs/security.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Protocol

from bench_agent.errors import Busy, Refused, Unreachable
from bench_agent.jobs.lease_keeper import KEEPER, RELEASED

from bench_agent.jobs import TOKEN_ENV  # noqa: E402,F401 - said once, in the package
RETRY_S = 3.0  # how long a Redis call keeps retrying (a restart) before it fails as unreachable


def lab_prefix(prefix: str, lab_key: str | None) -> str:
    """The Redis key prefix of lab ``lab_key``'s leases (``prefix`` itself with no lab)."""
    if not lab_key:
        return prefix
    from bench_agent.paths import check_lab_key

    return f"{prefix}lab:{check_lab_key(lab_key)}:"


def redact(url: str | None) -> str | None:
    """``url`` without its password, fit to print (a broker URL may carry one)."""
    if not url or "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    cred, host = rest.rsplit("@", 1)
    return f"{scheme}://{cred.split(':', 1)[0]}:***@{host}" if ":" in cred else url


def credential(token: int | str, secret: str | None) -> str:
    """What a holder presents: ``TOKEN:SECRET`` (a lease from a store without secrets: the token alone)."""
    return f"{token}:{secret}" if secret else str(token)


def parse_credential(presented: str | int) -> tuple[str, str | None]:
    """(token, secret or None) of a presented credential."""
    token, _, secret = str(presented).strip().partition(":")
    return token, secret or None


def holder_name(what: str) -> str:
    return f"{what}@{socket.gethostname()}:{os.getpid()}"


class Lease:
    """A held lease. ``check()`` before every side effect; ``release()`` at the end."""

    def __init__(self, store: "LeaseStore", target: str, token: int, info: dict, owner: str | None = None,
                 secret: str | None = None) -> None:
        self.store, self.target, self.token, self.info, self.owner = store, target, token, info, owner
        self.secret = secret
        self.lost = False
        self.on_retake: Callable[[], None] | None = None  # told after each retake (the job's row names the token)
        self.ttl_s: float | None = None  # set by ``keep``: a kept lease whose key vanished may be retaken
        self._retaking = threading.Lock()
        self.at_once = False  # ``acquire`` got it on its first try (nothing waited in between)
        self.claimed: bool | None = None  # what ``acquire``'s ``claim`` said of the caller's record (None: not run)
        self.granted_at: float | None = None  # monotonic time its store confirmed it held, as it was granted

    @property
    def credential(self) -> str:
        """What this lease's holder presents to act on the target (``PANIO_LEASE_TOKEN``): never printed."""
        return credential(self.token, self.secret)

    def __repr__(self) -> str:  # the secret stays out of logs and tracebacks
        return f"<Lease {self.target} token {self.token}>"

    def check(self, fresh_s: float = 0.0) -> None:
        """Refused once the lease is gone. ``fresh_s``: no store read while the grant's own confirmation is
        younger than that (``try_acquire`` read the lease back an instant ago), and only once: every later
        check reads the store."""
        if self.lost:
            raise Refused(f"lease on {self.target!r} was lost (token {self.token})", target=self.target)
        granted, self.granted_at = self.granted_at, None
        if fresh_s and granted is not None and time.monotonic() - granted < fresh_s:
            return
        token = self.token
        try:
            self.store.check(self.target, token, self.owner)
        except Refused:
            if self._retake(token):
                return
            self.lost = True
            raise

    def keep(self, ttl_s: float) -> None:
        """Renew the lease every ttl/3 until ``release`` (the process's keeper thread, ``lease_keeper``)."""
        self.ttl_s = ttl_s
        KEEPER.add(self, ttl_s)

    def renew(self, ttl_s: float) -> bool:
        """One renewal; False once the lease is gone (marked lost). A store out of reach is tried again later:
        the TTL decides when the lease is really gone."""
        token = self.token
        try:
            if not self.store.renew(self.target, token, ttl_s, self.owner) and not self._retake(token):
                self.lost = True
                return False
        except Unreachable:
            pass
        return True

    def _retake(self, token: int) -> bool:
        """The lease with ``token`` is no longer in the store: take it again when the store can prove nobody else
        had it meanwhile (``RedisLeaseStore.retake``); True when this lease holds the target again."""
        retake = getattr(self.store, "retake", None)
        if retake is None or self.ttl_s is None or self.lost:
            return False
        with self._retaking:  # the runner's check and the keeper's renewal may both find the key gone
            if self.token != token:
                return True  # the other one retook it already
            try:
                if not retake(self):
                    return False
            except Unreachable:
                return False
        if self.on_retake is not None:
            with contextlib.suppress(Exception):  # the record is for people; the lease itself is held again
                self.on_retake()
        return True

    def release(self) -> None:
        # A renewal already under way when it is dropped finds the lease gone and only marks it lost.
        KEEPER.discard(self)
        with contextlib.suppress(Unreachable):
            self.store.release(self.target, self.token, self.owner)
        RELEASED.tell()


class Presented:
    """What a holder presents with each request: its lease's *current* credential (a retaken lease has a new
    token), read as the request is made; ``str()`` is the credential, never printed."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease

    def __str__(self) -> str:
        return self.lease.credential

    def __repr__(self) -> str:
        return f"<credential of {self.lease!r}>"
# ``claim(target, token) -> (token claimed, the caller's own record claimed)``: a caller's claim of its own
# record (a job's claim) that also claims the token as the target's new fencing high-water mark, in one
# statement (``ResultStore.claim_fenced``).
Claim = Callable[[str, int], tuple[bool, bool]]


class LeaseStore(Protocol):
    def try_acquire(self, target: str, info: dict, ttl_s: float, durable_fence: bool = True,
                    claim: Claim | None = None) -> Lease | None: ...
    def renew(self, target: str, token: int, ttl_s: float, owner: str | None = None) -> bool: ...
    def check(self, target: str, token: int, owner: str | None = None) -> None: ...
    def release(self, target: str, token: int, owner: str | None = None) -> None: ...
    def current(self, target: str, secret: bool = False) -> dict | None: ...
    def holder(self, target: str) -> dict | None: ...  # current(secret=True) less the time left: the check's read
    def for_lab(self, lab_key: str | None) -> "LeaseStore": ...  # lab ``lab_key``'s leases (None: these)
    def labs_with(self, target: str) -> list[str]: ...  # the labs that may lease ``target`` in this store
    def list(self) -> list[dict]: ...
    def break_(self, target: str, by: str) -> dict | None: ...


def acquire(store: LeaseStore, target: str, info: dict, ttl_s: float, wait_s: float,
            should_stop=lambda: False, durable_fence: bool = True, claim: Claim | None = None) -> Lease:
    """Take the lease on ``target``, waiting up to ``wait_s``; ``Busy`` naming the holder if not obtained.
    ``durable_fence=False``: the caller commits durably to the results database before it acts with the token
    (a job's claim), which makes the token's claim durable too (``FenceStore.claim``). ``claim``: the store may
    claim the token with the caller's own record in one statement (``Claim``); ``Lease.claimed`` says whether
    it did (None: the caller claims its record itself)."""
    deadline = time.monotonic() + wait_s
    first = True
    while True:
        seen = RELEASED.count
        try:
            lease = store.try_acquire(target, info, ttl_s, durable_fence, claim)
        except Unreachable:
            if time.monotonic() >= deadline or should_stop():
                raise
            time.sleep(0.25)  # Redis restarting: keep trying until the wait runs out
            first = False
            continue
        if lease is not None:
            lease.at_once = first
            return lease
        first = False
        if time.monotonic() >= deadline or should_stop():
            held = store.current(target) or {}
            raise Busy(f"target {target!r} is leased by {held.get('holder', 'someone else')}"
                       + (f" (job {held['job']})" if held.get("job") else "")
                       + f"; waited {wait_s:g} s",
                       hint="see `panio lease list`", target=target, holder=held.get("holder"), job=held.get("job"))
        RELEASED.wait(seen, 0.05)  # a lease given back in this process ends the wait at once


def check_access(store: LeaseStore, target: str, token: str | int | None = None) -> None:
    """Refuse acting on ``target`` unless it is free or ``token`` (default: ``PANIO_LEASE_TOKEN``) is its
    lease's credential."""
    held = store.holder(target)
    access(target, token if token is not None else os.environ.get(TOKEN_ENV), [held] if held else [])


def access(target: str, token: str | int | None, held: list[dict], what: str = "") -> None:
    """Decide whether a caller presenting ``token`` (or none) may change ``target``, given the leases ``held`` on it.

    A presented token must be the current lease's, with its secret (``held`` carries each lease's), even
    while the target is free (an expired or broken lease fences its holder at once); without a token, or
    with the current token but not its secret, any lease on the target refuses the caller.
    """
    number, secret = parse_credential(token) if token is not None else (None, None)
    others = [h for h in held if not _holds(h, number, secret)]
    if others:
        h = others[0]
        stale = ""
        if number is not None and str(h.get("token")) == number:
            stale = (f"; lease token {number} was presented without its holder's secret (`panio lease list` "
                     "shows the number, which alone acts for nobody)")
        elif number is not None:
            stale = f"; lease token {number} is no longer current"
        raise Busy(f"{what}target {target!r} is leased by {h.get('holder', 'someone else')}"
                   + (f" (job {h['job']})" if h.get("job") else "") + stale,
                   hint="wait for the job to finish, or see `panio lease list`",
                   target=target, holder=h.get("holder"), job=h.get("job"))
    if token is not None and not held:
        raise Refused(f"{what}lease lost: token {number} on target {target!r} is not current (the lease expired or "
                      "was broken)", hint="a job that lost its lease stops; see `panio lease list --breaks`",
                      target=target, token=number)


def _holds(lease: dict, number: str | None, secret: str | None) -> bool:
    """Whether token ``number`` and ``secret`` are ``lease``'s (a lease with no secret, from an older panio:
    the token alone); the secrets compared in constant time."""
    if number is None or str(lease.get("token")) != number:
        return False
    kept = lease.get("secret")
    return kept is None or (secret is not None and secrets.compare_digest(str(kept), secret))


# --- Redis ------------------------------------------------------------------

# The token is above both Redis's counter and the durable high-water mark (ARGV[4]): a Redis that lost its
# counters in a restart carries on above every token ever handed out.
_ACQUIRE = """
if redis.call('exists', KEYS[1]) == 1 then return 0 end
local t = redis.call('incr', KEYS[2])
local floor = tonumber(ARGV[4])
if t <= floor then t = floor + 1; redis.call('set', KEYS[2], t) end
redis.call('hset', KEYS[1], 'token', t, 'owner', ARGV[5], 'secret', ARGV[6], 'info', ARGV[1], 'since', ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[2])
return t
"""
# Retaking a lease whose key vanished: only when Redis lost its data (the target's token counter went too). A
# lease that expired unrenewed or that an operator broke leaves the counter: its holder stays fenced.
_RETAKE = "if redis.call('exists', KEYS[2]) == 1 then return 0 end" + _ACQUIRE
_MINE = "redis.call('hget', KEYS[1], 'token') == ARGV[1] and (ARGV[2] == '' or redis.call('hget', KEYS[1], 'owner') == ARGV[2])"
_RENEW = f"if {_MINE} then return redis.call('pexpire', KEYS[1], ARGV[3]) end return 0"
_RELEASE = f"if {_MINE} then return redis.call('del', KEYS[1]) end return 0"


class RedisLeaseStore:
    """Leases in Redis; ``fences`` (default: the results database) keeps the tokens' high-water mark."""

    def __init__(self, url: str, prefix: str = "panio:", fences=None) -> None:
        import redis

        self.url, self.prefix, self._fences = url, prefix, fences
        self.base_prefix = prefix  # the prefix of no lab's leases, which each lab's extends (``for_lab``)
        self.r = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, decode_responses=True)
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        self._labs: dict[str, RedisLeaseStore] = {}

    def for_lab(self, lab_key: str | None) -> "RedisLeaseStore":
        """The store of lab ``lab_key``'s leases (this one for None), on this store's own connection: a worker
        that runs many labs' jobs (a job's payload names its lab) keeps one Redis client."""
        if not lab_key:
            return self
        if lab_key not in self._labs:
            lab = RedisLeaseStore.__new__(RedisLeaseStore)
            lab.url, lab.prefix, lab._fences = self.url, lab_prefix(self.base_prefix, lab_key), self._fences
            lab.base_prefix, lab.r, lab._errors, lab._labs = self.base_prefix, self.r, self._errors, self._labs
            self._labs[lab_key] = lab
        return self._labs[lab_key]

    def labs_with(self, target: str) -> list[str]:
        """The labs that have a lease key for ``target`` (what a caller naming no lab is also checked against)."""
        head, tail = f"{self.base_prefix}lab:", f":lease:{target}"
        keys = self._do(lambda: list(self.r.scan_iter(match=f"{head}*{tail}", count=1000)))
        return sorted({k[len(head):-len(tail)] for k in keys} - {""})

    def _key(self, target: str) -> str:
        return f"{self.prefix}lease:{target}"

    def _do(self, func, *args):
        """Run one Redis call, riding out a restart of up to ``RETRY_S`` before calling Redis unreachable."""
        deadline = time.monotonic() + RETRY_S
        while True:
            try:
                return func(*args)
            except self._errors as exc:
                if time.monotonic() >= deadline:
                    raise Unreachable(f"Redis at {redact(self.url)} unreachable: {exc}",
                                      hint="check PANIO_REDIS_URL") from None
                time.sleep(0.2)

    @property
    def fences(self):
        if self._fences is None:
            from bench_agent.jobs.fences import FenceStore

            self._fences = FenceStore()
        return self._fences

    def try_acquire(self, target: str, info: dict, ttl_s: float, durable_fence: bool = True,
                    claim: Claim | None = None) -> Lease | None:
        key = self._key(target)
        if not self.fences.known(target) and self._do(self.r.exists, key):
            return None  # held: no database round trip while a job waits for the lease (the script checks too)
        owner, secret = uuid.uuid4().hex, secrets.token_hex(16)
        token = int(self._do(self.r.eval, _ACQUIRE, 2, key, f"{self.prefix}fence:{target}", json.dumps(info),
                             int(ttl_s * 1000), time.time(), self.fences.high(target), owner, secret))
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
                    return self._granted(target, token, info, owner, secret, mine)
            # Claimed durably before anyone acts with it; then confirmed, in case Redis restarted in between.
            elif self.fences.claim(target, token, durable_fence):
                self.check(target, token, owner)
                return self._granted(target, token, info, owner, secret)
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
        token = int(self._do(self.r.eval, _RETAKE, 2, key, f"{self.prefix}fence:{target}", json.dumps(lease.info),
                             int(lease.ttl_s * 1000), time.time(), lease.token, owner, secret))
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
    def _granted(self, target: str, token: int, info: dict, owner: str, secret: str,
                 claimed: bool | None = None) -> Lease:
        lease = Lease(self, target, token, info, owner, secret)
        lease.granted_at, lease.claimed = time.monotonic(), claimed
        return lease

    def renew(self, target: str, token: int, ttl_s: float, owner: str | None = None) -> bool:
        return bool(self._do(self.r.eval, _RENEW, 1, self._key(target), str(token), owner or "", int(ttl_s * 1000)))

    def check(self, target: str, token: int, owner: str | None = None) -> None:
        held, held_by = self._do(self.r.hmget, self._key(target), "token", "owner")
        if held != str(token) or (owner is not None and held_by != owner):
            raise Refused(f"lease on {target!r} with token {token} is no longer held"
                          + (f" (now token {held})" if held and held != str(token) else "")
                          + ("" if held else " (it expired or was broken)"), target=target)

    def release(self, target: str, token: int, owner: str | None = None) -> None:
        self._do(self.r.eval, _RELEASE, 1, self._key(target), str(token), owner or "")

    def current(self, target: str, secret: bool = False) -> dict | None:
        """The lease on ``target`` as ``lease list`` shows it; ``secret=True`` adds its secret (lease checks)."""
        key = self._key(target)
        pipe = self.r.pipeline()
        pipe.hgetall(key)
        pipe.pttl(key)
        raw, pttl = self._do(pipe.execute)
        found = _describe(target, raw, pttl / 1000 if pttl and pttl > 0 else None) if raw else None
        if found and secret and raw.get("secret"):
            found["secret"] = raw["secret"]
        return found

    def holder(self, target: str) -> dict | None:
        """The lease on ``target`` as ``current(secret=True)`` says it, less ``ttl_left_s`` (None): one HGETALL,
        not a MULTI/EXEC of two reads, for the check before every side effect."""
        raw = self._do(self.r.hgetall, self._key(target))
        found = _describe(target, raw, None) if raw else None
        if found and raw.get("secret"):
            found["secret"] = raw["secret"]
        return found

    def list(self) -> list[dict]:
        keys = sorted(self._do(lambda: list(self.r.scan_iter(match=f"{self.prefix}lease:*", count=500))))
        out = [self.current(k[len(self.prefix) + len("lease:"):]) for k in keys]
        return [x for x in out if x]

    def break_(self, target: str, by: str) -> dict | None:
        held = self.current(target)
        if held is None:
            return None
        self._do(self.r.delete, self._key(target))
        record = {"target": target, "broken_by": by, "at": time.time(), "was": held}
        self._do(self.r.lpush, f"{self.prefix}lease-breaks", json.dumps(record))
        self._do(self.r.ltrim, f"{self.prefix}lease-breaks", 0, 999)
        return record

    def breaks(self, limit: int = 20) -> list[dict]:
        return [json.loads(x) for x in self._do(self.r.lrange, f"{self.prefix}lease-breaks", 0, limit - 1)]


def _describe(target: str, raw: dict, ttl_left_s: float | None) -> dict:
    if "token" not in raw:
        return None  # expired between the two reads
    info = json.loads(raw.get("info") or "{}")
    return {"target": target, "token": int(raw["token"]), "since": float(raw.get("since", 0)),
            "ttl_left_s": ttl_left_s, **info}


# --- files (embedded default) ----------------------------------------------

class FileLeaseStore:
    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self._held: dict[str, int] = {}  # target -> fd, for leases this process holds

    def _path(self, target: str) -> Path:
        return self.dir / f"{target}.lease"

    def for_lab(self, lab_key: str | None) -> "FileLeaseStore":
        """The file leases of lab ``lab_key`` on this machine (this store for None)."""
        from bench_agent.paths import lab_state_dir

        return FileLeaseStore(lab_state_dir(lab_key) / "leases") if lab_key else self

    def labs_with(self, target: str) -> list[str]:
        """The labs of this machine with a lease file for ``target`` (for the bare store only)."""
        from bench_agent.paths import known_labs, lab_state_dir, legacy_state_dir

        if self.dir != legacy_state_dir() / "leases":
            return []
        return [k for k in known_labs() if (lab_state_dir(k) / "leases" / f"{target}.lease").exists()]

    def try_acquire(self, target: str, info: dict, ttl_s: float, durable_fence: bool = True,
                    claim: Claim | None = None) -> Lease | None:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path(target), os.O_RDWR | os.O_CREAT, 0o600)  # it holds the lease's secret
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        os.fchmod(fd, 0o600)  # a file an older panio created readable by all
        old = _read_fd(fd)
        token, secret = int(old.get("token", 0)) + 1, secrets.token_hex(16)
        record = {"token": token, "since": time.time(), "info": info, "held": True, "secret": secret}
        _write_fd(fd, record)
        self._held[target] = fd
        return Lease(self, target, token, info, secret=secret)

    def renew(self, target: str, token: int, ttl_s: float, owner: str | None = None) -> bool:
        return target in self._held

    def check(self, target: str, token: int, owner: str | None = None) -> None:
        if target not in self._held or int(_read_fd(self._held[target]).get("token", -1)) != token:
            raise Refused(f"lease on {target!r} with token {token} is no longer held", target=target)

    def release(self, target: str, token: int, owner: str | None = None) -> None:
        fd = self._held.pop(target, None)
        if fd is not None:
            rec = _read_fd(fd)
            rec.pop("secret", None)
            _write_fd(fd, {**rec, "held": False})
            os.close(fd)

    def holder(self, target: str) -> dict | None:
        return self.current(target, secret=True)

    def current(self, target: str, secret: bool = False) -> dict | None:
        path = self._path(target)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except PermissionError:  # another user's lease file (owner-only): it cannot be proven free
            return {"target": target, "token": None, "since": None, "ttl_left_s": None,
                    "holder": f"another user (cannot read {path})"}
        try:
            if target not in self._held:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    return None  # nobody holds it
                except BlockingIOError:
                    pass
            rec = _read_fd(fd)
        finally:
            os.close(fd)
        found = {"target": target, "token": rec.get("token"), "since": rec.get("since"), "ttl_left_s": None,
                 **rec.get("info", {})}
        if secret and rec.get("secret"):
            found["secret"] = rec["secret"]
        return found

    def list(self) -> list[dict]:
        if not self.dir.is_dir():
            return []
        out = [self.current(p.stem) for p in sorted(self.dir.glob("*.lease"))]
        return [x for x in out if x]

    def break_(self, target: str, by: str) -> dict | None:
        held = self.current(target)
        if held is None:
            return None
        raise Refused(f"target {target!r} is leased by {held.get('holder')} on this machine; a local lease ends "
                      "only with its holder", hint=f"cancel the job (`panio job cancel {held.get('job')}`) or stop "
                      "that process", target=target, holder=held.get("holder"), job=held.get("job"))


def _read_fd(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    try:
        return json.loads(data or b"{}")
    except ValueError:
        return {}


def _write_fd(fd: int, record: dict) -> None:
    data = json.dumps(record).encode()
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)
