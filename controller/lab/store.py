"""Reading and editing the lab file: validated reads, locked atomic edits.

Reads use ``tomllib`` (fast, strict). Edits use ``tomlkit`` so a person's
comments, blank lines and ordering survive. An edit takes an exclusive
``flock`` on ``<lab>.lock``, re-reads the file under the lock (so concurrent
edits never lose an update), refuses to touch a file that does not validate,
and replaces the file by rename from a fsynced temporary in the same folder
(so a crash never leaves half a file).
"""

from __future__ import annotations

import contextlib
import os
TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

from bench_agent.errors import NotConfigured, UsageError

from controller.lab.model import Lab

if TYPE_CHECKING:
    from typing import Any, Iterator

LabPath = str  # lab paths are plain strings (see controller.paths)


def load_text(path: LabPath, text: str) -> dict[str, Any]:
    """Parse and validate ``text`` (the content of ``path``); raise ``ConfigInvalid`` naming line and column."""
    from controller.lab import schema, tomlfile

    return tomlfile.parse(path, text, schema.validate, "fix that line; panio has not changed the file")


def _read(path: LabPath) -> str:
    from controller.lab import tomlfile

    if not os.path.lexists(path):
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
    return Lab(path, data)


def _cache_file(path: LabPath) -> str | None:
    from bench_agent.paths import state_dir

    name = "lab-" + os.path.abspath(path).replace(os.sep, "%") + ".marshal"
    return None if len(name) > 250 else os.path.join(state_dir(), "cache", name)


# marshal, not json: it is built in (no import cost) and the cache is private to this user.
def _cache_get(cache: str | None, text: str) -> dict | None:
    import marshal

    if cache is None:
        return None
    try:
        with open(cache, "rb") as f:
            entry = marshal.load(f)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if isinstance(entry, dict) and entry.get("text") == text and isinstance(entry.get("data"), dict):
        return entry["data"]
    return None


def _cache_put(cache: str | None, text: str, data: dict) -> None:
    import marshal

    if cache is None:
        return
    tmp = f"{cache}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(tmp, "wb") as f:
            marshal.dump({"text": text, "data": data}, f)
        os.replace(tmp, cache)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


@contextlib.contextmanager
def locked(path: LabPath) -> Iterator[None]:
    import fcntl

    lock_path = f"{path}.lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        raise _missing(path) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_atomic(path: LabPath, text: str) -> None:
    import tempfile

    mode = 0o644
    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(path).st_mode & 0o7777
    folder, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def edit(path: LabPath) -> Iterator[Any]:
    """Yield the lab as a ``tomlkit`` document; on a clean exit, validate and write it back.

    If the body raises, nothing is written. If the result would not validate,
    nothing is written and the problem is reported as a usage error.
    """
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
            schema.validate(tomllib.loads(new_text))
        except schema.Problem as problem:
            raise UsageError(problem.message) from None
        write_atomic(path, new_text)
