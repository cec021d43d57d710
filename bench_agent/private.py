"""Directories and files only this user can reach: panio's state, logs, caches and control sockets.

A directory panio keeps its state in is made 0700 (its missing parents too), whatever the umask. Before it
is used it is checked: it must be a real directory (not a symlink), owned by this user, and writable by no
one else; then its group and other bits are cleared. Every directory above it must be writable by no one
but this user and root (a sticky directory such as ``/tmp`` passes: no one else may rename what is ours in
it), so no other user can swap it for theirs after the check. A directory that fails is refused
(``Refused``, naming it and the fix), never used: another local user who made ``/tmp/panio-0`` before root
did must not receive root's console input (issue 45). Files are made 0600.

``trusted_read`` is how panio reads back what it wrote for itself (the lab's parse cache): only a regular
file of this user's, in a directory of this user's, that no one else can write; else ``None``.
"""

from __future__ import annotations

import errno
import os

DIR_MODE, FILE_MODE = 0o700, 0o600
_STICKY = 0o1000


def private_dir(path: str | os.PathLike) -> str:
    """``path`` as a directory that only this user can reach (made if absent); ``Refused`` if it cannot be."""
    path = os.path.abspath(os.fspath(path))
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        pass
    except FileNotFoundError:
        private_dir(os.path.dirname(path))
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            pass
    _check_parents(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:  # a symlink (ELOOP), a file where a directory should be (ENOTDIR), no access
        why = "is a symlink or a file, not a directory" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else \
            f"cannot be opened ({exc.strerror})"
        raise _unsafe(path, why) from None
    try:
        st = os.fstat(fd)
        why = _untrusted(st, mine=True)
        if why:
            raise _unsafe(path, why)
        if st.st_mode & 0o7077:
            os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)
    return path


def state_dir() -> str:
    """panio's state directory (``bench_agent.paths``; followed if a symlink), made private and checked."""
    from bench_agent.paths import state_dir_name

    return private_dir(os.path.realpath(state_dir_name()))


def open_private(path: str | os.PathLike, flags: int) -> int:
    """``os.open(path, flags | O_CREAT)`` for a file only this user may read: made 0600 (an existing one of ours
    is brought to 0600), never through a symlink."""
    fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o7777 != FILE_MODE and st.st_uid == os.geteuid():
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically (a 0600 temporary ``.<name>.<pid>.tmp`` renamed over it)."""
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def trusted_read(path: str) -> bytes | None:
    """The content of ``path`` if this user wrote it and no one else could have: the file and its directory
    ours, neither writable by group or others, no symlink at either; else ``None`` (absent, or not to be trusted)."""
    folder, name = os.path.split(path)
    try:
        dfd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _untrusted(os.fstat(dfd), mine=True):
            return None
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if (st.st_mode & 0o170000) != 0o100000 or _untrusted(st, mine=True):
            return None
        return f.read()


def _untrusted(st: os.stat_result, mine: bool) -> str | None:
    """Why a directory (or file) with status ``st`` cannot be trusted, or None. ``mine``: it must be this user's;
    else root's will do too (a directory above ours)."""
    me = os.geteuid()
    if st.st_uid != me and (mine or st.st_uid != 0):
        return f"is owned by uid {st.st_uid}, not by this user (uid {me})"
    if st.st_mode & _STICKY and not mine:
        return None
    if st.st_mode & 0o002:
        return f"is writable by every user (mode {st.st_mode & 0o7777:04o})"
    if st.st_mode & 0o020 and st.st_gid != os.getegid():
        return f"is writable by group {st.st_gid} (mode {st.st_mode & 0o7777:04o})"
    return None


def _check_parents(path: str) -> None:
    """Every directory above ``path``, as written and as resolved, must be writable by no one but us and root."""
    seen = set()
    for start in (os.path.dirname(path), os.path.realpath(os.path.dirname(path))):
        above = start
        while above not in seen:
            seen.add(above)
            try:
                st = os.stat(above)
            except OSError:
                return
            why = _untrusted(st, mine=False)
            if why:
                raise _unsafe(above, why, below=path)
            above = os.path.dirname(above)


def _unsafe(path: str, why: str, below: str | None = None):
    from bench_agent.errors import Refused

    if below:
        return Refused(f"{path}, above panio's directory {below}, {why}, so another user could replace what panio "
                       "keeps there; panio does not use it", path=path,
                       hint=f"make it writable by its owner only (chmod go-w {path}), or set PANIO_STATE_DIR / "
                            "TMPDIR to a private directory")
    return Refused(f"panio's directory {path} {why}, so another user could read or replace what panio keeps "
                   "there; panio does not use it", path=path,
                   hint=f"remove it (rm -r {path}) and panio makes a private one, or set PANIO_STATE_DIR / "
                        "TMPDIR to a private directory")
