"""panio's entry point: lazy command dispatch and the one place errors become output.

Errors: every ``PanioError`` becomes one human line and one JSON object line
on stderr and its documented exit status; anything else is a bug, reported
the same way as ``internal`` (70), with the traceback only under
``PANIO_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys

from bench_agent.errors import InternalError, PanioError, UsageError
from controller.cli.commands import COMMANDS, SECTIONS



def version() -> str:
    """panio's version, from its installed metadata (pyproject.toml says it once)."""
    from importlib.metadata import PackageNotFoundError, version as installed

    try:
        return installed("panio")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"

INTRO = """\
panio drives hardware test benches: boards ("targets") wired to a control host
by serial consoles, video capture, keyboard/mouse rigs, smart plugs and netboot.
The lab file (lab.toml) says what is wired where; every other command reads it.

New here? Run `panio skill`: the mental model, a command map by goal, and the
traps to avoid. Every command has --help with an example."""

OUTRO = """\
Global options:
  --lab PATH   the lab file (else $PANIO_LAB, else ~/.config/panio/lab.toml)
  --version    print panio's version
  -h, --help   this help; `panio COMMAND --help` for one command

Errors print one human line and one JSON line on stderr; exit codes are in
docs/exit-status.md (not_configured 3, unreachable 4, timeout 22, ...).
See also: panio skill, panio skill --list, docs/ in the source tree."""


def top_help() -> str:
    lines = ["usage: panio [--lab PATH] COMMAND [ARGS...]", "", INTRO, ""]
    width = max(len(n) for n in COMMANDS) + 2
    for section, title in SECTIONS.items():
        names = [n for n, (_, s, _) in COMMANDS.items() if s == section]
        if not names:
            continue
        lines.append(f"{title}:")
        lines += [f"  {n.ljust(width)}{COMMANDS[n][2]}" for n in names]
        lines.append("")
    lines.append(OUTRO)
    return "\n".join(lines) + "\n"


def build_parser(only: str | None = None, full: bool = False, subcommand: str | None = None):
    """The argument parser; with ``full`` every command is populated (for the drift guard).

    With ``only`` just that command is; with ``subcommand`` too, the command's other subcommands are listed
    (their names and summaries) but not built (``controller.cli.common.command``): adding a group's every
    argument cost `panio serial log` more than reading the log."""
    from controller.cli.parsing import Parser, argparse

    parser = Parser(prog="panio", add_help=False)
    parser.add_argument("--lab", metavar="PATH")
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("--version", action="store_true")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, (module, _, summary) in COMMANDS.items():
        if full or name == only:
            p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
            p.panio_subcommand = subcommand  # read by controller.cli.common.subcommands
            __import__(module)  # not importlib.import_module: importlib's package is one more start-up import
            sys.modules[module].register(p, name)
    return parser


def _parse(name: str, argv: list[str]):
    """Parse ``argv`` with only ``name``'s parser and, of its subcommands, only the one ``argv`` names. Should
    that guess be wrong (an unbuilt subcommand chosen, or any error), parse again with the whole group built,
    so what runs and what an error says never depend on the shortcut."""
    from controller.cli.parsing import UNBUILT

    guess = _find_command(argv[argv.index(name) + 1:])
    if guess is not None:
        try:
            args, extra = build_parser(only=name, subcommand=guess).parse_known_args(argv)
            if getattr(args, "func", None) is not UNBUILT:
                return args, extra
        except UsageError:
            pass
    return build_parser(only=name).parse_known_args(argv)


