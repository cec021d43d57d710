"""Leases in files (``FileLeaseStore``): the embedded default, with no broker.

A lease is an ``flock`` on a file in the state directory. The kernel drops it
the instant the holder dies, so no TTL is needed; it cannot be broken from
outside (stop the job instead). The lease file is owner-only: it holds the
lease's secret. The lease model and policy live in ``bench_agent.leases.base``.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import secrets
import time
from pathlib import Path

from bench_agent.errors import Refused
from bench_agent.private import private_dir
from bench_agent.leases.base import Claim, Lease


@functools.lru_cache(maxsize=256)  # not pathlib, and joined once: the check before every side effect
def _lease_path(directory: str, target: str) -> str:
    return os.path.join(directory, f"{target}.lease")


class FileLeaseStore:
    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self._dir_name = str(self.dir)
        self._held: dict[str, int] = {}  # target -> fd, for leases this process holds

    def _path(self, target: str) -> str:
        return _lease_path(self._dir_name, target)

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
        private_dir(self.dir)
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

    def list(self, retry_s: float = 0.0) -> list[dict]:
        """Every lease held now (``retry_s``: as ``RedisLeaseStore.list``; a directory does not need it)."""
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
