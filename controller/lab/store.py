"""Reading and editing the lab file: validated reads, locked atomic edits.

Reads use ``tomllib`` (fast, strict). Edits use ``tomlkit`` so a person's
comments, blank lines and ordering survive. An edit takes an exclusive
``flock`` on ``<lab>.lock``, re-reads the file under the lock (so concurrent
edits never lose an update), refuses to touch a file that does not validate,
and replaces the file by rename from a fsynced temporary in the same folder
(so a crash never leaves half a file).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

from bench_agent.errors import ConfigInvalid, NotConfigured, Refused, UsageError, no_space

from controller.lab.model import Lab

if TYPE_CHECKING:
    from typing import Any, Callable, ContextManager, Iterator

LabPath = str  # lab paths are plain strings (see controller.paths)


def load_text(path: LabPath, text: str) -> dict[str, Any]:
    """Parse and validate ``text`` (the content of ``path``); raise ``ConfigInvalid`` naming line and column."""
    from controller.lab import schema, tomlfile

    return tomlfile.parse(path, text, schema.validate, "fix that line; panio has not changed the file")


def _read(path: LabPath) -> str:
    from controller.lab import tomlfile

    if not os.path.exists(path):
        if os.path.islink(path):
            raise NotConfigured(f"the lab file {path} is a symlink to {os.readlink(path)}, which does not exist",
                                hint="fix the link, or create the file it points to with `panio init`",
                                file=str(path))
        raise _missing(path)  # no lab file yet: not_configured, and `panio init` makes one
    return tomlfile.read(path, "lab file")


def _missing(path: LabPath) -> NotConfigured:
    return NotConfigured(f"no lab file at {path}", hint="create one with `panio init`", file=str(path))


def load(path: LabPath) -> Lab:
    """Read and validate the lab file, reusing the last validated parse of the very same text.

    Parsing and validating costs more than the rest of a read command, so the
    parse of a file is kept in the state dir beside the exact text it came
    from; it is used only when the file's text is identical.
    """
    text = _read(path)
    cache = _cache_file(path)
    data = _cache_get(cache, text)
    if data is None:
        data = load_text(path, text)
        _cache_put(cache, text, data)
    from bench_agent.adb.channels import with_adb_channels

    return Lab(path, with_adb_channels(data))


def _cache_file(path: LabPath) -> str | None:
    from bench_agent.paths import lab_cache_path

    return lab_cache_path(path)


# The generation of the rules a cached parse was validated by: a parse an older panio validated is not believed
# (a lab file it accepted may hold what the rules now refuse, such as a spy:// device). Bump it with every rule
# that refuses what was accepted before.
RULES = 2


# marshal, not json: it is built in (no import cost) and the cache is private to this user: a parse holds the lab's
# hooks, so a cache is believed only if this user wrote it and no one else could have (``private.trusted_read``),
# and written 0600 in a 0700 directory (a 0600 lab file must not leak through it).
def _cache_get(cache: str | None, text: str) -> dict | None:
    import marshal

    from bench_agent.private import trusted_read

    if cache is None:
        return None
    try:
        raw = trusted_read(cache)
        entry = None if raw is None else marshal.loads(raw)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if (isinstance(entry, dict) and entry.get("text") == text and entry.get("rules") == RULES
            and isinstance(entry.get("data"), dict)):
        return entry["data"]
    return None


def _cache_put(cache: str | None, text: str, data: dict) -> None:
    import marshal

    from bench_agent.errors import Refused
    from bench_agent.private import private_dir, write_private

    if cache is None:
        return
    try:
        private_dir(os.path.dirname(cache))
        write_private(cache, marshal.dumps({"text": text, "rules": RULES, "data": data}))
    except (OSError, Refused):  # a cache that cannot be kept (full disk, a directory not ours): parse each time
        pass


class locked:  # noqa: N801 - used as a function (`with locked(path):`)
    """The lab file's exclusive lock (``flock`` on ``<lab>.lock``) for a ``with`` block. (A class, not
    ``contextlib.contextmanager``: every command reads this module, and a read need not import contextlib.)"""

    def __init__(self, path: LabPath) -> None:
        self.path = path

    def __enter__(self) -> None:
        import fcntl

        lock_path = f"{os.path.realpath(self.path)}.lock"  # one lock per real file, whichever link names it
        try:
            self.fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:
            raise _missing(self.path) from None
        except OSError as exc:
            raise no_space(exc, lock_path) or ConfigInvalid(f"cannot take the lab file's lock {lock_path}: {exc.strerror}",
                                hint="it must be a writable regular file beside the lab file (remove it if it is not)",
                                file=str(self.path)) from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def write_atomic(path: LabPath, text: str) -> None:
    """Replace ``path``'s content by rename from a fsynced temporary beside it.

    A symlinked lab file is followed (the file it points to is replaced, the link
    stays); a read-only file is refused, not replaced; the replacement keeps the
    file's mode and owner. Temporaries of edits that were killed are removed.
    """
    import contextlib
    import tempfile

    real = os.path.realpath(path)
    mode, owner = 0o644, None
    with contextlib.suppress(FileNotFoundError):
        info = os.stat(real)
        mode, owner = info.st_mode & 0o7777, (info.st_uid, info.st_gid)
        if not os.access(real, os.W_OK) or not mode & 0o222:
            raise Refused(f"the lab file {path} is read-only, so panio does not change it",
                          hint="make it writable (chmod u+w) if the edit is meant", file=str(path))
        if info.st_nlink > 1:  # the rename would leave the other links with the old content (issue 45)
            raise Refused(f"the lab file {path} has {info.st_nlink} hard links, and an edit would split them (this name "
                          "would get the new file, the others keep the old one), so panio does not change it",
                          hint=f"make it a file of its own: cp -p {real} {real}.copy && mv {real}.copy {real} (link it "
                               "elsewhere with a symlink)", file=str(path))
    folder, name = os.path.split(real)
    _remove_stale_temporaries(folder, name)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise no_space(exc, path, f"the lab file {path}") or ConfigInvalid(
            f"cannot write beside the lab file in {folder}: {exc.strerror}", file=str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if owner is not None and owner != (os.getuid(), os.getgid()):
            with contextlib.suppress(PermissionError):
                os.chown(tmp, *owner)
        os.replace(tmp, real)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        full = no_space(exc, path, f"the lab file {path}")  # the file is as it was: only the temporary was written
        if full is not None:
            raise full from None
        raise


def _remove_stale_temporaries(folder: str, name: str) -> None:
    """Temporaries ``.<name>.<pid>.*.tmp`` whose writer is gone (killed mid-edit; we hold the lock)."""
    import contextlib

    from bench_agent.process import pid_alive

    prefix = f".{name}."
    with contextlib.suppress(OSError):
        for entry in os.listdir(folder):
            if not (entry.startswith(prefix) and entry.endswith(".tmp")):
                continue
            pid = entry[len(prefix):].split(".", 1)[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, entry))


def edit(path: LabPath) -> ContextManager[Any]:
    """Yield the lab as a ``tomlkit`` document; on a clean exit, validate and write it back.

    If the body raises, nothing is written. If the result would not validate,
    nothing is written and the problem is reported as a usage error.
    """
    import contextlib  # here: a read of the lab need not import it

    return contextlib.contextmanager(_edit)(path)


def _edit(path: LabPath) -> Iterator[Any]:
    import tomlkit

    from controller.lab import schema

    with locked(path):
        text = _read(path)
        load_text(path, text)
        doc = tomlkit.parse(text)
        yield doc
        new_text = doc.as_string()
        if new_text == text:
            return
        import tomllib

        try:
            new_data = tomllib.loads(new_text)
            schema.validate(new_data)
        except schema.Problem as problem:
            raise UsageError(problem.message) from None
        write_atomic(path, new_text)
        _cache_put(_cache_file(path), new_text, new_data)  # the next read skips the parse, as after an append


def append_table(path: LabPath, section: str, name: str, values: dict[str, Any],
                 check: Callable[[dict], None] | None = None) -> bool:
    """Add ``[section.name]`` with ``values`` by appending its text; ``False`` when only a full edit can do it.

    Adding a target or a host is the one edit a big lab sees most, and a full
    ``tomlkit`` round trip of a 50,000-target file takes minutes. A new table can
    go at the end of the file without touching the rest: ``check`` sees the
    parsed lab first and raises to refuse, the schema validates the lab with the
    new table, and only the new text is parsed. When the file's layout does not
    allow a plain append (``targets`` written as an inline table or with dotted
    keys) the caller falls back to ``edit``.
    """
    import re
    import tomllib

    import tomlkit

    from controller.lab import schema

    with locked(path):
        text = _read(path)
        if re.search(rf"^[ \t]*{section}[ \t]*[.=]", text, re.M):
            return False  # `targets = {...}` or `targets.x.y = ...`: a header appended after may not be valid TOML
        cache = _cache_file(path)
        data = _cache_get(cache, text) or load_text(path, text)
        if check is not None:
            check(data)
        body = tomlkit.dumps({k: v for k, v in values.items() if v is not None and v != ""})
        fragment = f"[{section}.{name}]\n{body}"
        table = tomllib.loads(fragment)[section][name]  # only the new text is parsed; the rest is unchanged
        new_data = {**data, section: {**data.get(section, {}), name: table}}
        try:
            schema.validate(new_data)
        except schema.Problem as problem:
            raise UsageError(problem.message) from None
        sep = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
        new_text = f"{text}{sep}{fragment}"
        write_atomic(path, new_text)
        _cache_put(cache, new_text, new_data)
    return True
