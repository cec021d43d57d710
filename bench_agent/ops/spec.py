"""What an operation says about itself, written once: its ``OpSpec``.

An operation is registered with its spec (``@operation("serial.wait", params=...,
deadline=...)``), as inspect_ai registers a solver with its metadata. The spec
is the one place its facts live:

- ``params``: the request's own arguments (not the channel configuration the
  controller adds, such as ``iface`` or ``command``), each with type, unit,
  bounds, default and choices. ``OpSpec.validate`` checks a request against
  them on every road in (CLI, MCP, job step, SSH agent, Celery task), so a
  value outside its bounds, a NaN or an infinity is a usage error everywhere.
- ``side_effect``: it changes the target (input, power, actions). Reads pass
  while another holder leases the target; side effects are refused.
- ``interactive``: it needs a byte stream both ways (``serial connect``), not a
  request and a reply, so a transport must give it a channel of its own.
- ``deadline``: seconds the operation may take, from its arguments
  (``timeout_ms``, a hook's ``timeout_s``); ``None`` = no bound of its own, the
  caller's default applies. Transports wait this long plus their own margin.
- ``unknown_on_failure``: a failure half-way (link lost, timeout) leaves the
  target's state unknown. Defaults to ``side_effect``.

The CLI's flags, the MCP tools' schemas and annotations, ``job check`` and
every transport's wait are derived from the spec, never copied from it.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False  # typing and dataclasses stay off the start-up path of every runtime command
if TYPE_CHECKING:
    from typing import Any, Callable

from bench_agent.errors import UsageError

HUGE = 1 << 53  # bounds from here up are "no practical limit" in messages and help
REQUIRED = object()  # a ``Param.default`` meaning "the caller must give it"
_KINDS = {int: "a whole number", float: "a number", str: "text", bool: "true or false", list: "a list",
          dict: "a table"}


# Immutable records as named tuples, not frozen dataclasses: dataclasses imports inspect (and ast,
# tokenize, dis), a third of an interpreter's start-up, on the path of every runtime command.
class Param(namedtuple("Param", "name kind help default unit minimum maximum choices nullable flag",
                       defaults=("", REQUIRED, None, None, None, None, False, None))):
    """One argument of an operation's request: ``name``, ``kind`` (int | float | str | bool | list | dict),
    ``help``, ``default`` (``REQUIRED``: the caller must give it), ``unit`` ("ms", "s", "bytes", ...:
    durations and sizes carry their unit), ``minimum``, ``maximum``, ``choices``, and ``nullable`` (None is a
    valid value: an optional cursor, "not given"), ``flag`` (the CLI flag when it is not --<name with dashes>:
    serial.log's first is --from). ``param._replace(maximum=500)`` makes a changed copy."""

    __slots__ = ()

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def check(self, value: Any) -> Any:
        """``value`` if it fits this parameter, else a ``UsageError`` naming the argument and its bounds."""
        if value is None and (self.nullable or self.default is None):
            return None
        if not self._type_ok(value):
            raise self._error(f"must be {_KINDS.get(self.kind, self.kind.__name__)}, not {value!r}")
        if self.kind is float:
            import math  # here, not at the top: the CLI imports this module at every runtime command's start

            value = float(value)
            if not math.isfinite(value):
                raise self._error(f"must be a finite number, not {value!r}")
        if self.choices is not None and value not in self.choices:
            raise self._error(f"must be one of {', '.join(map(str, self.choices))}, not {value!r}")
        if self.kind in (int, float) and not self._in_bounds(value):
            raise self._error(f"must be {self.bounds_text()}, not {value!r}")
        return value

    def _type_ok(self, value: Any) -> bool:
        if isinstance(value, bool):
            return self.kind is bool
        if self.kind is float:
            return isinstance(value, (int, float))
        return isinstance(value, self.kind)

    def _in_bounds(self, value: float) -> bool:
        return (self.minimum is None or value >= self.minimum) and (self.maximum is None or value <= self.maximum)

    def bounds_text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        lo, hi = _num(self.minimum), _num(self.maximum)
        if hi is not None and hi >= HUGE:  # a sequence number's cap is no bound a reader needs to see
            hi = None
        if lo is not None and hi is not None:
            return f"from {lo} to {hi}{unit}"
        if lo is not None:
            return f"at least {lo}{unit}"
        return f"at most {hi}{unit}" if hi is not None else "a number"

    def _error(self, why: str) -> UsageError:
        return UsageError(f"{self.name} {why}", argument=self.name)

    def json_schema(self) -> dict[str, Any]:
        """This parameter as JSON Schema (the MCP tools' input schemas are built from it)."""
        kind = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array",
                dict: "object"}[self.kind]
        out: dict[str, Any] = {"type": [kind, "null"] if self.nullable else kind}
        if self.help:
            out["description"] = self.help + (f" ({self.unit})" if self.unit else "")
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.choices is not None:
            out["enum"] = list(self.choices)
        if not self.required and self.default is not None:
            out["default"] = self.default
        return out


def _num(value: float | None) -> int | float | None:
    return int(value) if value is not None and float(value).is_integer() else value


class OpSpec(namedtuple("OpSpec", "name params side_effect interactive deadline unknown_on_failure summary extra "
                                  "needs exclusive", defaults=((), False, False, None, None, "", None, None, ()))):
    """The facts of one operation (see the module docstring): ``name``, ``params`` (``Param``s),
    ``side_effect``, ``interactive``, ``deadline`` (args -> seconds or None), ``unknown_on_failure``,
    ``summary``, ``extra`` (a dict: room for a channel's own facts), ``needs`` (a parameter -> the parameter
    it needs beside it) and ``exclusive`` (at most one of these parameters per call); None reads as empty."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> OpSpec:
        spec = super().__new__(cls, *args, **kwargs)
        return spec if spec.extra is not None and spec.needs is not None else spec._replace(
            extra={} if spec.extra is None else spec.extra, needs={} if spec.needs is None else spec.needs)

    @property
    def outcome_unknown_on_failure(self) -> bool:
        return self.side_effect if self.unknown_on_failure is None else self.unknown_on_failure

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Check the declared parameters of ``args`` (others, the channel's configuration, pass through).

        Missing required parameters and out-of-bounds values are usage errors; the
        returned dict is ``args`` with each declared parameter checked.
        """
        out = dict(args)
        for p in self.params:
            if p.name in out:
                out[p.name] = p.check(out[p.name])
            elif p.required:
                raise UsageError(f"{self.name}: {p.name} is required", argument=p.name)
        if self.needs or self.exclusive:  # most operations have no cross-argument rule: no set to build
            self.check_rules({k for k, v in out.items() if v is not None})
        return out

    def check_rules(self, given: set[str]) -> None:
        """The cross-argument rules: ``needs`` and ``exclusive``, named by their CLI flags."""
        for name, needed in self.needs.items():
            if name in given and needed not in given:
                raise UsageError(f"{self._flag(name)} needs {self._flag(needed)}", argument=name)
        both = [n for n in self.exclusive if n in given]
        if len(both) > 1:
            raise UsageError(f"give at most one of {', '.join(map(self._flag, self.exclusive))} "
                             f"(got {', '.join(map(self._flag, both))})", argument=both[1])

    def _flag(self, name: str) -> str:
        p = self.param(name)
        return p.cli_flag if p is not None else name

    def deadline_s(self, args: dict[str, Any]) -> float | None:
        """Seconds this call may take by its own arguments, or ``None`` when it has no bound of its own."""
        if self.deadline is None:
            return None
        filled = {p.name: p.default for p in self.params if not p.required}
        filled.update({k: v for k, v in args.items() if v is not None})
        return self.deadline(filled)


def ms_deadline(name: str = "timeout_ms") -> Callable[[dict[str, Any]], float | None]:
    """A deadline read from a millisecond argument (``timeout_ms``)."""

    def deadline(args: dict[str, Any]) -> float | None:
        value = args.get(name)
        return None if value is None else value / 1000

    return deadline


def s_deadline(name: str = "timeout_s", default_s: float | None = None) -> Callable[[dict[str, Any]], float | None]:
    """A deadline read from a seconds argument (a hook's ``timeout_s``), or ``default_s`` when it is absent."""

    def deadline(args: dict[str, Any]) -> float | None:
        value = args.get(name)
        return default_s if value is None else float(value)

    return deadline
