"""panio action run TARGET NAME [ARG ...]: run a named action, refusing a requires_power one on a board that is off."""

from __future__ import annotations

import argparse
from typing import Any

from bench_agent.errors import NotConfigured
from controller.cli.common import add_target_positional, command
from controller.cli.runtime import Step, runtime


def register(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "run", "run a target's named action (its command, without a shell)", func=run,
                example=["panio action run pico flash", "panio action run pico flash build/zephyr.uf2"],
                see_also="panio action list, panio action add, panio power-state",
                details="An action marked requires_power is refused (refused, 13) while power-state\n"
                        "reads OFF; when the state cannot be read it runs, with a note. The action's\n"
                        "output is printed when it ends; a non-zero exit is hook_failed (9).\n"
                        "ARGs are appended to the action's command, each as one word (never split,\n"
                        "never read by a shell), only if the action was added with --max-args N;\n"
                        "otherwise, or beyond N, or with a NUL, an argument over 4096 characters or\n"
                        "32768 in all, the run is refused (usage, 2). `--` ends panio's options,\n"
                        "so an ARG may start with '-'.")
    add_target_positional(c)
    c.add_argument("name", metavar="NAME", help="the action (see `panio action list TARGET`)")
    c.add_argument("action_args", nargs="*", metavar="ARG",
                   help="appended to the action's command as words of their own (the action's max_args allows them)")


@runtime
def run(args: argparse.Namespace, lab: Any) -> Step:
    from bench_agent.ops.action import check_args
    from controller import power

    actions = lab.target(args.target).get("actions", {})
    if args.name not in actions:
        known = ", ".join(actions) or "none"
        raise NotConfigured(f"target {args.target!r} has no action {args.name!r} (actions: {known})",
                            hint=f"add one with `panio action add {args.name} -t {args.target} --command CMD`",
                            target=args.target, action=args.name)
    act = dict(actions[args.name])
    host = act.pop("host", lab.target(args.target).get("host"))
    step_args = {"target": args.target, "name": args.name, "action": act,
                 "power": lab.target(args.target).get("power"), "sense": power.sense_interface(lab, args.target)}
    if args.action_args:
        step_args["args"] = check_args(list(args.action_args), act.get("max_args"), args.target, args.name)
    return Step("action.run", args.target, step_args, hosts={"action.run": host})
