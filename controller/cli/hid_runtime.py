"""panio hid send|serve|stop: keyboard and mouse input through a target's HID rig, at run time."""

from __future__ import annotations

import argparse

from controller.cli.common import add_json, add_target_positional, command, load_lab, print_json, say

DETAILS = """\
COMMAND is one of:
  key NAME[+NAME...]        ENTER, ESC, TAB, F1..F12, UP, a, 1, ctrl+alt+del, shift+TAB
  type TEXT...              printable ASCII (US layout), one paced key at a time
  moveabs X Y               absolute pointer in 0..32767 logical units (not pixels):
                            0 0 = top left, 16384 16384 = centre, 32767 32767 = bottom right
  click [left|right|middle] at the pointer (default left)
  scroll N                  wheel notches, negative = down
Put --json and --pace-ms before COMMAND (after `type` a bare --json is refused; quote text).
Look, act, settle, verify: see `panio skill kvm-puppeting`."""


def register(sub: argparse._SubParsersAction) -> None:
    from bench_agent import ops

    pace = ops.spec("hid.send").param("pace_ms")
    c = command(sub, "send", "send keyboard or mouse input through the target's HID rig", func=send,
                example=["panio hid send pico key F2", "panio hid send pico type 'root'",
                         "panio hid send pico moveabs 16384 8192 && panio hid send pico click"],
                see_also="panio video shot, panio skill kvm-puppeting, docs/hid.md", details=DETAILS)
    add_target_positional(c)
    c.add_argument("words", nargs=argparse.REMAINDER, metavar="COMMAND", help="the HID command (see below)")
    c.add_argument("--pace-ms", type=int, default=pace.default, metavar="MS",
                   help=f"pause between a key's press and release and after it ({pace.bounds_text()}, "
                        f"default {pace.default})")
    add_json(c)
    c = command(sub, "serve", "start the daemon that holds the target's HID rig (sends then go through it)",
                func=serve, example=["panio hid serve pico", "panio hid serve pico --json"],
                see_also="panio hid send, panio hid stop, panio daemons, docs/hid.md",
                details="Optional: without it each `hid send` opens the rig itself. With it the rig is held\n"
                        "(exclusive, like a serial port) and listed by `panio daemons` as hid-TARGET.")
    add_target_positional(c)
    add_json(c)
    c = command(sub, "stop", "stop the HID daemon of a target", func=stop, example="panio hid stop pico",
                see_also="panio hid serve, panio daemons stop")
    add_target_positional(c)
    add_json(c)


def _daemon_call(args: argparse.Namespace, op: str, with_table: bool):
    from controller import dispatch

    lab = load_lab(args)
    table = lab.channel(args.target, "hid")
    extra = {"hid": table} if with_table else {}
    return dispatch.call(lab, args.target, op, {"target": args.target, **extra})


def serve(args: argparse.Namespace) -> None:
    r = _daemon_call(args, "hid.serve", True)
    if args.json:
        print_json(r)
        return
    for pid in r["reaped"]:
        say(f"reaped an untracked HID daemon of {args.target} (pid {pid})")
    say(f"HID rig of {args.target}: {'already held' if r['already_running'] else 'held'} by pid {r['pid']} "
        f"({r['device']})")


def stop(args: argparse.Namespace) -> None:
    r = _daemon_call(args, "hid.stop", False)
    if args.json:
        print_json(r)
    else:
        say(f"stopped the HID daemon of {args.target} (pid {', '.join(map(str, r['pids']))})")


def status_line(lab, target: str) -> dict:
    from controller import dispatch

    return dispatch.call(lab, target, "hid.status", {"target": target})


def _leading_options(args: argparse.Namespace, words: list[str]) -> list[str]:
    """Options between TARGET and the command (argparse hands them over as command words)."""
    from bench_agent.errors import UsageError

    while words and words[0] in ("--json", "--pace-ms"):
        if words.pop(0) == "--json":
            args.json = True
            continue
        try:
            args.pace_ms = int(words.pop(0))
        except (IndexError, ValueError):
            raise UsageError("--pace-ms takes a whole number of milliseconds", hint="see `panio hid send --help`") \
                from None
    return words


def _trailing_options(args: argparse.Namespace, words: list[str]) -> list[str]:
    """Options after the command (`key ENTER --json`), which argparse hands over as command words.

    After key, moveabs, click and scroll a word can never be an option. After `type` the words are
    text, so a word that is exactly an option is refused rather than typed into the target.
    """
    from bench_agent.errors import UsageError

    if words and words[0].lower() == "type":
        stray = [w for w in words[1:] if w in ("--json", "--pace-ms")]
        if stray:
            raise UsageError(f"{stray[0]} after `type` would be typed into the target",
                             hint="put options before the command (`panio hid send T --json type TEXT`), "
                                  "or quote the text to type it: type 'ls --json'")
        return words
    for i, word in enumerate(words):
        if word in ("--json", "--pace-ms"):
            return words[:i] + _leading_options(args, words[i:])  # anything left makes a bad command
    return words


def send(args: argparse.Namespace) -> None:
    from bench_agent.errors import UsageError
    from controller import dispatch

    words = _trailing_options(args, _leading_options(args, list(args.words)))
    if not words:
        raise UsageError("give a HID command: key NAME | type TEXT | moveabs X Y | click [BUTTON] | scroll N",
                         hint="see `panio hid send --help`")
    lab = load_lab(args)
    table = lab.channel(args.target, "hid")
    r = dispatch.call(lab, args.target, "hid.send", {"target": args.target, "hid": table, "command": words,
                                                     "pace_ms": args.pace_ms})
    if args.json:
        print_json(r)
        return
    detail = {"key": lambda: r["key"], "type": lambda: f"{r['chars']} characters",
              "moveabs": lambda: f"{r['x']} {r['y']}", "click": lambda: r["button"],
              "scroll": lambda: str(r["notches"])}[r["verb"]]()
    say(f"{args.target}: {r['verb']} {detail}")
