"""The controller API's tokens: one per person or CI project, each with a scope, kept hashed and revocable.

Scopes:

- ``reader``: reads jobs, their steps and artifacts; with an allow list
  (targets, tags), only the jobs on those targets;
- ``submitter``: also submits jobs and cancels them, only on the targets it
  names or the targets carrying one of its tags (its allow list), and reads
  only their jobs;
- ``operator``: everything, on every target (leases too).

A secret is ``panio_`` and 43 characters of ``secrets.token_urlsafe(32)`` (256
random bits); the database keeps only its SHA-256 (``panio_api_tokens``), so
a copy of the database gives no one a usable token. A high-entropy secret
needs no slow hash: no one can guess 256 bits from their digest. A token is
looked up by its digest, compared again with ``hmac.compare_digest``.
``panio token rm`` revokes (the row stays, so the API can say why it refuses
a revoked token, and who had it); an expired or revoked token gets 403 with
the reason, an unknown one 401.

A process trusts a live token's check for ``CHECKED_FOR_S`` (a database read
a request was a share of each API call's CPU at 10,000 boards): a revoke in
the same process forgets every check at once, a revoke in another process
(``panio token rm`` beside a running ``panio dashboard``) is felt within
``CHECKED_FOR_S``; expiry is compared on every request; only tokens that
passed are kept (an unknown or refused one is read from the database each
time), by digest, never the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time

from bench_agent.errors import AlreadyExists, AuthFailed, NotConfigured, Refused, UsageError

SCOPES = ("reader", "submitter", "operator")
PREFIX = "panio_"
USED_EVERY_S = 60.0  # ``last_used_at`` is written at most this often a token: not one write a request
CHECKED_FOR_S = 0.5  # a live token's check is trusted this long in a process (docs/security.md: revoked within 1 s)
_CREATED: set[str] = set()
_CREATE_LOCK = threading.Lock()


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def allows(token: dict, target: str, target_tags: list[str] | tuple[str, ...]) -> bool:
    """Whether ``token`` may submit or cancel jobs on ``target`` (whose tags are ``target_tags``)."""
    if token["scope"] == "operator":
        return True
    if token["scope"] != "submitter":
        return False
    return target in token["targets"] or bool(set(token["tags"]) & set(target_tags))


def reads(token: dict, target: str, target_tags: list[str] | tuple[str, ...]) -> bool:
    """Whether ``token`` may read the jobs of ``target``: an operator's or a reader's without an allow list, all;
    else those of its allow list."""
    if token["scope"] == "operator" or not (token["targets"] or token["tags"]):
        return True
    return target in token["targets"] or bool(set(token["tags"]) & set(target_tags))


def allow_list(token: dict) -> str:
    """A submitter's allow list in words, for a refusal."""
    parts = [f"targets {', '.join(token['targets'])}"] if token["targets"] else []
    parts += [f"targets tagged {', '.join(token['tags'])}"] if token["tags"] else []
    return " or ".join(parts) or "no target"


