"""Reading a TOML file the user wrote (lab, job, suite) with errors that name file, line and column."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

from bench_agent.errors import ConfigInvalid, UsageError

MAX_BYTES = 16 << 20  # a lab of 50,000 targets is ~5 MB; anything bigger is not a file a person wrote


def _missing_hint(kind: str) -> str:
    if kind in ("job file", "suite file"):  # the README's `job run smoke.toml` names a file the reader has yet to write
        where = "`panio job --help`" if kind == "job file" else "docs/jobs.md (Suites)"
        return (f"check the path; {where} shows the format, and `panio-sim up` writes runnable ones "
                f"(boot.toml, suite.toml) beside its lab")
    return "check the path"


def read(path: Any, kind: str) -> str:
    """The file's text; a missing file is a ``UsageError`` (the caller named it), an unreadable one ``ConfigInvalid``.

    Only a regular file of at most ``MAX_BYTES`` is read: a FIFO would block every
    command forever and ``/dev/zero`` would be read until memory runs out. The
    file is opened non-blocking and checked with ``fstat`` before any read.
    """
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(f"no {kind} at {path}", hint=_missing_hint(kind), file=str(path)) from None
    except IsADirectoryError:
        raise ConfigInvalid(f"{path} is a directory, not a {kind}", file=str(path)) from None
    except PermissionError:
        raise ConfigInvalid(f"{path}: permission denied", file=str(path)) from None
    except OSError as exc:
        raise ConfigInvalid(f"{path}: cannot open the {kind}: {exc.strerror}", file=str(path)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigInvalid(f"{path} is a directory, not a {kind}", file=str(path))
        if not stat.S_ISREG(info.st_mode):
            raise ConfigInvalid(f"{path} is not a regular file (a FIFO, device or socket), so panio does not read it "
                                f"as a {kind}", hint="point at a regular TOML file", file=str(path))
        if info.st_size > MAX_BYTES:
            raise ConfigInvalid(f"{path} is {info.st_size} bytes; a {kind} may be at most {MAX_BYTES} bytes",
                                file=str(path))
        data = _read_all(fd, MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigInvalid(f"{path}: cannot read the {kind}: {exc.strerror}", file=str(path)) from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ConfigInvalid(f"{path} grew past {MAX_BYTES} bytes while being read", file=str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigInvalid(f"{path}: not UTF-8 text (byte {exc.start})", file=str(path)) from None


def _read_all(fd: int, limit: int) -> bytes:
    import os

    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def invalid(path: Any, line: int, col: int, message: str, hint: str) -> ConfigInvalid:
    return ConfigInvalid(f"{path}:{line}:{col}: {message}", hint=hint, file=str(path), line=line, column=col)


def parse(path: Any, text: str, validate: Callable[[dict], None], hint: str) -> dict:
    """Parse ``text`` and run ``validate`` on it (raising ``schema.Problem``); errors point at the line."""
    import re
    import tomllib

    from controller.lab.schema import Problem

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+), column (\d+)", str(exc))
        line, col = (int(m.group(1)), int(m.group(2))) if m else (1, 1)
        raise invalid(path, line, col, f"not valid TOML: {str(exc).split(' (at ')[0]}", hint) from None
    except RecursionError:
        raise ConfigInvalid(f"{path}: nested too deeply to read (arrays or tables inside each other)",
                            hint=hint, file=str(path)) from None
    try:
        validate(data)
    except Problem as problem:
        from controller.lab.locate import locate

        raise invalid(path, *locate(text, problem.path), problem.message, hint) from None
    return data
