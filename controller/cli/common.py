"""What every command module shares: help layout, output, lab access (the parser class: ``controller.cli.parsing``).

Each command group lives in its own module with a ``register(parser)``
function; ``main`` imports only the module of the command being run, so a
command pays only for its own imports.
"""

from __future__ import annotations

import sys
from _contextvars import ContextVar  # the C module: `contextvars` is only its re-export

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable

from bench_agent.errors import InvalidName, UsageError

MAX_NUMBER = 2**63 - 1  # what TOML, SQLite and JSON consumers all hold


def __getattr__(name: str) -> Any:
    """``argparse``, ``Parser`` and ``Subcommands`` live in ``controller.cli.parsing``, imported on first use:
    a command ``main`` runs without a parser (``controller.cli.commands.QUICK``) imports this module but not
    argparse."""
    if name in ("argparse", "Parser", "Subcommands"):
        from controller.cli import parsing

        return getattr(parsing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def subcommands(parser: argparse.ArgumentParser, title: str = "commands") -> argparse._SubParsersAction:
    from controller.cli.groups import epilog
    from controller.cli.parsing import Parser, Subcommands, argparse

    sub = parser.add_subparsers(title=title, dest="subcommand", metavar="COMMAND", parser_class=Parser,
                                action=Subcommands)
    sub.panio_only = getattr(parser, "panio_subcommand", None)  # see controller.cli.main.build_parser
    parser.set_defaults(func=_group_help(parser))
    if parser.epilog is None:
        parser.epilog = epilog(parser.prog.split()[-1])
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return sub


def _group_help(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def show(args: argparse.Namespace) -> int:
        parser.print_help()
        return 0

    return show


def command(
    sub: argparse._SubParsersAction,
    name: str,
    summary: str,
    *,
    example: str | list[str],
    see_also: str,
    func: Callable[[argparse.Namespace], int | None] | None = None,
    details: str = "",
) -> argparse.ArgumentParser:
    """Add one command whose --help has the summary, the arguments, an example and a see-also.

    When this process runs another subcommand of the group (``build_parser(subcommand=...)``), the command is
    listed with its summary only and an ``Unbuilt`` stands in for its parser: what the group's module adds to
    it is dropped, and choosing it anyway makes ``main`` parse again with everything built."""
    from controller.cli.parsing import argparse

    only = getattr(sub, "panio_only", None)
    if only is not None and only != name:
        sub.add_unbuilt(name, summary)
        return Unbuilt()  # type: ignore[return-value]
    examples = [example] if isinstance(example, str) else example
    epilog = "example:\n" + "\n".join(f"  {e}" for e in examples) + f"\n\nsee also: {see_also}"
    description = summary[0].upper() + summary[1:] + "." + (f"\n\n{details}" if details else "")
    p = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if func is not None:
        p.set_defaults(func=func)
    return p


def add_target_option(p: argparse.ArgumentParser) -> None:
    """Channel (config) commands name the target with -t/--target."""
    p.add_argument("-t", "--target", required=True, metavar="TARGET", help="the target to configure")


def add_target_positional(p: argparse.ArgumentParser) -> None:
    """Runtime commands take the target as the first positional argument."""
    p.add_argument("target", metavar="TARGET", help="the target (see `panio target list`)")


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")


def check_name(kind: str, name: str) -> str:
    from controller.lab.schema import NAME_RE, NAME_RULE

    if not NAME_RE.match(name):
        raise InvalidName(f"{name!r} is not a valid {kind} name: use {NAME_RULE}", kind=kind, name=name)
    return name


def number(convert: Callable[[str], Any], minimum: float | None = None, maximum: float = MAX_NUMBER, *,
           above: bool = False) -> Callable[[str], Any]:
    """An argparse type for a number (``convert``: int or float) within its bounds, said once: the function
    carries them (``minimum``, ``maximum``, ``above``: the minimum itself is refused, as for "greater than 0") and
    their words (``bounds``), which every ``--help`` shows beside the option (``parsing.Parser``) and which the
    refusal says (`tests/test_numeric_bounds.py` holds the two equal for every numeric option of every command)."""
    noun = "a whole number" if convert is int else "a number"
    words = _bounds_words(minimum, maximum, above)

    def parse(text: str):
        from controller.cli.parsing import argparse

        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{text} is too large (at most {maximum})" if maximum >= MAX_NUMBER
                                             else f"{text} must be {words}")
        if minimum is not None and (value < minimum or (above and value == minimum)):
            raise argparse.ArgumentTypeError(f"{text} must be {words}")
        return value

    parse.__name__ = noun  # argparse names the type in its messages
    parse.kind = convert.__name__  # type: ignore[attr-defined]  # a whole ${var} in a job step is refused here (jobs/spec.py)
    parse.minimum, parse.maximum, parse.above, parse.bounds = minimum, maximum, above, words  # type: ignore[attr-defined]
    return parse


def _bounds_words(minimum: float | None, maximum: float, above: bool) -> str:
    def n(value: float) -> str:
        return str(int(value)) if float(value).is_integer() else str(value)

    if maximum >= MAX_NUMBER:  # what every store holds: no bound a reader needs to see
        return ("greater than " if above else "at least ") + n(minimum or 0)
    if minimum is None:
        return f"at most {n(maximum)}"
    if above:  # the lab schema's words for seconds (``_positive_number``)
        return f"greater than {n(minimum)} and at most {n(maximum)}"
    return f"from {n(minimum)} to {n(maximum)}"


positive_int = number(int, 0, above=True)
positive_float = number(float, 0, above=True)
non_negative_float = number(float, 0)


def add_field(p: argparse.ArgumentParser, spec: Any, key: str, *flags: str, **kw: Any) -> argparse.Action:
    """Add a config command's flag for the numeric lab field ``key`` of table ``spec`` (a ``controller.lab.schema``
    TableSpec): its bounds come from the field's own check (a whole number from 1 to its ceiling, or seconds
    greater than 0 up to ``MAX_SECONDS``), are checked as the flag is parsed and are shown in its help, so the
    command, the lab file and ``--help`` say one thing. ``spec`` may be the table's name in the schema ("POWER"):
    the schema is imported only for a command that is built (not for an ``Unbuilt`` sibling of the one that runs).

    ``fallback``: "module:NAME", the value the runtime takes when the lab file leaves the field out (the flag's own
    default is None: leaving it out changes nothing); the help shows it from there, so it is said once."""
    if isinstance(p, Unbuilt):
        return p  # type: ignore[return-value]
    from controller.lab import schema

    check = (getattr(schema, spec) if isinstance(spec, str) else spec).fields[key].check
    if check is schema._positive_number:
        parse = number(float, 0, schema.MAX_SECONDS, above=True)
    else:
        parse = number(int, 1, check.maximum)
    fallback = kw.pop("fallback", None)
    action = p.add_argument(*(flags or (f"--{key.replace('_', '-')}",)), type=parse, help=kw.pop("help", key), **kw)
    if fallback:
        import importlib

        module, _, name = fallback.partition(":")
        action.fallback = getattr(importlib.import_module(module), name)  # type: ignore[attr-defined]
    return action


def param_kind(param: Any) -> tuple[Callable[[str], Any], str]:
    """How a parameter's text becomes its kind (``int``, ``float``, else the text), and the kind's name."""
    return {int: (int, "a whole number"), float: (float, "a number")}.get(param.kind, (str, "text"))


def spec_type(op: str, name: str) -> Callable[[str], Any]:
    """An argparse type for parameter ``name`` of operation ``op``: its kind, bounds and choices, from the spec."""
    from bench_agent import ops

    param = ops.spec(op).param(name)
    assert param is not None, f"{op} has no parameter {name}"
    convert, noun = param_kind(param)

    def parse(text: str):
        from controller.cli.parsing import argparse

        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        try:
            return param.check(value)
        except UsageError as err:
            raise argparse.ArgumentTypeError(err.message.removeprefix(param.name + " ")) from None

    parse.__name__ = noun  # argparse names the type in its messages
    parse.kind = convert.__name__  # type: ignore[attr-defined]  # its kind in a job step: the spec types a ${var} (steps.bind)
    parse.spec = True  # type: ignore[attr-defined]  # its help shows its default (parsing.Parser), as its bounds
    if param.minimum is not None or param.maximum is not None:  # shown by add_param with the unit and default
        parse.minimum, parse.maximum, parse.above = param.minimum, param.maximum, False  # type: ignore[attr-defined]
        parse.bounds = param.bounds_text()  # type: ignore[attr-defined]
    return parse


def add_param(p: argparse.ArgumentParser, op: str, name: str, *flags: str, **kw: Any) -> argparse.Action:
    """Add the flag for parameter ``name`` of ``op``: type, bounds, default and help derived from its spec.

    ``flags`` default to ``--<name with dashes>``; ``kw`` adds what the spec does not
    say (``metavar``, ``required`` for a positional-like flag, a different ``dest``).
    """
    from bench_agent import ops

    param = ops.spec(op).param(name)
    assert param is not None, f"{op} has no parameter {name}"
    if param.kind is bool:  # a flag turns the spec's default over: --force (default off), --no-probe (on)
        flags = flags or (param.cli_flag.replace("--", "--no-", 1) if param.default else param.cli_flag,)
        return p.add_argument(*flags, dest=kw.pop("dest", name), action="store_false" if param.default else
                              "store_true", help=kw.pop("help", param.help), **kw)
    flags = flags or (param.cli_flag,)
    kw.setdefault("type", spec_type(op, name))
    if param.required:
        kw.setdefault("required", True)
    else:
        kw.setdefault("default", param.default)
    kw.setdefault("help", param.help)  # the help shows the bounds and default from the type (parsing.Parser)
    return p.add_argument(*flags, dest=kw.pop("dest", name), **kw)


def load_lab(args: argparse.Namespace):
    """The command's lab, which becomes this process's lab: what it does on this machine outside the
    dispatcher (a TFTP root, a lease) is that lab's (``bench_agent.paths.set_process_lab``)."""
    from bench_agent.paths import set_process_lab
    from controller.lab import load

    lab = load(args.lab_path)
    set_process_lab(lab.key)
    return lab


def lab_if_any(args: argparse.Namespace):
    """``load_lab``, or None when there is no lab file (a host-wide command: the state of no lab)."""
    from bench_agent.errors import NotConfigured

    try:
        return load_lab(args)
    except NotConfigured:
        return None


# Where a command's text goes when panio runs it inside a longer-lived process (the MCP server): an
# ``Output`` (``bench_agent.commands``) per call, in the call's context; None: this process's stdout/stderr.
_CAPTURE: ContextVar = ContextVar("panio_cli_capture", default=None)


class capturing:  # noqa: N801 - used as a function (`with capturing(out):`); a class spares importing contextlib
    """Send what the commands run in this context print (stdout, stderr, the error lines) to ``out``."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def __enter__(self) -> Any:
        self.token = _CAPTURE.set(self.out)
        return self.out

    def __exit__(self, *exc: object) -> None:
        _CAPTURE.reset(self.token)


def captured() -> Any:
    """The ``Output`` set by ``capturing`` in this context, else None."""
    return _CAPTURE.get()


def emit(stream: str, text: str) -> None:
    """Write ``text`` to ``stream`` ("stdout" or "stderr"): the terminal, or the capture of this context."""
    out = _CAPTURE.get()
    if out is not None:
        out.write(stream, text)
    else:
        (sys.stdout if stream == "stdout" else sys.stderr).write(text)


def print_json(obj: Any) -> None:
    import json

    emit("stdout", json.dumps(obj, indent=2, sort_keys=False) + "\n")


def counted(n: int, noun: str) -> str:
    """``1 job``, ``2 jobs``: a count with its noun in the right number (nouns that take an -s)."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def say(text: str) -> None:
    emit("stdout", text + "\n")


def static(handler: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], Any]:
    """Mark a runtime command whose output depends only on the lab file (``target show``, ``config show``):
    a job step prints what it printed when the job was queued (``job check`` runs it then)."""
    handler.static = True  # type: ignore[attr-defined]
    return handler


class Unbuilt:
    """Takes whatever a command module does to a subcommand's parser (add_argument, groups, defaults) and
    does nothing: the parser of a subcommand this process will not run."""

    def __getattr__(self, name: str) -> Callable[..., Unbuilt]:
        return self._ignore

    def _ignore(self, *args: Any, **kwargs: Any) -> Unbuilt:
        return self