class TokenStore:
    """The tokens in the results database (``PANIO_RESULTS_URL``, else the embedded SQLite)."""

    def __init__(self, url: str | None = None) -> None:
        from bench_agent.leases.fences import results_url
        from bench_agent.results.db import create_tables, engine_for, token_table

        self.url = url or results_url()
        self.engine = engine_for(self.url)
        md, self.t = token_table()
        with _CREATE_LOCK:
            if self.url not in _CREATED:
                create_tables(self.engine, md)
                _CREATED.add(self.url)

    def add(self, name: str, scope: str, targets: list[str] = (), tags: list[str] = (),
            expires_s: float | None = None, by: str | None = None) -> tuple[str, dict]:
        """A new token: (its secret, shown once and never stored; its record)."""
        if scope not in SCOPES:
            raise UsageError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        if scope == "submitter" and not (targets or tags):
            raise UsageError("a submitter token needs an allow list: --target T and/or --tag T",
                             hint="e.g. `panio token add ci-firmware --scope submitter --tag pi5`")
        if scope == "operator" and (targets or tags):
            raise UsageError("--target and --tag limit a submitter or a reader; an operator token has no allow list")
        secret, now = new_secret(), time.time()
        row = {"name": name, "scope": scope, "targets": json.dumps(sorted(set(targets))),
               "tags": json.dumps(sorted(set(tags))), "hash": digest(secret), "created_at": now, "created_by": by,
               "expires_at": None if expires_s is None else now + expires_s}
        with self.engine.begin() as c:
            if c.execute(self.t.select().where(self.t.c.name == name, self.t.c.revoked_at.is_(None))).first():
                raise AlreadyExists(f"a token named {name!r} exists", name=name,
                                    hint=f"revoke it first with `panio token rm {name}`, or pick another name")
            row["id"] = int(c.execute(self.t.insert().values(**row)).inserted_primary_key[0])
        return secret, _record(row)

    def list(self, revoked: bool = False) -> list[dict]:
        """Every token's record (never its secret nor its hash); revoked ones only with ``revoked``."""
        q = self.t.select().order_by(self.t.c.id)
        if not revoked:
            q = q.where(self.t.c.revoked_at.is_(None))
        with self.engine.connect() as c:
            return [_record(r) for r in c.execute(q).mappings()]

    def revoke(self, name: str) -> dict:
        """Revoke the live token called ``name``; its record."""
        with self.engine.begin() as c:
            row = c.execute(self.t.select().where(self.t.c.name == name, self.t.c.revoked_at.is_(None))).mappings().first()
            if row is not None:
                now = time.time()
                c.execute(self.t.update().where(self.t.c.id == row["id"]).values(revoked_at=now))
        _CHECKED.forget()  # a revoke takes effect in this process at once
        if row is None:  # the names read once the transaction is over: never two connections at once (a pool of 1)
            raise NotConfigured(f"no live token named {name!r}", name=name,
                                hint="see `panio token list`", known=[r["name"] for r in self.list()])
        return _record({**row, "revoked_at": now})

    def check(self, secret: str) -> dict:
        """The record of the live token ``secret``; ``AuthFailed`` (unknown), ``Refused`` (revoked, expired)."""
        wanted = digest(secret)
        kept = _CHECKED.get(self.url, wanted)
        if kept is not None:
            return kept
        revokes, read_at = _CHECKED.revokes, time.monotonic()  # kept from before the read: never past the bound
        with self.engine.connect() as c:
            row = c.execute(self.t.select().where(self.t.c.hash == wanted)).mappings().first()
        if row is None or not hmac.compare_digest(row["hash"], wanted):
            raise AuthFailed("unknown API token", hint="make one with `panio token add NAME --scope ...` on the "
                                                      "controller, and send it as Authorization: Bearer TOKEN")
        token, now = _record(row), time.time()
        if token["revoked_at"] is not None:
            raise Refused(f"token {token['name']!r} was revoked at {_when(token['revoked_at'])}",
                          hint="ask an operator for a new token", token=token["name"])
        if token["expires_at"] is not None and token["expires_at"] <= now:
            raise Refused(f"token {token['name']!r} expired at {_when(token['expires_at'])}",
                          hint="ask an operator for a new token", token=token["name"])
        if token["last_used_at"] is None or now - token["last_used_at"] >= USED_EVERY_S:
            with self.engine.begin() as c:
                c.execute(self.t.update().where(self.t.c.id == row["id"]).values(last_used_at=now))
            token["last_used_at"] = now
        _CHECKED.keep(self.url, wanted, token, revokes, read_at)
        return token


class _Checked:
    """The live tokens this process checked in the last ``CHECKED_FOR_S``, by (database URL, digest)."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], tuple[float, dict]] = {}
        self.revokes = 0  # revokes made in this process: a check read before one is not kept after it
        self.lock = threading.Lock()

    def get(self, url: str, wanted: str) -> dict | None:
        kept = self.records.get((url, wanted))
        if kept is None or time.monotonic() - kept[0] >= CHECKED_FOR_S:
            return None
        token = kept[1]
        if token["expires_at"] is not None and token["expires_at"] <= time.time():
            return None  # expired since: the database's answer says so, with the reason
        return {**token}

    def keep(self, url: str, wanted: str, token: dict, revokes: int, read_at: float) -> None:
        with self.lock:
            if revokes != self.revokes:
                return
            if len(self.records) >= 1024:  # only live tokens are kept, and a lab has far fewer: never let it grow
                self.records.clear()
            self.records[url, wanted] = (read_at, {**token})

    def forget(self) -> None:
        with self.lock:
            self.revokes += 1
            self.records.clear()


_CHECKED = _Checked()


def _record(row) -> dict:
    out = {k: v for k, v in dict(row).items() if k != "hash"}
    out["targets"], out["tags"] = json.loads(out["targets"]), json.loads(out["tags"])
    out.setdefault("revoked_at", None)
    out.setdefault("last_used_at", None)
    return out


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
