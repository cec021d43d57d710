"""The operation messages a control host has run, kept on the host: a replay guard no broker user can erase.

A signature does not say when: a captured ``panio.op`` could be sent again, so each one carries a stamp
inside its signed body (``signing.op_stamp``: the host it is for, when it was sent, how long its sender
waits, a nonce) and only that host's worker runs it, only within that window and only once
(``signing.check_fresh``). The host in the stamp is what makes a guard per host enough: a message captured
on its way to one host is refused by every other. Which nonces were seen
used to live in Redis, where anyone with a Redis password could delete them and push the captured message
again (issue 45: one power-cycle ran 61 times in two minutes). They live on the host now, in the worker's
state directory (``STATE/worker-<host>/ops-seen/``, 0700): one empty file per nonce, created with
``O_EXCL`` (so one nonce runs once among all the host's workers, and a restart remembers it), its mtime set
to when the message's window ends. Files past that are removed at most once a minute: by then
``check_fresh`` refuses the message by its signed timestamp anyway.

The files are not synced to disk one by one (that would cost each operation a disk flush): a host that
loses power forgets the nonces its page cache still held, and a message captured before may run once more
within its window (at most ``wait_s`` + 60 s, 12 minutes for an ``action run``) after the host is back.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench_agent.errors import NotConfigured

PURGE_S = 60.0  # how often expired nonces are removed (and how long past its window a nonce stays at least)


class SeenNonces:
    """The nonces of the operations this host ran, one file each in ``folder``."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self._next_purge = 0.0
        self._ready = False

    def first_time(self, nonce: str, ttl_s: float) -> bool:
        """Record ``nonce`` for ``ttl_s`` seconds; whether it was new (False: a replay)."""
        if not (nonce.isascii() and nonce.isalnum()):  # check_fresh admits no other: a file name, never a path
            raise ValueError(f"not a nonce: {nonce[:40]!r}")
        self._prepare()
        try:
            fd = os.open(self.folder / nonce, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        try:
            until = time.time() + ttl_s
            os.utime(fd, (until, until))
        finally:
            os.close(fd)
        self._purge()
        return True

    def _prepare(self) -> None:
        """The folder, made 0700 and checked: this user's alone, or the guard would be another user's to erase."""
        if self._ready:
            return
        from bench_agent.private import private_dir

        private_dir(self.folder.parent)  # the worker's folder: 0700 whatever the umask, as its other records' are
        self.folder.mkdir(mode=0o700, exist_ok=True)
        st = self.folder.lstat()
        if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not self.folder.is_dir() or self.folder.is_symlink():
            raise NotConfigured(f"the replay guard's folder {self.folder} is not this user's alone (mode "
                                f"{st.st_mode & 0o777:o}, owner {st.st_uid})",
                                hint=f"let panio create it: remove {self.folder} (or chmod 700 it)")
        self._ready = True

    def _purge(self) -> None:
        now = time.time()
        if now < self._next_purge:
            return
        self._next_purge = now + PURGE_S
        remove_older(self.folder, now - PURGE_S)


def remove_older(folder: Path, before: float) -> None:
    """Remove the files of ``folder`` (a host's record of nonces or started jobs) whose mtime is before
    ``before``; one that another of the host's workers removed first is no error."""
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_mtime < before:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass
