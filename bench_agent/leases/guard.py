"""The host's own lease check, for every side-effecting operation, whatever road it came by.

``bench_agent.ops.call`` runs ``enforce`` before any operation whose spec says
``side_effect=True`` (power, serial input, actions), on the host that owns the
target: called in-process by the CLI, by the SSH agent, or by a Celery
``panio.op`` task. Reads pass while a target is leased. The caller's
environment cannot switch the check off: the host decides which lease stores
it consults, and checks all of them (a target leased in any one is leased):

* the Redis stores recorded on this host in ``STATE_DIR/lease-stores.json``:
  ``panio worker`` records its own when it starts; ``panio lease store --set
  URL`` records one by hand (a host reached only over SSH);
* the Redis store of the process's environment (``PANIO_REDIS_URL``, else
  ``PANIO_BROKER``), when there is one: an environment can add a store, never
  remove one;
* this machine's file leases (``LAB_STATE_DIR/leases``), taken by an embedded
  ``panio job run``.

Every store is checked for the request's lab (``bench_agent.paths.LAB_ARG``):
a lab's Redis leases live under their own key prefix (``leases.lab_prefix``),
its file leases in its own state directory, so one lab's lease never blocks
another lab's target of the same name.

A job's steps present their lease's credential (``TOKEN:SECRET``) in the request
(the argument ``lease_token``, which the controller's dispatch fills from
``PANIO_LEASE_TOKEN``, with ``lease_store`` naming the store that issued it);
``enforce`` picks the leases that matter and ``bench_agent.leases.base.access`` decides. A store that
cannot be read refuses the operation (unreachable): a check that cannot be
made is not a pass.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import socket
import time
from typing import Any

from bench_agent import outage
from bench_agent.errors import Refused, UsageError, Unreachable
from bench_agent.leases import base as leases
from bench_agent.leases.file_store import FileLeaseStore
from bench_agent.leases.redis_store import RedisLeaseStore
from bench_agent.paths import current_lab, lab_state_dir_name, state_dir, state_dir_name  # os alone

from bench_agent.jobs import ORIGIN_ARG, TOKEN_ARG  # noqa: F401 - said once, in the package
RECORD_NAME = "lease-stores.json"
_REDIS: dict[tuple[str, str], RedisLeaseStore] = {}  # one client per store, for the process's life


def record_path():
    return state_dir() / RECORD_NAME


@functools.lru_cache(maxsize=16)  # a join less in every check
def _record_path(state: str) -> str:
    return os.path.join(state, RECORD_NAME)  # record_path(), without pathlib


def recorded() -> list[dict[str, Any]]:
    """The Redis lease stores this host recorded: ``[{"url", "prefix", "by", "at"}]``, newest first."""
    return [dict(s) for s in _recorded()[1]]


def _recorded(state: str | None = None) -> tuple[tuple, list[dict[str, Any]]]:
    """``recorded()`` with the signature of the file it was read from (None when there is none), in state
    directory ``state`` (the current one for None). The file is read again only when its signature changed
    (``_RECORDED``): a check before every side effect costs one ``stat`` instead of an open, a read and a
    JSON parse (benchmarks/dispatch.py). The signature is the path, inode, size, modification and change
    times in ns, owner and mode; ``_write`` replaces the file. On a change the file and its folder must be
    this user's and writable by no one else (``_read``, ``_check_folder``): else ``Refused``, and so is every
    side effect (someone else could have dropped a store that holds a lease)."""
    path = _record_path(state_dir_name() if state is None else state)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        sig, st = (path, None), None
    except OSError as exc:
        raise _unreadable(exc) from None
    else:
        sig = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_uid, st.st_mode)
    cached = _RECORDED[0]
    if cached is not None and cached[0] == sig:
        return cached
    _check_folder(path)  # a file gone, or one put in place, by someone who could write the folder: refused
    if st is None:
        stores: list[dict[str, Any]] = []
    else:
        try:
            stores = _read(path)
        except FileNotFoundError:
            return (path, None), []
        except (OSError, ValueError, AttributeError) as exc:
            raise _unreadable(exc, path) from None
    _RECORDED[0] = (sig, stores)  # one assignment: a thread reads a signature with its own stores
    return sig, stores


def _read(path: str) -> list[dict[str, Any]]:
    """The stores of the record at ``path``, if this user wrote it: a regular file of ours that no one else can
    write, opened without following a symlink (else ``Refused``: every side effect is refused)."""
    from bench_agent.private import not_trusted

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise _untrusted(path, "is a symlink", f"remove it (rm {path}), then `panio lease store --set URL` for "
                         "each store") from None
    with open(fd, encoding="utf-8") as f:
        st = os.fstat(f.fileno())
        why = "is not a regular file" if st.st_mode & 0o170000 != 0o100000 else not_trusted(st, root_ok=False)
        if why:
            raise _untrusted(path, why, f"chmod go-w {path}" if st.st_uid == os.geteuid() else
                             f"remove it (rm {path}), then `panio lease store --set URL` for each store")
        data = json.loads(f.read())
    return [s for s in data.get("stores", []) if isinstance(s, dict) and s.get("url")]


def _check_folder(path: str) -> None:
    """The record's folder must be this user's and writable by no one else: else whoever could write it could
    remove the record, or replace it by theirs, and drop a store a lease is held in."""
    from bench_agent.private import not_trusted

    folder = os.path.dirname(path)
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return  # no state directory: no record, and nobody's
    except OSError as exc:
        raise _unreadable(exc) from None
    why = not_trusted(st, root_ok=False)
    if why:
        raise _untrusted(folder, why, f"chmod go-w {folder}" if st.st_uid == os.geteuid() else
                         "set PANIO_STATE_DIR to a directory of this user's")


def _untrusted(path: str, why: str, fix: str) -> Refused:
    return Refused(f"this host's lease stores cannot be checked: {path} {why}, so someone else could have "
                       "removed a store from the record; every side effect is refused", path=path, hint=fix)


def _unreadable(exc: Exception, path: str | None = None) -> Unreachable:
    return Unreachable(f"cannot read this host's lease stores from {path or record_path()}: {exc}",
                       hint="fix or remove that file, then `panio lease store --set URL`")


_RECORDED: list = [None]  # (signature, stores) of the last read of the record (see _recorded)


def remember(url: str, prefix: str, by: str) -> None:
    """Record ``url``/``prefix`` as a lease store this host must always check (atomic write, owner-only)."""
    stores = [s for s in recorded() if (s["url"], s.get("prefix")) != (url, prefix)]
    _write([{"url": url, "prefix": prefix, "by": by, "at": time.time()}, *stores])


def forget(url: str) -> bool:
    """Stop checking the store at ``url`` (every prefix); False if it was not recorded."""
    stores = recorded()
    kept = [s for s in stores if s["url"] != url]
    if len(kept) != len(stores):
        _write(kept)
    return len(kept) != len(stores)


def _write(stores: list[dict[str, Any]]) -> None:
    path = record_path()
    from bench_agent.private import state_dir as private_state_dir

    private_state_dir()  # the record is the state directory's (record_path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # a URL may carry the broker's password
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"stores": stores}, f, indent=2)
    os.replace(tmp, path)


def redis_store(url: str, prefix: str) -> RedisLeaseStore:
    key = (url, prefix)
    if key not in _REDIS:
        _REDIS[key] = RedisLeaseStore(url, prefix)
    return _REDIS[key]


def env_store() -> tuple[str, str] | None:
    url = os.environ.get("PANIO_REDIS_URL") or os.environ.get("PANIO_BROKER")
    return (url, os.environ.get("PANIO_REDIS_PREFIX", "panio:")) if url else None


def store_key(store: Any) -> tuple[str, ...]:
    """What identifies a lease store across machines: a Redis URL and prefix, or a file store's machine and directory."""
    if isinstance(store, FileLeaseStore):
        return ("file", socket.gethostname(), str(store.dir))
    return ("redis", leases.redact(store.url), store.prefix)  # it travels in requests: never the password


