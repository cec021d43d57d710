"""Check a tool call's arguments against its ``ToolSpec`` before anything runs.

A call that fails here is malformed (a missing target, a wrong type, a value
out of range, an unknown argument): the server answers it with a JSON-RPC
invalid-params error naming the argument and the bound, and runs nothing.
"""

from __future__ import annotations

import re
from typing import Any

from controller.mcp.tools import NAME_PATTERN, ToolSpec

_NAME = re.compile(NAME_PATTERN)
_TYPES = {"string": (str,), "integer": (int,), "boolean": (bool,), "array": (list,)}
MAX_TEXT_CHARS = 65536  # one text argument: what `panio` could take on a command line (Linux: 128 KiB at most)
_JSON_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


class BadArguments(ValueError):
    """The arguments of a call do not fit the tool; ``str()`` says which and why."""


def did_you_mean(wrong: str, names: list[str]) -> str:
    """`; did you mean 'x'?` for a typo (`targt`) or a name without its unit (`timeout`), else ''.

    Only close misses: a looser match would point `serial_read` at `serial_send`, a tool that types.
    """
    from bench_agent.nearmiss import closest

    close = closest(wrong, names, cutoff=0.85) or next((n for n in names if n.startswith(wrong + "_")), None)
    return f"; did you mean {close!r}?" if close else ""


def check(tool: ToolSpec, given: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments with defaults left to the CLI; raises ``BadArguments``."""
    values = dict(given or {})
    unknown = sorted(set(values) - {a.name for a in tool.args})
    if unknown:
        names = [a.name for a in tool.args]
        raise BadArguments(f"{tool.name}: unknown argument(s) {', '.join(unknown)}{did_you_mean(unknown[0], names)}"
                           f" (arguments: {', '.join(names) or 'none'})")
    for a in tool.args:
        if a.required and values.get(a.name) is None:
            raise BadArguments(f"{tool.name}: missing required argument {a.name!r} ({a.help})")
    for name, value in list(values.items()):
        if value is None:
            del values[name]
            continue
        values[name] = _check_value(tool, name, value)
    needs, exclusive = tool.rules()
    for name, needed in needs.items():
        if name in values and needed not in values:
            raise BadArguments(f"{tool.name}: {name} needs {needed}")
    both = [n for n in exclusive if n in values]
    if len(both) > 1:
        raise BadArguments(f"{tool.name}: give at most one of {', '.join(exclusive)} (got {', '.join(both)})")
    return values


def _check_value(tool: ToolSpec, name: str, value: Any) -> Any:
    a = tool.arg(name)
    assert a is not None
    where = f"{tool.name}: {name}"
    if a.kind == "integer" and isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema counts 5.0 as an integer
    # bool is an int in Python; JSON true is not a JSON integer.
    if not isinstance(value, _TYPES[a.kind]) or (a.kind == "integer" and isinstance(value, bool)):
        raise BadArguments(f"{where} must be of type {a.kind}, got {_JSON_NAMES.get(type(value), 'value')} {value!r}"
                           f" ({a.help})")  # the help shows the shape: ["key", "ENTER"], not "key ENTER"
    if a.minimum is not None and value < a.minimum:
        raise BadArguments(f"{where} = {value} is below the minimum {a.minimum} (allowed: {_range(a)})")
    if a.maximum is not None and value > a.maximum:
        raise BadArguments(f"{where} = {value} is above the maximum {a.maximum} (allowed: {_range(a)})")
    if a.kind == "array":
        if not value or not all(isinstance(v, str) and v and "\x00" not in v for v in value):
            raise BadArguments(f"{where} must be a non-empty array of non-empty strings, got {value!r}")
    if a.kind == "string":
        if a.required and not value:
            raise BadArguments(f"{where} must not be empty")
        if "\x00" in value:
            raise BadArguments(f"{where} must not contain a NUL character")
        if len(value) > MAX_TEXT_CHARS:
            raise BadArguments(f"{where} is {len(value)} characters long; at most {MAX_TEXT_CHARS} "
                               "(send a long text in several calls)")
        if a.is_name and not _NAME.fullmatch(value):
            raise BadArguments(f"{where} = {value!r} is not a valid name: lowercase letters, digits, '-' and '_', "
                               "starting with a letter or digit, at most 64 characters")
    return value


def _range(a: Any) -> str:
    lo = "" if a.minimum is None else str(a.minimum)
    hi = "" if a.maximum is None else str(a.maximum)
    return f"{lo}..{hi}"