class _Arguments:
    """The parsed arguments of a command ``_quick_parse`` took: what ``argparse.Namespace`` would hold."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)


def _quick_parse(name: str, argv: list[str]) -> tuple[_Arguments, list[str]] | None:
    """``argv`` parsed without argparse when it is one of ``commands.QUICK``'s reading commands on a plain
    line; None for anything else (argparse parses it, and says what is wrong)."""
    from controller.cli.commands import QUICK

    lab, rest = None, argv
    if argv[:1] == ["--lab"] and len(argv) > 2:
        lab, rest = argv[1], argv[2:]
    elif argv[0].startswith("--lab="):
        lab, rest = argv[0].removeprefix("--lab="), argv[1:]
    if lab is not None and (not lab or lab.startswith("-")):
        return None
    quick = QUICK.get((rest[0], rest[1])) if len(rest) >= 2 and rest[0] == name else None
    if quick is None:
        return None
    flags, options, spec = _quick_words(quick)
    values = {dest: default for dest, _, default in flags.values()}
    values.update(dict.fromkeys(options.values()))
    given: dict[str, str] = {}
    positionals: list[str] = []
    words = iter(rest[2:])
    for word in words:
        if not word.startswith("-"):
            positionals.append(word)
        elif word in flags:
            dest, value, _ = flags[word]
            values[dest] = value
        else:
            option, eq, text = word.partition("=") if word.startswith("--") else (word, "", "")
            dest = options.get(option)
            if dest is None or dest in given:
                return None
            if not eq:
                text = next(words, "-")
                if text.startswith("-"):
                    return None
            given[dest] = text
    wanted = quick.get("positionals", ())
    if len(positionals) != len(wanted):
        return None
    values.update(zip(wanted, positionals))
    values.update(given)
    if spec is not None and not _quick_values(spec, values, given):
        return None
    module, handler = quick["handler"].split(":")
    __import__(module)
    return _Arguments(lab=lab, help=False, version=False, command=name, subcommand=rest[1],
                      func=getattr(sys.modules[module], handler), **values), []


def _quick_words(quick: dict) -> tuple[dict[str, tuple[str, bool, bool]], dict[str, str], object]:
    """A ``commands.QUICK`` entry's words: flag -> (dest, its value when given, its default), option taking a
    value -> dest, and its operation's spec (None without one), whose parameters add flags and options as
    ``common.add_param`` makes them."""
    flags = {flag: (flag[2:].replace("-", "_"), True, False) for flag in quick.get("flags", ())}
    options = dict(quick.get("options", {}))
    spec = None
    if "op" in quick:
        from bench_agent import ops

        spec = ops.spec(quick["op"])
        for param in spec.params:
            if param.kind is bool:
                flag = param.cli_flag.replace("--", "--no-", 1) if param.default else param.cli_flag
                flags[flag] = (param.name, not param.default, param.default)
            else:
                options[param.cli_flag] = param.name
    return flags, options, spec


def _quick_values(spec, values: dict, given: dict[str, str]) -> bool:
    """The values of the operation's parameters in ``values`` as argparse gives them: a given one typed and
    checked by the spec (``common.spec_type``), else its default; False for a bad value or a conflict of
    options of which only one may be given (argparse reports them)."""
    from controller.cli.common import param_kind

    if len(given.keys() & set(spec.exclusive or ())) > 1:
        return False
    for param in spec.params:
        if param.kind is bool:
            continue
        if param.name not in given:
            values[param.name] = param.default
            continue
        try:
            values[param.name] = param.check(param_kind(param)[0](given[param.name]))
        except Exception:  # noqa: BLE001 - argparse parses it again and reports it
            return False
    return True


def shown_extra(extra: list[str]) -> str:
    """The words argparse did not recognise, as an error may show them: an option's name but not its value (a
    token typed after a misspelt `--tokn`, or as `--tokn=...`, must not reach a terminal or a CI log), a stray
    word itself (cut at 40 characters)."""
    shown, hidden, after_option = [], 0, False
    for word in extra:
        if word.startswith("-") and len(word) > 1:
            name, eq, _value = word.partition("=")
            shown.append(f"{name}=..." if eq else name)
            hidden += bool(eq)
            after_option = not eq
        elif after_option:
            hidden += 1
            after_option = False
        else:
            shown.append(word if len(word) <= 40 else word[:40] + "...")
    return " ".join(shown) + (f" (and {hidden} value{'s' if hidden > 1 else ''} not shown)" if hidden else "")


def _find_command(argv: list[str]) -> str | None:
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token == "--lab":
            skip = True
        elif token.startswith("-"):
            continue
        else:
            return token
    return None


def run(argv: list[str]) -> int:
    _refuse_undecodable(argv)
    name = _find_command(argv)
    if name is None:
        if "--version" in argv:
            sys.stdout.write(f"panio {version()}\n")
            return 0
        sys.stdout.write(top_help())
        return 0
    if name not in COMMANDS:
        from controller.cli.commands import near_command

        near = near_command(name)
        hint = f"did you mean `panio {near}`? " if near else ""
        raise UsageError(f"unknown command {name!r}", hint=f"{hint}see `panio --help` and `panio skill`", command=name)
    try:
        args, extra = _quick_parse(name, argv) or _parse(name, argv)
        if extra:
            where = " ".join(["panio", name] + ([args.subcommand] if getattr(args, "subcommand", None) else []))
            raise UsageError(f"{where}: unrecognized arguments: {shown_extra(extra)}", hint=f"see `{where} --help`")
    except UsageError as err:
        if "TARGET" in err.message or "-t" in err.message.split():
            err.hint = _positional_hint(argv) or err.hint
        elif "required: -t/--target" in err.message:  # `panio serial add console pico`: the runtime habit
            err.hint = f"config commands name the target with -t TARGET; see `panio {err.message.split(':')[0]} --help`"
        raise
    if os.environ.get("PANIO_LEASE_TOKEN"):
        _job_step_guard(name, getattr(args, "subcommand", None), argv)
    from controller.paths import resolve_lab_path

    args.lab_path, args.lab_source = resolve_lab_path(args.lab)
    try:
        status = args.func(args)
    except PanioError as err:
        err.hint = _target_first_hint(err, argv, name, getattr(args, "subcommand", None)) or err.hint
        if args.lab_source in ("PANIO_LAB", "--lab") and err.message == f"no lab file at {args.lab_path}":
            # a mistyped path: `panio init` would make an empty lab there, so the fix of the path comes first
            err.message += f" (the path came from {'$PANIO_LAB' if args.lab_source == 'PANIO_LAB' else '--lab'})"
            err.hint = ("check $PANIO_LAB (`panio-sim status --lab` prints a simulated bench's), or unset it for the "
                        "default lab; `panio init` creates a new, empty lab file at that path"
                        if args.lab_source == "PANIO_LAB" else
                        "check the path given to --lab; `panio init` creates a new, empty lab file at that path")
            err.details["source"] = args.lab_source
        elif args.lab_source == "default" and "target" in err.details and (err.hint or "").startswith("add it with"):
            # a new shell without the simulator's `export PANIO_LAB=...` reads the default lab, not the bench's
            err.hint += "; or, if it is in another lab file than this default one, give --lab PATH or set $PANIO_LAB"
        raise
    return 0 if status is None else int(status)


def _refuse_undecodable(argv: list[str]) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates (``\\udcff``), which no file, socket or message can
    carry: refused here, where the argument is still known, not as a crash where it is first encoded."""
    for i, arg in enumerate(argv, 1):
        try:
            arg.encode()
        except UnicodeEncodeError:
            raise UsageError(f"argument {i} is not UTF-8 text: {arg!r}", hint="panio takes its arguments as UTF-8",
                             argument=i) from None


