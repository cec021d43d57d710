"""panio power set|rm: the power hooks of a target, with optional named levels.

A hook is a command line run without a shell (e.g. ``shellyplug -d 192.0.2.41
cycle``). The runtime commands (power on/off, power-cycle, power-state)
register from ``controller.cli.channels.power_runtime``.
"""

from __future__ import annotations

import argparse

from bench_agent.errors import NotConfigured, UsageError
from controller.cli.common import add_field, add_target_option, check_name, command, say, subcommands
from controller.lab import edit, edits

HOOK_FLAGS = (("on_cmd", "--on-cmd"), ("off_cmd", "--off-cmd"), ("cycle_cmd", "--cycle-cmd"), ("state_cmd", "--state-cmd"))


def register(p: argparse.ArgumentParser, name: str) -> None:
    if name != "power":
        from controller.cli.channels import power_runtime

        power_runtime.register_top(p, name)
        return
    p.description = (
        "Power hooks: commands panio runs to switch a target (a smart-plug helper,\n"
        "a relay script, `adb -s SERIAL reboot`). Smart plugs are helpers behind these\n"
        "generic hooks: see `panio helper`. Named levels (e.g. soft, hard) are optional."
    )
    sub = subcommands(p)
    c = command(sub, "set", "set power hooks of a target (or of one named level)", func=set_,
                example=['panio power set -t pico --cycle-cmd "shellyplug -d 192.0.2.41 cycle" '
                         '--state-cmd "shellyplug -d 192.0.2.41 state"',
                         'panio power set -t pico --level hard --off-cmd "relay 3 off" --on-cmd "relay 3 on"'],
                see_also="panio helper (bundled plug helpers), panio power rm",
                details="Without a cycle hook, a cycle is off, a pause (--cycle-off-s), then on.\n"
                        "An empty value removes that hook: --state-cmd ''.")
    add_target_option(c)
    c.add_argument("--level", metavar="LEVEL", help="a named level (e.g. hard); default: the target's default level")
    for _, flag in HOOK_FLAGS:
        c.add_argument(flag, metavar="CMD", help=f"command for {flag[2:].removesuffix('-cmd')}")
    add_field(c, "POWER", "timeout_s", help="how long a hook may run", fallback="bench_agent.hooks:DEFAULT_TIMEOUT_S")
    add_field(c, "POWER", "cycle_off_s", help="pause between off and on when there is no cycle hook",
              fallback="bench_agent.ops.power:DEFAULT_CYCLE_OFF_S")

    c = command(sub, "rm", "remove a target's power hooks (or one named level)", func=rm,
                example="panio power rm -t pico --level hard", see_also="panio power set")
    add_target_option(c)
    c.add_argument("--level", metavar="LEVEL", help="remove only this level")
    from controller.cli.channels import power_runtime

    power_runtime.register(sub)


def _values(args: argparse.Namespace) -> dict:
    values = {key: getattr(args, key) for key, _ in HOOK_FLAGS}
    values.update(timeout_s=args.timeout_s, cycle_off_s=args.cycle_off_s)
    return values


def set_(args: argparse.Namespace) -> None:
    values = _values(args)
    if all(v is None for v in values.values()):
        raise UsageError("give at least one hook or setting", hint="e.g. --cycle-cmd CMD; see `panio power set --help`")
    if args.level:
        check_name("level", args.level)
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if "power" not in t:
            t["power"] = edits.new_table({})
        table = t["power"]
        if args.level:
            import tomlkit

            if "levels" not in table:
                table["levels"] = tomlkit.table(is_super_table=True)
            if args.level not in table["levels"]:
                table["levels"][args.level] = edits.new_table({})
            table = table["levels"][args.level]
        changed = edits.set_fields(table, values)
    where = f"level {args.level}" if args.level else "default level"
    say(f"set {', '.join(changed)} of {args.target}'s power ({where})")  # not "power on pico": that is a command


def rm(args: argparse.Namespace) -> None:
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if "power" not in t:
            raise NotConfigured(f"target {args.target!r} has no power hooks", target=args.target)
        if args.level:
            levels = t["power"].get("levels", {})
            if args.level not in levels:
                known = ", ".join(levels) or "none"
                raise NotConfigured(f"target {args.target!r} has no power level {args.level!r} (levels: {known})",
                                    target=args.target, level=args.level)
            del levels[args.level]
            if not levels:
                del t["power"]["levels"]
        else:
            del t["power"]
    say(f"removed power {'level ' + args.level if args.level else 'hooks'} from {args.target}")
