"""panio hid send|serve|stop: keyboard and mouse input through a target's HID rig, at run time.

Each command's plan resolves the target's HID table from the lab file; its body
(``bench_agent.commands.hid``) calls a ``hid.<verb>`` operation on the host
that owns the rig.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json, add_param, add_target_positional, command
from controller.cli.runtime import Step, runtime, spec_args

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
    c = command(sub, "send", "send keyboard or mouse input through the target's HID rig", func=send,
                example=["panio hid send pico key F2", "panio hid send pico type 'root'",
                         "panio hid send pico moveabs 16384 8192 && panio hid send pico click"],
                see_also="panio video shot, panio skill kvm-puppeting, docs/hid.md", details=DETAILS)
    add_target_positional(c)
    c.add_argument("words", nargs=argparse.REMAINDER, metavar="COMMAND", help="the HID command (see below)")
    add_param(c, "hid.send", "pace_ms", metavar="MS")
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


# -- plans (the bodies are in bench_agent.commands.hid) ---------------------------------------------


def _plan(args: argparse.Namespace, lab: Any, command: str, opts: dict[str, Any], with_table: bool = True) -> Step:
    table = dict(lab.channel(args.target, "hid"))  # not_configured, with its hint, before anything else
    extra = {"hid": table} if with_table else {}
    return Step(command, args.target, {"target": args.target, "json": args.json, **extra, **opts})


@runtime
def serve(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "hid.serve", {})


@runtime
def stop(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "hid.stop", {}, with_table=False)


@runtime
def send(args: argparse.Namespace, lab: Any) -> Step:
    """The words go to the body as typed: options among them (`key ENTER --json`) are sorted out there."""
    return _plan(args, lab, "hid.send", {"words": list(args.words), **spec_args(args, "hid.send")})
