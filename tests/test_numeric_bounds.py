"""Every numeric option and positional argument of every command says its bounds in `--help`, and the bounds it
says are the ones it enforces (issue 41 item 3): the type that checks a value carries its bounds (``common.number``, ``spec_type``:
the operation's spec, ``add_field``: the lab schema's field), and the help shows them from there."""

from __future__ import annotations

import argparse
import re

import pytest

NUMERIC = ("a whole number", "a number")
HUGE = 1 << 53


def _commands():
    from controller.cli.main import build_parser

    todo = [("", build_parser(full=True))]
    while todo:
        name, parser = todo.pop()
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [(f"{name} {word}".strip(), p) for word, p in action.choices.items()]


def _numeric_options():
    for name, parser in _commands():
        for action in parser._actions:
            if action.type in (int, float) or getattr(action.type, "__name__", None) in NUMERIC:
                yield name, parser, action


OPTIONS = list(_numeric_options())


def _flags(action) -> list[str]:
    """How the help lists an argument: its option strings, or a positional's metavar (else its dest)."""
    return action.option_strings or [action.metavar or action.dest]


def test_there_are_numeric_options_to_check():
    assert len(OPTIONS) > 40
    positionals = {c for c, _, a in OPTIONS if not a.option_strings}
    assert {"job status", "job cancel", "job triage", "bisect resume"} <= positionals


@pytest.mark.parametrize("command, parser, action", OPTIONS,
                         ids=[f"{c} {_flags(a)[-1]}" for c, _, a in OPTIONS])
def test_the_help_shows_the_bounds_the_option_enforces(command, parser, action):
    convert = action.type
    assert hasattr(convert, "bounds"), f"panio {command} {_flags(action)[-1]}: a number with no bounds"
    entry = " ".join(_entry(parser.format_help(), _flags(action)).split())
    shown = re.search(r"\((?:[^()]*?, )?((?:from|at least|at most|greater than) [^,()]+)", entry)
    assert shown and convert.bounds in entry, (command, entry)
    lo, hi = _numbers(shown.group(1))
    assert (lo, hi) == (_shown(convert.minimum), _shown(convert.maximum)), (command, shown.group(1))
    step = 1 if convert.__name__ == "a whole number" else 0.001
    if convert.minimum is not None:
        edge = convert.minimum
        _passes(convert, edge + step if convert.above else edge)
        _refused(convert, edge if convert.above else edge - step)
    if convert.maximum is not None and convert.maximum < HUGE:
        _passes(convert, convert.maximum)
        _refused(convert, convert.maximum + step)


DEFAULTED = [(c, p, a) for c, p, a in OPTIONS if a.option_strings and a.default not in (None, argparse.SUPPRESS)]


@pytest.mark.parametrize("command, parser, action", DEFAULTED,
                         ids=[f"{c} {_flags(a)[-1]}" for c, _, a in DEFAULTED])
def test_a_numeric_default_is_shown_from_the_option_and_never_restated(command, parser, action):
    """The help shows the default the option really has (its ``default=``), beside its bounds; a help text that
    says a default of its own could drift from it (issue 41: "--context ... (default 3)" was written twice)."""
    own = action.help or ""
    assert "default" not in own, f"panio {command} {_flags(action)[-1]}: the help restates its default: {own!r}"
    entry = " ".join(_entry(parser.format_help(), _flags(action)).split())
    shown = action.default
    shown = int(shown) if isinstance(shown, float) and shown.is_integer() else shown
    assert f"default {shown})" in entry, (command, entry)


def test_numeric_options_with_defaults_exist():
    assert {"--context", "--runs", "--limit", "--count", "--history", "--baud"} <= {
        f for _, _, a in DEFAULTED for f in a.option_strings}


def _entry(text: str, flags: list[str]) -> str:
    """The argument's own entry under its heading (not the usage line), up to the next argument or heading."""
    start = min(i for i in (text.find("\n  " + f) for f in flags) if i >= 0)
    rest = text[start + 3:]
    end = re.search(r"\n(?:\n|  \S)", rest)
    return rest[:end.start()] if end else rest


def _numbers(words: str) -> tuple[float | None, float | None]:
    words = words.removesuffix(" ms").removesuffix(" bytes").removesuffix(" s")
    if m := re.fullmatch(r"(?:from|greater than) (\S+) (?:to|and at most) (\S+)", words):
        return float(m.group(1)), float(m.group(2))
    if m := re.fullmatch(r"(?:at least|greater than) (\S+)", words):
        return float(m.group(1)), None
    m = re.fullmatch(r"at most (\S+)", words)
    assert m, words
    return None, float(m.group(1))


def _shown(bound):
    return None if bound is None or bound >= HUGE else float(bound)


def _passes(convert, value) -> None:
    convert(str(value))


def _refused(convert, value) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        convert(str(value))


@pytest.mark.parametrize("words, flag, table, key", [
    (("power", "set"), "--timeout-s", "POWER", "timeout_s"), (("power", "set"), "--cycle-off-s", "POWER", "cycle_off_s"),
    (("action", "add"), "--timeout-s", "ACTION", "timeout_s"), (("netboot", "set"), "--tftp-port", "NETBOOT", "tftp_port"),
])
def test_a_config_flag_has_the_bounds_of_its_lab_field(words, flag, table, key):
    """The flag and the lab file refuse the same values: the flag's bounds are read from the field's check."""
    from controller.lab import schema

    parser = dict(_commands())[" ".join(words)]
    convert = next(a for a in parser._actions if flag in a.option_strings).type
    check = getattr(schema, table).fields[key].check
    assert convert.maximum == (schema.MAX_SECONDS if check is schema._positive_number else check.maximum)
    _refused(convert, convert.maximum + 1)
