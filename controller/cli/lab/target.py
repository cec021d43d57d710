"""panio target add|set|rm|show|list."""

from __future__ import annotations

TYPE_CHECKING = False  # argparse only for the annotations: `main` runs `target list` without it (commands.QUICK)

if TYPE_CHECKING:
    import argparse

from controller.cli.common import static, add_json, check_name, command, load_lab, print_json, say, subcommands
from controller.lab import edit

# controller.lab.edits and .describe are imported by the commands that use them: `target list` needs neither


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Targets are the boards on your benches. Add a target first, then wire its\n"
        "channels: panio serial add, netboot set, power set, video set, hid set, adb set."
    )
    sub = subcommands(p)
    c = command(sub, "add", "add a target", func=add,
                example="panio target add pico --description 'Raspberry Pi 5' --tag pi5",
                see_also="panio serial add, panio power set, panio target show")
    c.add_argument("name", metavar="NAME", help="target name ([a-z0-9][a-z0-9_-]*)")
    c.add_argument("--description", help="free text shown by target list/show")
    c.add_argument("--host", metavar="HOST", help="control host that owns its devices (default: this machine); see panio host add")
    c.add_argument("--tag", action="append", metavar="TAG", help="a tag for job selectors; repeat for several")

    c = command(sub, "set", "change a target's description, host or tags", func=set_,
                example=["panio target set pico --tag pi5 --tag lab2", "panio target set pico --untag lab2",
                         "panio target set pico --host bench1"],
                see_also="panio target show, panio host add",
                details="Channels keep their settings; --host moves the whole target (its devices must\n"
                        "then be on that host). --description '' removes the description.")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--description", help="free text shown by target list/show ('' removes it)")
    where = c.add_mutually_exclusive_group()
    where.add_argument("--host", metavar="HOST", help="the control host that owns its devices; see panio host add")
    where.add_argument("--local", action="store_true", help="its devices are on this machine (drops --host)")
    c.add_argument("--tag", action="append", metavar="TAG", help="add a tag for job selectors; repeat for several")
    c.add_argument("--untag", action="append", metavar="TAG", help="remove a tag; repeat for several")

    c = command(sub, "rm", "remove a target and all its channels", func=rm,
                example="panio target rm pico",
                see_also="panio serial rm (remove one interface only), panio target list",
                details="To drop a single channel and keep the target, use that channel's rm\n"
                        "(e.g. `panio serial rm bmc -t pico`).")
    c.add_argument("name", metavar="NAME")

    c = command(sub, "show", "show one target and its channels", func=show,
                example="panio target show pico --json", see_also="panio target list, panio config show")
    c.add_argument("name", metavar="NAME")
    add_json(c)

    c = command(sub, "list", "list targets", func=list_,
                example="panio target list --json", see_also="panio target show, panio config show")
    add_json(c)

    from controller.cli.lab import target_health

    target_health.register(sub)


def add(args: argparse.Namespace) -> None:
    from controller.lab import edits
    from controller.lab.store import append_table

    check_name("target", args.name)
    if args.host:
        check_name("host", args.host)
    for tag in args.tag or []:
        check_name("tag", tag)
    values = {"description": args.description, "host": args.host, "tags": args.tag}

    def check(data: dict) -> None:  # the same refusals as the full edit below, on the parsed lab
        if args.host:
            edits.host(data, args.host, args.lab_path)
        edits.require_absent(data.get("targets", {}), args.name, "target", str(args.lab_path))

    if not append_table(args.lab_path, "targets", args.name, values, check):
        with edit(args.lab_path) as doc:
            check(doc)
            edits.section(doc, "targets")[args.name] = edits.new_table(values)
    say(f"added target {args.name}")


def set_(args: argparse.Namespace) -> None:
    from bench_agent.errors import NotConfigured, UsageError
    from controller.lab import edits

    for tag in (args.tag or []) + (args.untag or []):
        check_name("tag", tag)
    if args.host:
        check_name("host", args.host)
    if args.description is None and not (args.host or args.local or args.tag or args.untag):
        raise UsageError("give something to change", hint="e.g. --tag pi5; see `panio target set --help`")
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.name, args.lab_path)
        if args.host:
            edits.host(doc, args.host, args.lab_path)
        tags = list(t.get("tags", []))
        missing = [tag for tag in args.untag or [] if tag not in tags]
        if missing:
            raise NotConfigured(f"target {args.name!r} has no tag {missing[0]!r} (tags: {', '.join(tags) or 'none'})",
                                target=args.name, tag=missing[0])
        new = [tag for tag in tags if tag not in (args.untag or [])]
        new += [tag for tag in dict.fromkeys(args.tag or []) if tag not in new]
        changed = edits.set_fields(t, {"description": args.description, "host": "" if args.local else args.host})
        if new != tags:
            if new:
                t["tags"] = new
            else:
                del t["tags"]
            changed.append("tags")
    say(f"target {args.name}: " + (f"set {', '.join(changed)}" if changed else "nothing to change"))


def rm(args: argparse.Namespace) -> None:
    from controller.lab import edits

    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.name, args.lab_path)
        channels = [k for k in ("serial", "netboot", "power", "video", "hid", "adb", "actions") if k in t]
        del doc["targets"][args.name]
    say(f"removed target {args.name}" + (f" with its {', '.join(channels)}" if channels else ""))


@static
def show(args: argparse.Namespace) -> None:
    from controller.lab.describe import target_lines

    lab = load_lab(args)
    t = lab.target(args.name)
    if args.json:
        print_json({"name": args.name, **t})
    else:
        say("\n".join(target_lines(args.name, t)))


@static
def list_(args: argparse.Namespace) -> None:
    lab = load_lab(args)
    if args.json:
        print_json([
            {"name": n, "description": t.get("description", ""), "host": t.get("host"), "tags": t.get("tags", []),
             "channels": lab.channels_of(n), **_placement(lab, n)}
            for n, t in lab.targets.items()
        ])
        return
    if not lab.targets:
        say(f"no targets in {lab.path} (add one with `panio target add NAME`)")
        return
    width = max(len(n) for n in lab.targets) + 2
    for n, t in lab.targets.items():
        chans = ", ".join(lab.channels_of(n)) or "no channels"
        desc = f"  {t['description']}" if t.get("description") else ""
        say(f"{n.ljust(width)}{chans}{desc}")


def _placement(lab, name: str) -> dict:
    """Where a target's parts live: ``hosts`` (null = this machine) and each channel's kind, name and host."""
    t = lab.target(name)
    host = t.get("host")
    details = [{"kind": "serial", "name": i["name"], "host": host} for i in t.get("serial", [])]
    details += [{"kind": k, "name": k, "host": host} for k in lab.channels_of(name) if k != "serial"]
    hosts = [host] + [a.get("host", host) for a in t.get("actions", {}).values()]
    return {"hosts": list(dict.fromkeys(hosts)), "channel_details": details}
