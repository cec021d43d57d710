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
    """Why a directory (or file) with status ``st`` cannot be trusted, or None: ``not_trusted``'s rule. ``mine``:
    it must be this user's; else root's will do too, and a sticky one (``/tmp``) passes (a directory above ours)."""
    if not mine and st.st_mode & _STICKY and st.st_uid in (0, os.geteuid()):
        return None
    return not_trusted(st, root_ok=not mine)


def _above(*starts: str):
    """(directory, its status) of each directory from each of ``starts`` up to ``/``, each once; a walk ends at
    one that cannot be read."""
    seen = set()
    for above in starts:
        while above not in seen:
            seen.add(above)
            try:
                st = os.stat(above)
            except OSError:
                break
            yield above, st
            above = os.path.dirname(above)


def _check_parents(path: str) -> None:
    """Every directory above ``path``, as written and as resolved, must be writable by no one but us and root."""
    for above, st in _above(os.path.dirname(path), os.path.realpath(os.path.dirname(path))):
        why = _untrusted(st, mine=False)
        if why:
            raise _unsafe(above, why, below=path)


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


# What an operator put in place for panio to trust (message-signing keys and the certificates trusted, SSH
# known_hosts, the lease stores a host must check): whoever could write it could make panio trust them. So,
# as OpenSSH's StrictModes: owned by this user (or root), writable by neither group nor others, and so is
# every directory above it; else ``Refused``, naming the path and the fix, never ignored.


def not_trusted(st: os.stat_result, root_ok: bool = True, secret: bool = False) -> str | None:
    """Why a file or directory with status ``st`` could have been written by someone other than this user (or
    root, with ``root_ok``), or None. Writable by its group passes only when the owner is that group's one member
    (a user's private group, as a umask-002 system makes files 0664; Debian's OpenSSH rule). ``secret``: it must
    be readable by no one else either (a private key)."""
    me = os.geteuid()
    if st.st_uid != me and not (root_ok and st.st_uid == 0):
        return f"is owned by uid {st.st_uid}, not by this user (uid {me}){' or root' if root_ok else ''}"
    bits = 0o077 if secret else 0o002 if _sole_member(st.st_gid, st.st_uid) else 0o022
    if st.st_mode & bits:
        how = "readable or writable" if secret else "writable"
        who = "every user" if st.st_mode & (bits & 0o007) else f"group {st.st_gid}"
        return f"is {how} by {who} (mode {st.st_mode & 0o7777:04o})"
    return None


def _sole_member(gid: int, uid: int) -> bool:
    """Whether user ``uid`` is the one member of group ``gid`` (by primary group and by the group's list); asked
    once a process for each pair (reading every user can be slow with a directory service)."""
    if (gid, uid) not in _SOLE:
        import grp
        import pwd

        try:
            name, listed = pwd.getpwuid(uid).pw_name, grp.getgrgid(gid).gr_mem
            primary = {p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid}
            _SOLE[gid, uid] = primary | {uid for n in listed if n == name} == {uid} and set(listed) <= {name}
        except KeyError:
            _SOLE[gid, uid] = False
    return _SOLE[gid, uid]


_SOLE: dict[tuple[int, int], bool] = {}


def require_trusted(path: str | os.PathLike, what: str, directory: bool = False, secret: bool = False) -> None:
    """``Refused`` unless only this user or root could have written ``path`` (``what`` names it): a regular file
    (a directory with ``directory``) that ``not_trusted`` passes, checked on the opened descriptor (no symlink
    swapped in after the check), in directories that, up to ``/`` as written and as resolved, are writable by no
    one but this user and root (a root-owned sticky one such as ``/tmp`` passes)."""
    fd = _open_trusted(path, what, directory, secret)
    os.close(fd)


def require_trusted_files(folder: str | os.PathLike, what: str) -> list[str]:
    """``require_trusted`` for ``folder`` and each file in it (names starting with ``.`` aside: a glob skips
    them); a symlink or a directory in it is refused too. Returns the names checked."""
    dfd = _open_trusted(folder, what, directory=True)
    names = []
    try:
        for name in sorted(os.listdir(dfd)):
            if name.startswith("."):
                continue
            path = os.path.join(os.fspath(folder), name)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            except OSError as exc:
                why = "is a symlink (copy the file in instead)" if exc.errno == errno.ELOOP else \
                    f"cannot be opened ({exc.strerror})"
                raise _refused(f"a file in {what}", path, why,
                               f"remove it, or replace it by a regular file: {path}") from None
            try:
                _check_fd(fd, path, f"a file in {what}", directory=False, secret=False)
            finally:
                os.close(fd)
            names.append(name)
    finally:
        os.close(dfd)
    return names


def _open_trusted(path: str | os.PathLike, what: str, directory: bool, secret: bool = False) -> int:
    path = os.path.abspath(os.fspath(path))
    real = os.path.realpath(path)
    for above, st in _above(os.path.dirname(path), os.path.dirname(real)):
        why = None if st.st_mode & _STICKY and st.st_uid == 0 else not_trusted(st)
        if why:
            raise _refused(what, path, f"is in {above}, which {why}", _fix(above, st))
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_DIRECTORY if directory else 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        why = f"is not a {'directory' if directory else 'file'}" if exc.errno == errno.ENOTDIR else \
            f"cannot be opened ({exc.strerror})"
        raise _refused(what, path, why, f"check {path}") from None
    try:
        _check_fd(fd, path, what, directory, secret)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_fd(fd: int, path: str, what: str, directory: bool, secret: bool) -> None:
    st = os.fstat(fd)
    kind = 0o040000 if directory else 0o100000
    if st.st_mode & 0o170000 != kind:
        raise _refused(what, path, f"is not a {'directory' if directory else 'regular file'}", f"check {path}")
    why = not_trusted(st, secret=secret)
    if why:
        raise _refused(what, path, why, _fix(path, st, secret))


def _fix(path: str, st: os.stat_result, secret: bool = False) -> str:
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        return f"if you put it there, make it yours (chown {me} {path}); else remove it: someone else made it"
    return f"chmod {'go-rwx' if secret else 'go-w'} {path}"


def _refused(what: str, path: str, why: str, fix: str):
    from bench_agent.errors import Refused

    return Refused(f"{what} {path} {why}, so someone else could have written it; panio does not trust it",
                   path=path, hint=fix)
