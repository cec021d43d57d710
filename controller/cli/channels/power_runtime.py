"""Runtime power commands: power on|off (under `power`), power-cycle and power-state (top level)."""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json, add_param, add_target_positional, command
from controller.cli.runtime import Step, runtime, spec_args

SEE_ALSO = "panio power set (configure hooks), panio helper (smart-plug helpers), docs/power.md"


def register(sub: argparse._SubParsersAction) -> None:
    """`power on` and `power off`, inside the `power` group."""
    for verb in ("on", "off"):
        c = command(sub, verb, f"switch a target's power {verb} by running its {verb}_cmd hook", func=_switch,
                    example=[f"panio power {verb} pico", f"panio power {verb} pico --level hard"],
                    see_also=f"panio power-state, panio power-cycle, {SEE_ALSO}")
        add_target_positional(c)
        add_param(c, f"power.{verb}", "level", metavar="LEVEL")
        c.set_defaults(verb=verb)


def register_top(p: argparse.ArgumentParser, name: str) -> None:
    """The top-level `power-cycle` and `power-state` commands."""
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    if name == "power-cycle":
        p.description = ("Power-cycle a target: its cycle_cmd hook, or without one: off_cmd, a pause\n"
                         "(cycle_off_s: `panio power set --help`), on_cmd. A failed or timed-out hook is\n"
                         "reported with its stderr; after a timeout the outcome is unknown (check with\n"
                         "power-state).")
        p.epilog = ("example:\n  panio power-cycle pico\n  panio power-cycle pico --level hard\n\n"
                    f"see also: panio power-state, {SEE_ALSO}")
        p.set_defaults(func=_switch, verb="cycle")
    else:
        p.description = ("Read whether a target is powered, without changing it: the state_cmd hook,\n"
                         "else the serial sense line (serial add --sense), else UNKNOWN. A target with\n"
                         "power levels gets one line per level, the default first.")
        p.epilog = ("example:\n  panio power-state pico\n  panio power-state pico --level hard --json\n\n"
                    f"see also: panio power on/off, panio serial add --sense, {SEE_ALSO}")
        p.set_defaults(func=_state)
        add_json(p)
    add_target_positional(p)
    add_param(p, "power.cycle" if name == "power-cycle" else "power.state", "level", metavar="LEVEL")


def _power_opts(args: argparse.Namespace, lab: Any, op: str) -> dict[str, Any]:
    from controller import power

    return {"target": args.target, "power": lab.target(args.target).get("power"),
            "sense": power.sense_interface(lab, args.target), **spec_args(args, op)}


@runtime
def _switch(args: argparse.Namespace, lab: Any) -> Step:
    lab.channel(args.target, "power")  # not_configured, with its hint
    return Step(f"power.{args.verb}", args.target, _power_opts(args, lab, f"power.{args.verb}"))


@runtime
def _state(args: argparse.Namespace, lab: Any) -> Step:
    return Step("power.state", args.target, {**_power_opts(args, lab, "power.state"), "json": args.json})
