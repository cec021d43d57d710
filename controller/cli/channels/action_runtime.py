"""panio action run TARGET NAME: run a named action, refusing a requires_power one on a board that is off."""

from __future__ import annotations

import argparse
from typing import Any

from bench_agent.errors import NotConfigured
from controller.cli.common import add_target_positional, command
from controller.cli.runtime import Step, runtime


def register(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "run", "run a target's named action (its command, without a shell)", func=run,
                example="panio action run pico flash",
                see_also="panio action list, panio action add, panio power-state",
                details="An action marked requires_power is refused (refused, 13) while power-state\n"
                        "reads OFF; when the state cannot be read it runs, with a note. The action's\n"
                        "output is printed when it ends; a non-zero exit is hook_failed (9).")
    add_target_positional(c)
    c.add_argument("name", metavar="NAME", help="the action (see `panio action list TARGET`)")


@runtime
def run(args: argparse.Namespace, lab: Any) -> Step:
    from controller import power

    actions = lab.target(args.target).get("actions", {})
    if args.name not in actions:
        known = ", ".join(actions) or "none"
        raise NotConfigured(f"target {args.target!r} has no action {args.name!r} (actions: {known})",
                            hint=f"add one with `panio action add {args.name} -t {args.target} --command CMD`",
                            target=args.target, action=args.name)
    act = dict(actions[args.name])
    host = act.pop("host", lab.target(args.target).get("host"))
    return Step("action.run", args.target, {"target": args.target, "name": args.name, "action": act,
                                            "power": lab.target(args.target).get("power"),
                                            "sense": power.sense_interface(lab, args.target)},
                hosts={"action.run": host})
