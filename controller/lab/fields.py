"""The lab validator's building blocks: a problem at a key path, field and table specs, and the table walk.

``schema`` (the lab file) and the modules that describe one table of it (``profile``) build on these;
they live apart so that a table's own module can use them without importing the whole schema.
"""

from __future__ import annotations

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

if TYPE_CHECKING:
    from typing import Any, Callable

KeyPath = tuple  # where a value sits in the lab file: ("targets", "pico", "power")


class Problem(Exception):
    def __init__(self, path: KeyPath, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class Field:
    __slots__ = ("check", "required")

    def __init__(self, check: Callable[[KeyPath, Any], None], required: bool = False) -> None:
        self.check = check
        self.required = required


class TableSpec:
    __slots__ = ("fields", "what", "extra")

    def __init__(self, fields: dict[str, Field], what: str = "table",
                 extra: Callable[[KeyPath, dict], None] | None = None) -> None:
        self.fields = fields
        self.what = what
        self.extra = extra


def _type(kind: type | tuple[type, ...], label: str) -> Callable[[KeyPath, Any], None]:
    def check(path: KeyPath, value: Any) -> None:
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise Problem(path, f"{_dotted(path)} must be {label}, not a boolean")
        if not isinstance(value, kind):
            raise Problem(path, f"{_dotted(path)} must be {label}, not {_tomltype(value)}")

    return check


def _string(path: KeyPath, value: Any) -> None:
    _type(str, "a string")(path, value)


def _nonempty_string(path: KeyPath, value: Any) -> None:
    _string(path, value)
    if not value.strip():
        raise Problem(path, f"{_dotted(path)} must not be empty")


def _table(spec: TableSpec) -> Callable[[KeyPath, Any], None]:
    def check(path: KeyPath, value: Any) -> None:
        _type(dict, "a table")(path, value)
        check_table(path, value, spec)

    return check


def check_table(path: KeyPath, value: dict, spec: TableSpec) -> None:
    for key in value:
        if key not in spec.fields:
            from bench_agent.nearmiss import closest

            close = closest(key, spec.fields)
            hint = f"; did you mean {close!r}?" if close else f"; allowed: {', '.join(spec.fields)}"
            raise Problem(path + (key,), f"unknown key {key!r} in {spec.what} {_dotted(path)}{hint}")
    for key, fld in spec.fields.items():
        if key in value:
            fld.check(path + (key,), value[key])
        elif fld.required:
            raise Problem(path, f"{spec.what} {_dotted(path)} needs {key!r}")
    if spec.extra:
        spec.extra(path, value)


def _dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _tomltype(value: Any) -> str:
    return {str: "a string", int: "an integer", float: "a float", list: "an array", dict: "a table"}.get(type(value), type(value).__name__)
