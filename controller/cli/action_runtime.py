"""panio action run TARGET NAME: run a named action, refusing a requires_power one on a board that is off."""

from __future__ import annotations

import argparse
import sys

from bench_agent.errors import HookFailed, NotConfigured
from controller.cli.common import add_target_positional, command, load_lab


def register(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "run", "run a target's named action (its command, without a shell)", func=run,
                example="panio action run pico flash",
                see_also="panio action list, panio action add, panio power-state",
                details="An action marked requires_power is refused (refused, 13) while power-state\n"
                        "reads OFF; when the state cannot be read it runs, with a note. The action's\n"
                        "output is printed when it ends; a non-zero exit is hook_failed (9).")
    add_target_positional(c)
    c.add_argument("name", metavar="NAME", help="the action (see `panio action list TARGET`)")


def run(args: argparse.Namespace) -> None:
    from controller import dispatch, power

    lab = load_lab(args)
    actions = lab.target(args.target).get("actions", {})
    if args.name not in actions:
        known = ", ".join(actions) or "none"
        raise NotConfigured(f"target {args.target!r} has no action {args.name!r} (actions: {known})",
                            hint=f"add one with `panio action add {args.name} -t {args.target} --command CMD`",
                            target=args.target, action=args.name)
    act = actions[args.name]
    if act.get("requires_power") and power.require_on(lab, args.target, f"action {args.name} requires power") == "unknown":
        sys.stderr.write(f"note: cannot read {args.target}'s power state (no state_cmd or power_sense_signal); "
                         f"running {args.name} anyway\n")
    host = act.get("host", lab.target(args.target).get("host"))
    result = dispatch.for_lab(lab).call(args.target, "action.run", {
        "target": args.target, "name": args.name, "command": act["command"], "timeout_s": act.get("timeout_s")},
        host=host)
    sys.stdout.write(result["stdout"])
    sys.stderr.write(result["stderr"])
    if result["exit"] != 0:
        from bench_agent.hooks import HookResult, failed

        err = failed(HookResult([], result["exit"], result["stdout"], result["stderr"]),
                     f"action {args.name} of {args.target}", act["command"])
        raise HookFailed(err.message, target=args.target, action=args.name, **err.details)
