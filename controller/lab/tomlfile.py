"""Reading a TOML file the user wrote (lab, job, suite) with errors that name file, line and column."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

from bench_agent.errors import ConfigInvalid, UsageError


def read(path: Any, kind: str) -> str:
    """The file's text; a missing file is a ``UsageError`` (the caller named it), an unreadable one ``ConfigInvalid``."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"no {kind} at {path}", hint="check the path", file=str(path)) from None
    except IsADirectoryError:
        raise ConfigInvalid(f"{path} is a directory, not a {kind}", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigInvalid(f"{path}: not UTF-8 text (byte {exc.start})", file=str(path)) from None
    except PermissionError:
        raise ConfigInvalid(f"{path}: permission denied", file=str(path)) from None


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
    try:
        validate(data)
    except Problem as problem:
        from controller.lab.locate import locate

        raise invalid(path, *locate(text, problem.path), problem.message, hint) from None
    return data
