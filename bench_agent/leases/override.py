"""An operator's override of a target's lease: granted in the lease store, honoured by the host as it acts.

``panio serial stop|watch TARGET --override --reason TEXT`` must stop (or start) the capture under whatever
job leases the target *when the command reaches the host*: under back-to-back jobs a lease read on the
controller is stale by then (the command waits behind queued jobs on the host's queue). So the controller does
not borrow a job's token; it writes a one-time **grant** into the lease store (``grant``: the target, the
operation, who and why; a Redis hash with a TTL, or an owner-only file beside the file leases) and sends its
nonce with the request (``OVERRIDE_ARG``). The host's lease guard (``lease_guard.enforce``) consumes the grant
in a store it checks (``take``: once, for that target and operation only) and lets the operation through
whatever lease of *that store* holds the target now, stamping the grant with the leases it overrode; the
controller reads the stamp back (``used``) and records which job's lease was overridden.

Authority is unchanged: writing a grant needs write access to the lease store, which can already break a lease
(``panio lease break``); a nonce with no grant behind it, an expired or used one, or one for another target
or operation is refused (13).
"""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

from bench_agent.leases.redis_store import RedisLeaseStore
from bench_agent.redis_functions import fcall

GRANT_TTL_S = 600  # a grant not used by then (the command never reached the host) is gone


def grant(store: Any, target: str, op: str, by: str, reason: str) -> str:
    """Grant one ``op`` on ``target`` whatever lease holds it when the host acts; the grant's nonce."""
    nonce = secrets.token_hex(16)
    fields = {"target": target, "op": op, "by": by, "reason": reason}
    if isinstance(store, RedisLeaseStore):
        key = _key(store, nonce)
        pipe = store.r.pipeline()
        pipe.hset(key, mapping=fields)
        pipe.expire(key, GRANT_TTL_S)
        store.call(pipe.execute)
    else:
        from bench_agent.private import private_dir

        private_dir(store.dir)
        fd = os.open(_path(store, nonce), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(fields, f)
    return nonce


def take(store: Any, nonce: str, target: str, op: str, overridden: list[dict]) -> bool:
    """The host, as it acts: consume ``nonce``'s grant in ``store`` for ``target`` and ``op``, stamped with the
    leases it overrides (``overridden``: holder, job, token). False when ``store`` holds no such grant."""
    if not isinstance(nonce, str) or not nonce.isalnum():
        return False
    stamp = json.dumps([{k: h.get(k) for k in ("holder", "job", "token")} for h in overridden])
    if isinstance(store, RedisLeaseStore):
        return bool(store.call(fcall, store.r, "take_override", [_key(store, nonce)], [target, op, stamp]))
    path = _path(store, nonce)
    try:
        fields = json.loads(path.read_text(encoding="utf-8"))
        if (fields.get("target"), fields.get("op")) != (target, op):
            return False
        os.rename(path, path.with_suffix(".used"))  # once: a second taker finds no file
    except (OSError, ValueError):
        return False
    path.with_suffix(".used").write_text(json.dumps({**fields, "used": json.loads(stamp)}), encoding="utf-8")
    return True


def used(store: Any, nonce: str) -> list[dict] | None:
    """The controller, after the command: the leases the host overrode with ``nonce``'s grant (None: it was not
    used); the grant is dropped."""
    if isinstance(store, RedisLeaseStore):
        key = _key(store, nonce)
        pipe = store.r.pipeline()
        pipe.hget(key, "used")
        pipe.delete(key)
        raw = store.call(pipe.execute)[0]
        return json.loads(raw) if raw else None
    out = None
    for path in (_path(store, nonce).with_suffix(".used"), _path(store, nonce)):
        try:
            out = out or json.loads(path.read_text(encoding="utf-8")).get("used")
            path.unlink()
        except (OSError, ValueError):
            pass
    return out


def _key(store: Any, nonce: str) -> str:
    return f"{store.prefix}lease-override:{nonce}"


def _path(store: Any, nonce: str):
    return store.dir / f"override-{nonce}.grant"