def _target_first_hint(err: PanioError, argv: list[str], name: str, subcommand: str | None) -> str | None:
    """An unknown target while a later word is a known one: the arguments came in the wrong order
    (`panio serial send "uname -a" pico`). The hint names only the known target, never the other input."""
    known, wrong = err.details.get("known"), err.details.get("target")
    if not known or wrong is None or wrong in known:
        return None
    words = [name] + ([subcommand] if subcommand else [])
    found = next((a for a in argv if a in known and a not in words), None)
    if found is None:
        return None
    return f"'{found}' is a target: runtime commands take the target first (`panio {' '.join(words)} {found} ...`)"


RUNTIME_TOP = ("power-cycle", "power-state", "ping")  # runtime commands that are not in a group


def _positional_hint(argv: list[str]) -> str | None:
    """`-t TARGET` on a runtime command: setup commands take -t, runtime commands take the target first."""
    for i, token in enumerate(argv):
        if token in ("-t", "--target") or token.startswith("--target="):
            value = token.split("=", 1)[1] if "=" in token else (argv[i + 1] if i + 1 < len(argv) else "TARGET")
            rest = argv[:i] + argv[i + (1 if "=" in token else 2):]
            words = 1 if rest and rest[0] in RUNTIME_TOP else 2
            fixed = " ".join(["panio", *rest[:words], value, *rest[words:]])
            return f"the target is positional on runtime commands, with no -t: `{fixed}`"
    return None