def stores() -> list[tuple[Any, str]]:
    """Every lease store this host checks for the current lab (``bench_agent.paths.current_lab``: the
    request's), each with a word on where it came from.

    The list is made again only when what it is made of changed: the lab, the record's signature
    (``_recorded``), the environment's store and the state directory (``_STORES``, a few entries). The state
    directory is read from the environment once a check, and the lab's part of it joined only on a change."""
    lab, state = current_lab(), state_dir_name()
    sig, named_stores = _recorded(state)
    env = env_store()
    key = (lab, sig, env, state)
    made = _STORES.get(key)
    if made is not None:
        return list(made)
    out: list[tuple[Any, str]] = []
    seen: set[tuple[str, str]] = set()
    named = [((s["url"], s.get("prefix", "panio:")), f"recorded by {s.get('by', '?')} in {record_path()}")
             for s in named_stores]
    for (url, prefix), why in named + ([(env, "from this process's environment")] if env else []):
        store = (url, leases.lab_prefix(prefix, lab))
        if store not in seen:
            seen.add(store)
            out.append((redis_store(*store), why))
    out.append((FileLeaseStore(os.path.join(lab_state_dir_name(lab), "leases")), "this machine's file leases"))
    if len(_STORES) >= 16:
        _STORES.clear()
    _STORES[key] = tuple(out)
    return out


