"""panio action add|rm|list: named actions, a project's own commands bound to a target."""

from __future__ import annotations

import argparse

from bench_agent.errors import NotConfigured, UsageError
from controller.cli.runtime import static
from controller.cli.common import add_field, add_json, check_name, command, load_lab, print_json, say, subcommands
from controller.lab import edit, edits


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Named actions bind a command of your project (flash a board, collect logs)\n"
        "to a target, so people, agents and jobs run it by name."
    )
    sub = subcommands(p)
    c = command(sub, "add", "add a named action to a target", func=add,
                example="panio action add flash -t pico --command 'make flash BOARD=pico' --requires-power",
                see_also="panio action list, panio action run")
    c.add_argument("name", metavar="NAME")
    c.add_argument("-t", "--target", required=True, metavar="TARGET")
    c.add_argument("--command", required=True, metavar="CMD", help="command line, run without a shell")
    c.add_argument("--description", help="one line shown by action list")
    c.add_argument("--requires-power", action="store_true", help="refuse to run while the target is powered off")
    c.add_argument("--host", metavar="HOST", help="run it on this control host (default: the target's)")
    add_field(c, "ACTION", "timeout_s", help="how long it may run", fallback="bench_agent.ops.action:DEFAULT_TIMEOUT_S")
    add_field(c, "ACTION", "max_args", metavar="N", help="let `action run` append up to N arguments to the command, each one "
                                            "word (default: it takes none)")

    c = command(sub, "rm", "remove a named action", func=rm,
                example="panio action rm flash -t pico", see_also="panio action list")
    c.add_argument("name", metavar="NAME")
    c.add_argument("-t", "--target", required=True, metavar="TARGET")

    c = command(sub, "list", "list a target's named actions", func=list_,
                example="panio action list pico --json", see_also="panio action add, panio action run")
    c.add_argument("target_pos", nargs="?", metavar="TARGET")
    c.add_argument("-t", "--target", metavar="TARGET", help=argparse.SUPPRESS)
    add_json(c)
    from controller.cli.channels import action_runtime

    action_runtime.register(sub)


def add(args: argparse.Namespace) -> None:
    import tomlkit

    check_name("action", args.name)
    if args.host:
        check_name("host", args.host)
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if args.host:
            edits.host(doc, args.host, args.lab_path)
        if "actions" not in t:
            t["actions"] = tomlkit.table(is_super_table=True)
        edits.require_absent(t["actions"], args.name, "action", f"target {args.target}", target=args.target)
        t["actions"][args.name] = edits.new_table({
            "command": args.command, "description": args.description,
            "requires_power": True if args.requires_power else None, "host": args.host, "timeout_s": args.timeout_s,
            "max_args": args.max_args,
        })
    say(f"added action {args.name} to {args.target}")


def rm(args: argparse.Namespace) -> None:
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        actions = t.get("actions", {})
        if args.name not in actions:
            known = ", ".join(actions) or "none"
            raise NotConfigured(f"target {args.target!r} has no action {args.name!r} (actions: {known})",
                                target=args.target, action=args.name)
        del actions[args.name]
        if not actions:
            del t["actions"]
    say(f"removed action {args.name} from {args.target}")


def actions_of(lab, target: str) -> list[dict]:
    t = lab.target(target)
    default_host = t.get("host")
    # max_args only where the action takes arguments: the shape agents and scripts already read stays as it was
    return [
        {"name": n, "description": a.get("description", ""), "command": a["command"],
         "requires_power": bool(a.get("requires_power", False)), "host": a.get("host", default_host),
         **({"max_args": a["max_args"]} if a.get("max_args") else {})}
        for n, a in t.get("actions", {}).items()
    ]


@static
def list_(args: argparse.Namespace) -> None:
    target = args.target_pos or args.target
    if not target:
        raise UsageError("name the target: panio action list TARGET")
    acts = actions_of(load_lab(args), target)
    if args.json:
        print_json(acts)
    elif not acts:
        say(f"{target} has no named actions (add one with `panio action add NAME -t {target} --command CMD`)")
    else:
        for a in acts:
            power = "  [requires power]" if a["requires_power"] else ""
            desc = f"  {a['description']}" if a["description"] else ""
            n = a.get("max_args", 0)
            takes = f"  [takes up to {n} argument{'s' * (n != 1)}]" if n else ""
            say(f"{a['name']}: {a['command']}{power}{takes}{desc}")