def _job_step_guard(name: str, subcommand: str | None, argv: list[str]) -> None:
    """A process holding a job's lease token is a job step: runtime commands only, on the job's own lab.

    ``job check`` refuses the rest before anything is queued; this refuses them again at run time, so a
    payload put on the broker by hand cannot edit the lab or configure a hook either.
    """
    from bench_agent.errors import Refused
    from controller.cli.commands import refuse_in_job

    why = refuse_in_job(name, subcommand)
    if why is None and sum(a == "--lab" or a.startswith("--lab=") for a in argv) > 1:
        why = "a job step runs against its job's lab: drop --lab"
    if why:
        raise Refused(why, command=name, subcommand=subcommand)


def report(err: PanioError) -> int:
    import json

    from controller.cli.common import captured, emit

    capture = captured()
    if capture is not None:
        if hasattr(capture, "error"):  # the MCP server's: it keeps the error as an object too
            capture.error(err)
        else:
            emit("stderr", err.human() + "\n" + json.dumps(err.to_json(), sort_keys=False) + "\n")
        return err.exit_status
    sys.stdout.flush()
    sys.stderr.write(err.human() + "\n")
    sys.stderr.write(json.dumps(err.to_json(), sort_keys=False) + "\n")
    sys.stderr.flush()
    return err.exit_status


def _terminated(signum: int, frame: object) -> None:
    # Unwind like Ctrl-C does, so `finally` blocks stop what this command started (hooks, steps).
    if _starting_a_child(signum):
        return
    raise SystemExit(128 + signum)


def _interrupted(signum: int, frame: object) -> None:
    if _starting_a_child(signum):
        return
    raise KeyboardInterrupt


def _starting_a_child(signum: int) -> bool:
    """Whether the signal waits: a child is half started (forked, not yet stoppable), see bench_agent.process."""
    process = sys.modules.get("bench_agent.process")  # not imported yet: no child, and --help stays light
    return process is not None and process.defer_signal(signum)


def main(argv: list[str] | None = None) -> int:
    # The C module, not `signal`: that one imports enum, collections and functools, a third of `--help`.
    import _signal

    argv = sys.argv[1:] if argv is None else argv
    _signal.signal(_signal.SIGTERM, _terminated)
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:  # not where Ctrl-C is ignored (nohup, &)
        _signal.signal(_signal.SIGINT, _interrupted)
    return run_reported(argv)


def run_captured(argv: list[str], out: object) -> int:
    """Run ``panio *argv`` in this process as ``panio`` would, its text (stdout, stderr, the error lines) to
    the ``Output`` ``out`` instead of this process's streams; the exit status. The MCP server runs its tool
    calls through this (``controller.mcp.runner``), so a tool's text is the CLI's."""
    from controller.cli.common import capturing

    with capturing(out):
        return run_reported(argv)


def run_reported(argv: list[str]) -> int:
    """``run`` with every failure reported as the CLI reports it (one human line, one JSON line on stderr)
    and turned into its exit status: what ``panio`` does, and what the MCP server runs in-process for each
    tool call, its text captured (``common.capturing``)."""
    try:
        return run(argv)
    except PanioError as err:
        return report(err)
    except KeyboardInterrupt:
        sys.stderr.write("panio: interrupted\n")
        return 130
    except BrokenPipeError as exc:
        from controller.cli.common import captured

        if captured() is not None:  # a capture has no reader to lose: the pipe was something else's
            return report(InternalError(f"internal error: BrokenPipeError: {exc}",
                                        hint="this is a bug in panio; rerun with PANIO_DEBUG=1 for the traceback"))
        # stdout closed early (e.g. `panio serial log pico | head`): not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place a bug becomes a report
        from bench_agent.errors import no_space

        full = no_space(exc)  # state written anywhere (a lease, a log, the results database) on a full disk
        if full is not None:
            return report(full)
        from bench_agent import outage

        away = outage.service_down(exc)  # the results database or Redis away: the lab's fault (4), not a bug
        if away is not None:
            from bench_agent.errors import Unreachable

            return report(Unreachable(f"{away} unreachable: {outage.first_line(exc)}",
                                      hint="check PANIO_RESULTS_URL" if away == outage.DB else "check PANIO_BROKER"))
        if os.environ.get("PANIO_DEBUG"):
            import traceback

            traceback.print_exc()
        return report(InternalError(f"internal error: {type(exc).__name__}: {exc}",
                                    hint="this is a bug in panio; rerun with PANIO_DEBUG=1 for the traceback"))


if __name__ == "__main__":
    sys.exit(main())