_STORES: dict[tuple, tuple] = {}  # stores() by what it was made of


def held(target: str, checked: list[tuple[Any, str]] | None = None) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The leases on ``target`` in every store this host checks (or in ``checked``), each with its store's key.

    A caller that names no lab (an older controller, a hand-made request) is bound by every lab's lease on
    ``target`` too: only naming a lab picks that lab's ``target``, and so that lab's lease alone."""
    checked = stores() if checked is None else checked
    if current_lab() is None:
        checked = checked + _every_lab(checked, target)
    found = []
    for store, why in checked:
        try:
            lease = store.holder(target)
        except Unreachable as err:  # refused before any side effect: the outcome is known (nothing done)
            raise Unreachable(f"cannot check the lease on {target!r}: {err.message} (lease store {why})",
                              hint="start that Redis, or stop checking it with `panio lease store --forget URL`",
                              target=target, check="lease", service=outage.service_down(err),
                              outcome="none") from None
        if lease:
            found.append((store_key(store), lease))
    return found


def unchecked(exc: BaseException) -> bool:
    """Whether ``exc`` is this guard's refusal of an operation whose lease it could not check (a store out of
    reach): nothing was done, so the same request may be made again once the store answers."""
    return isinstance(exc, Unreachable) and exc.details.get("check") == "lease"


def _every_lab(checked: list[tuple[Any, str]], target: str) -> list[tuple[Any, str]]:
    """Each lab's part of the ``checked`` stores that has a lease key for ``target``."""
    out = []
    for store, why in checked:
        try:
            labs = store.labs_with(target)
        except Unreachable:
            continue  # ``held`` reads that store next and fails naming it
        out += [(store.for_lab(key), f"{why}, lab {key}") for key in labs]
    return out


def enforce(op: str, args: dict[str, Any], token: Any, origin: Any = None, override: Any = None) -> None:
    """Refuse side-effecting ``op`` unless its target is free or ``token`` is the target's current lease token.

    ``origin`` names the store that issued ``token``. When this host checks that store (or no origin is
    given), the token must be the current lease's there. A token from a store this host does not know
    (file leases on the controller, a Redis this host never recorded) cannot be checked here, so the host
    only makes sure that no holder it knows leases the target: exactly what it checks for a caller with
    no token, so naming a foreign origin gains nothing.

    ``override``: an operator's grant (``lease_override``): consumed in a store this host checks, it lets ``op``
    through whatever lease of that store holds the target now; none found is refused (13).
    """
    target = args.get("target")
    if not isinstance(target, str) or not target:
        raise UsageError(f"{op} changes a target: the request must name it (target)", argument="target")
    checked = stores()
    found = held(target, checked)
    if override is not None:
        found = _overridden(op, target, override, checked, found)
    origin_key = tuple(origin) if isinstance(origin, list) and origin else None
    if token is not None and origin_key is not None and origin_key not in {store_key(s) for s, _ in checked}:
        token = None
    elif token is not None and origin_key is not None:
        number = leases.parse_credential(token)[0]
        found = [(k, h) for k, h in found if k == origin_key or str(h.get("token")) != number]
    leases.access(target, token, [h for _, h in found], what=f"{op}: ")


def _overridden(op: str, target: str, nonce: Any, checked: list[tuple[Any, str]],
                found: list[tuple[tuple[str, ...], dict[str, Any]]]) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The leases on ``target`` still in force once ``nonce``'s override grant is consumed (the leases of the
    store that granted it are overridden); Refused when no store this host checks holds that grant."""
    from bench_agent.leases import override as lease_override

    for store, _ in checked:
        key = store_key(store)
        mine = [h for k, h in found if k == key]
        if lease_override.take(store, nonce, target, op, mine):
            return [(k, h) for k, h in found if k != key]
    from bench_agent.errors import Refused

    raise Refused(f"{op}: the operator's override of {target!r}'s lease was not honoured: no lease store this host "
                  "checks holds its grant (it expired, was used already, or was written to a store this host does "
                  "not check)", hint="run the command again; `panio lease store` shows the stores this host checks",
                  target=target)


def with_token(args: dict[str, Any], store: Any = None, token: int | str | None = None) -> dict[str, Any]:
    """``args`` plus a job's lease ``token`` (else this process's, from the environment) and the store that
    issued it."""
    from bench_agent.jobs import OVERRIDE_ARG, OVERRIDE_ENV

    token = token if token is not None else os.environ.get(leases.TOKEN_ENV)
    override = os.environ.get(OVERRIDE_ENV)
    args = {**args, OVERRIDE_ARG: override} if override else args
    if not token:
        return args
    out = {**args, TOKEN_ARG: str(token)}
    if store is not None:
        out[ORIGIN_ARG] = list(store_key(store))
    return out
