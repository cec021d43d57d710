"""``netboot stage``: put a file (a build's kernel) into a target's TFTP root, from a folder the lab allows.

SOURCE and NAME are runtime input (a job step's words, an MCP caller's arguments), so what they may reach is
bounded here, on the host that serves the root, whatever road they came by:

- SOURCE must be a regular file whose real path (symlinks followed) is inside the target's ``stage_from``
  folder (the lab file's, itself checked as a TFTP root is: never a system folder or a home directory). The
  file is opened without following a last symlink and the opened file's own path is checked again, so a link
  swapped in between the check and the open does not widen it.
- NAME is one plain file name or a relative path of them (``values.stage_name``: ``pxelinux.cfg/default``; no
  ``..``, no leading dot, no absolute path, at most 8 parts). Its folders are made inside the root and each is
  opened relative to the one before without following a symlink (``openat``, ``O_NOFOLLOW``): a folder, or a
  symlink planted where one should be, can never lead the file out of the root.
- The copy goes to a fresh temporary file in NAME's folder (``O_EXCL``, never following a symlink) and is
  renamed over NAME: a symlink already at NAME is replaced, never written through, and a board never reads half
  a file.

Nothing here reaches a shell or a generated config file.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from typing import Any

from bench_agent.errors import NotConfigured, Refused, UsageError
from bench_agent.netboot import values

CHUNK = 1 << 20


def stage(target: str, netboot: dict[str, Any], tftp_root: str, source: str, name: str | None) -> dict[str, Any]:
    """Copy ``source`` into ``tftp_root`` as ``name`` (default: its file name); what was staged, with its sha256."""
    allowed = _allowed_folder(target, netboot)
    name, parts = _name(target, source, name)
    root = _root(target, tftp_root)
    fd, real = _open_source(target, source, allowed)
    try:
        size, digest = _place(fd, root, parts)
    finally:
        os.close(fd)
    return {"target": target, "source": real, "name": name,
            "path": os.path.join(root, name), "bytes": size, "sha256": digest}


def _allowed_folder(target: str, netboot: dict[str, Any]) -> str:
    given = netboot.get("stage_from")
    if not given:
        raise NotConfigured(f"target {target!r} allows no folder to stage files from: its netboot table has no "
                            "stage_from", hint=f"panio netboot set -t {target} --stage-from DIR (the folder your "
                            "builds are in; only files below it can be staged)", target=target)
    try:
        real = values.stage_root(given)
    except values.BadValue as exc:
        raise Refused(f"netboot of {target!r}: {exc}", target=target, stage_from=given) from None
    if not os.path.isdir(real):
        raise NotConfigured(f"the stage_from folder {given} of {target!r} does not exist", target=target,
                            stage_from=given)
    return real


def _name(target: str, source: str, name: str | None) -> tuple[str, list[str]]:
    chosen = os.path.basename(source) if name is None else name
    try:
        return chosen, values.stage_name(chosen)
    except values.BadValue as exc:
        hint = None if name is not None else "give the name the board asks for: --as NAME"
        raise UsageError(f"netboot stage {target}: {exc}", hint=hint, argument="name") from None


def _root(target: str, tftp_root: str) -> str:
    try:
        root = values.served_root(tftp_root)
    except values.BadValue as exc:
        raise Refused(f"netboot of {target!r}: {exc}", target=target, tftp_root=tftp_root) from None
    if not os.path.isdir(root):
        raise NotConfigured(f"TFTP root {tftp_root} does not exist", hint=f"mkdir -p {tftp_root}", target=target,
                            tftp_root=tftp_root)
    return root


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def _outside(target: str, source: str, allowed: str, real: str) -> Refused:
    shown = source if real == source else f"{source} ({real})"
    return Refused(f"netboot stage {target}: {shown} is not inside the stage_from folder {allowed}: only files "
                   "below it can be staged", hint=f"copy the file below {allowed}, or change the folder with "
                   f"`panio netboot set -t {target} --stage-from DIR`", target=target, source=source)


def _open_source(target: str, source: str, allowed: str) -> tuple[int, str]:
    """A read descriptor on ``source``, a regular file really inside ``allowed``, and its real path."""
    if "://" in source:
        raise UsageError(f"netboot stage {target}: {source!r} is a URL: SOURCE is a file on the target's host "
                         "(fetch it there first)", argument="source")
    if not os.path.isabs(source):
        raise UsageError(f"netboot stage {target}: {source!r} is relative: give the file's absolute path on the "
                         "target's host", argument="source")
    real = os.path.realpath(source)
    if not _inside(real, allowed):
        raise _outside(target, source, allowed, real)
    try:  # the real path, no last symlink followed; non-blocking: a FIFO must not hang the open
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotConfigured(f"netboot stage {target}: no file {source}", target=target, source=source) from None
    except OSError as exc:
        why = "a symlink changed under it" if exc.errno == errno.ELOOP else exc.strerror
        raise Refused(f"netboot stage {target}: cannot open {source}: {why}", target=target, source=source) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused(f"netboot stage {target}: {source} is not a regular file", target=target, source=source)
        opened = os.path.realpath(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else real
        if not _inside(opened, allowed):  # a folder on the way was swapped for a link after the check
            raise _outside(target, source, allowed, opened)
    except BaseException:
        os.close(fd)
        raise
    return fd, opened


def _place(src: int, root: str, parts: list[str]) -> tuple[int, str]:
    """Copy ``src`` to a fresh temporary file in the folder of ``parts`` below ``root`` (made as needed), then
    rename it over the last part: (bytes, sha256)."""
    folder = _folder(root, parts[:-1])
    name, shown = parts[-1], os.path.join(root, *parts)
    tmp = f".stage-{secrets.token_hex(8)}"
    try:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                      dir_fd=folder)
        try:
            size, digest = _copy(src, out)
            os.fchmod(out, 0o644)  # whatever the umask: the TFTP server (dnsmasq drops root) must read it
            os.fsync(out)
        finally:
            os.close(out)
        try:
            os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except IsADirectoryError:
            raise Refused(f"{shown} is a folder: give another name with --as", name="/".join(parts)) from None
        tmp = ""
        os.fsync(folder)
        return size, digest
    finally:
        if tmp:
            try:
                os.unlink(tmp, dir_fd=folder)
            except FileNotFoundError:
                pass
        os.close(folder)


def _folder(root: str, folders: list[str]) -> int:
    """A descriptor on ``root``/``folders``, each made if missing (0755: the TFTP server must read it) and each
    opened relative to the one before without following a symlink, so nothing planted in the root (a symlink
    to /etc where a folder should be) leads outside it."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(folders):
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                made = True
            except FileExistsError:
                made = False
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                where = os.path.join(root, *folders[:i + 1])
                why = _why_not_folder(part, fd, exc)
                raise Refused(f"netboot stage: {where} {why}: a staged file's folders must be real folders in the "
                              "TFTP root", hint=f"remove {where}, or give another name with --as",
                              path=where) from None
            os.close(fd)
            fd = inner
            if made:
                os.fchmod(fd, 0o755)  # whatever the umask
        return fd
    except BaseException:
        os.close(fd)
        raise


def _why_not_folder(part: str, folder: int, exc: OSError) -> str:
    """Why ``part`` of ``folder`` did not open as a folder (with O_NOFOLLOW a symlink fails as ENOTDIR or ELOOP)."""
    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
        return exc.strerror or str(exc)
    try:
        mode = os.stat(part, dir_fd=folder, follow_symlinks=False).st_mode
    except OSError:
        return "changed while it was opened"
    return "is a symlink" if stat.S_ISLNK(mode) else "is not a folder"


def _copy(src: int, out: int) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    os.set_blocking(src, True)
    while chunk := os.read(src, CHUNK):
        h.update(chunk)
        size += len(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(out, view):]
    return size, h.hexdigest()
