"""argparse as panio's commands use it: the parser class and a group's subcommands.

Only a command that builds a parser imports this module (``controller.cli.main``): the commands ``main``
parses without argparse (``controller.cli.commands.QUICK``) never do, and argparse with the ``re``, ``enum``,
``functools`` and ``collections`` it imports is most of their start-up.
"""

from __future__ import annotations

import argparse  # as it is, gettext and all: panio no longer patches it for the process (docs/architecture.md)
import os
import sys

from bench_agent.errors import UsageError


def UNBUILT(args) -> None:  # noqa: N802 - a marker, compared by identity
    """The handler of a subcommand that was listed but not built (``controller.cli.common.command``); never run."""
    raise AssertionError("an unbuilt subcommand ran")


class _ShowsBounds:
    """A help formatter's mixin: an option whose type carries its bounds (``common.number``, ``common.spec_type``:
    ``type.bounds``) shows them in its help, unless its help says them already. The bounds are said once, by the
    type that enforces them, and a numeric option's default beside them, from its own ``default=`` (a help text
    never restates it). A positional argument without help (`job status JOB`) is listed with its kind and
    bounds as its help ("a whole number (greater than 0)"): argparse lists such an argument with no text at all."""

    def _format_action(self, action: argparse.Action) -> str:
        bounds = getattr(action.type, "bounds", None)
        if bounds and not action.help and not action.option_strings:
            import copy

            action = copy.copy(action)
            action.help = f"{action.type.__name__} ({bounds})"
        return super()._format_action(action)  # type: ignore[misc]

    def _get_help_string(self, action: argparse.Action) -> str:
        text = super()._get_help_string(action)  # type: ignore[misc]
        bounds = getattr(action.type, "bounds", None)
        if not text or text == argparse.SUPPRESS or not (bounds or getattr(action.type, "spec", False)):
            return text
        default = action.default  # said once: the option's own (an operation's from its spec)
        if default is None:  # a config flag: what the runtime takes when the lab file leaves the field out
            default = getattr(action, "fallback", None)
        shown = [bounds if bounds and bounds not in text else "",
                 f"default {_number(default)}" if action.option_strings and default not in (None, argparse.SUPPRESS)
                 else ""]
        extra = ", ".join(x for x in shown if x)
        return f"{text} ({extra})" if extra else text


def _number(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


_FORMATTERS: dict[type, type] = {}


def _showing_bounds(formatter: type) -> type:
    if formatter not in _FORMATTERS:
        _FORMATTERS[formatter] = type(formatter.__name__, (_ShowsBounds, formatter), {})
    return _FORMATTERS[formatter]


class Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` instead of printing and exiting, and shows each option's bounds."""

    def _get_formatter(self):  # type: ignore[override]
        # argparse asks shutil for the width, importing shutil, bz2 and lzma: ~3 ms of start-up.
        try:
            width = os.get_terminal_size(sys.stdout.fileno()).columns - 2
        except (OSError, ValueError):
            width = 78
        return _showing_bounds(self.formatter_class)(prog=self.prog, width=max(40, min(width, 118)))

    def error(self, message: str) -> None:  # type: ignore[override]
        where = "" if self.prog == "panio" else f"{self.prog.removeprefix('panio ')}: "
        raise UsageError(f"{where}{message}", hint=self._did_you_mean(message) or f"see `{self.prog} --help`")

    def _did_you_mean(self, message: str) -> str | None:
        """For a subcommand typo (`serial wacth`) or a top-level command typed as two words (`power cycle`)."""
        import re

        m = re.search(r"invalid choice: '([^']*)'", message)
        subs = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        if not m or not subs:
            return None
        from controller.cli.groups import MOVED

        wrong = f"{self.prog} {m.group(1)}"
        if wrong in MOVED:
            return f"did you mean `{MOVED[wrong]}`? see `{self.prog} --help`"
        from bench_agent.nearmiss import closest

        close = closest(m.group(1), subs[0].choices)
        return f"did you mean `{self.prog} {close}`? see `{self.prog} --help`" if close else None


class Subcommands(argparse._SubParsersAction):
    """A group's subcommands, some of which may be listed without being built (see ``controller.cli.common.command``)."""

    def add_unbuilt(self, name: str, summary: str) -> None:
        """List ``name`` with its summary (in the group's help and its choices) without building a parser for
        it: a parser each, with its help action and argument groups, was a third of building `panio serial`'s
        sixteen subcommands for the one that runs."""
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), summary))
        self._name_parser_map[name] = _UNBUILT_PARSER


class _UnbuiltParser:
    """What stands for an unbuilt subcommand's parser: chosen, it parses nothing and sets ``func`` to ``UNBUILT``,
    which makes ``main`` parse again with every subcommand built."""

    def parse_known_args(self, args: list[str], namespace: argparse.Namespace | None = None):
        return argparse.Namespace(func=UNBUILT), []


_UNBUILT_PARSER = _UnbuiltParser()
