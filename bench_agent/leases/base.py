"""Exclusive target leases: who may touch a target right now.

A job takes a lease before its first step and holds it to the end. Every
lease carries a *fencing token* (a number that only grows per target): each
step checks, before any side effect, that the lease still holds that token,
so a holder that stalled past its TTL and lost the lease can never act again.

Two stores, one interface (``LeaseStore``), each in its own module:

``RedisLeaseStore``  (``redis_leases``) the lease is a Redis hash with a TTL
                     (``ttl_s``) that a keeper thread renews while the job runs;
                     a crashed holder's lease expires within its TTL. Keys live
                     under a prefix (``PANIO_REDIS_PREFIX``) so parallel runs
                     never collide.
``FileLeaseStore``   (``file_leases``) the embedded default (no broker): an
                     ``flock`` on a file in the state directory. The kernel
                     drops it the instant the holder dies, so no TTL is needed;
                     it cannot be broken from outside (stop the job instead).

Each lab's leases are its own: a Redis store of lab ``K`` keeps its keys under
``<prefix>lab:K:`` (``lab_prefix``), a file store in that lab's state directory
(``bench_agent.paths.lab_state_dir``), so a lease on lab A's ``h`` never blocks
lab B's ``h``. A caller with no lab uses the bare prefix, as before labs were keyed.

Tokens never go backwards, even when a Redis without persistence restarts and
forgets its counters: each token is claimed in the results database before its
lease is handed out (``bench_agent.leases.fences``), and each Redis lease also carries
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
enforces it for every side-effecting operation (``bench_agent.leases.guard``),
whatever the caller. Whoever can read the store itself (the broker's password,
the lease file's user, root) can read the secret too: docs/security.md.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from typing import Callable, Protocol

from bench_agent.errors import Busy, Refused, Unreachable
from bench_agent.leases.keeper import KEEPER, RELEASED

from bench_agent.jobs import TOKEN_ENV  # noqa: E402,F401 - said once, in the package


LEASE_WAIT_S = 30.0  # how long a check of a lease with no TTL (not kept) waits for its store out of reach
# While a lease is ridden out (``Lease.riding_out``), the wait's end and its ``should_stop``, in the waiting thread:
# a store call made meanwhile stops retrying at either (``gives_up``), so one try never outlasts the wait
_PATIENCE = threading.local()


def gives_up() -> bool:
    """Whether a lease store's call retrying now (its store out of reach) should stop: the lease ridden out in this
    thread may no longer be held (the wait's end), or the wait was told to stop (a cancel, the job's deadline)."""
    until, stop = getattr(_PATIENCE, "until", None), getattr(_PATIENCE, "stop", None)
    return (until is not None and time.monotonic() >= until) or (stop is not None and bool(stop()))


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
        self.taken_at: float | None = None  # monotonic time just before its store set it: its TTL runs from there
        # monotonic time after which the store holds it no more unless a renewal got through: the TTL from the
        # last renewal's answer (``keep`` and each ``renew``), None for a lease not kept
        self.held_until: float | None = None

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
        self.ttl_s, self.held_until = ttl_s, time.monotonic() + ttl_s
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
            return True
        self.held_until = time.monotonic() + ttl_s
        return True

    def held_for_s(self) -> float | None:
        """How much longer the store may still hold this lease, by its TTL from its last renewal (None: not kept)."""
        return None if self.held_until is None else max(0.0, self.held_until - time.monotonic())

    def riding_out(self, func: Callable, outages, should_stop: Callable[[], bool] = lambda: False,
                   only: Callable[[BaseException], bool] | None = None):
        """``func()`` (a check of this lease, or an operation the host's lease guard checks first), tried again
        while the lease store is out of reach, with backoff, for as long as the store may still hold this lease
        (``held_for_s``: a Redis restarted with its data kept still has it); then the lease is lost (Refused).
        ``outages`` (``bench_agent.outage.Outages``) says the store going and coming back; ``only``: which
        errors are tried again (``patiently``). What the store answers once it is back (the lease expired or
        was broken: Refused) is raised as it comes."""
        from bench_agent import outage

        left_s = self.held_for_s()
        wait_s = LEASE_WAIT_S if left_s is None else left_s
        # each try gives up at the wait's end too: a try (a guard's check naming no lab reads two keys, each
        # retried for ``RETRY_S``) that began just before it said "lost" up to ~6 s after the lease's TTL
        outer = getattr(_PATIENCE, "until", None), getattr(_PATIENCE, "stop", None)
        until = time.monotonic() + wait_s
        _PATIENCE.until = until if outer[0] is None else min(until, outer[0])
        _PATIENCE.stop = should_stop if outer[1] is None else (lambda: should_stop() or outer[1]())
        try:
            return outage.patiently(func, outages, should_stop, wait_s, only)
        except Unreachable as err:
            if should_stop() or outage.service_down(err) is None or (only is not None and not only(err)):
                raise
            self.lost = True
            ttl = "" if self.ttl_s is None else f" (lease_ttl_s {self.ttl_s:g})"
            outages.say(f"the lease on {self.target!r} (token {self.token}) is lost: its store stayed out of reach "
                        f"for longer than it could hold the lease{ttl}")
            raise Refused(f"lease on {self.target!r} lost: its store stayed out of reach for longer than it could "
                          f"hold the lease{ttl}: {err.message}", target=self.target,
                          service=outage.service_down(err)) from None
        finally:
            _PATIENCE.until, _PATIENCE.stop = outer

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
            self.held_until = time.monotonic() + self.ttl_s
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
