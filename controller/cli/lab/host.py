"""panio host add|set|rm|show|list: control hosts that own targets' devices."""

from __future__ import annotations

import argparse

from bench_agent.errors import Refused
from controller.cli.common import static, add_field, add_json, check_name, command, load_lab, print_json, say, subcommands
from controller.lab import edit, edits
from controller.lab.describe import host_line


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "A control host is the machine a target's devices are plugged into. panio\n"
        "reaches it over SSH. A target without a host is driven from this machine."
    )
    sub = subcommands(p)
    c = command(sub, "add", "add a control host", func=add,
                example=["panio host add bench1 --ssh user@bench1.local",
                         "panio host add bench2 --local   # a host on this machine: no SSH, no Ansible"],
                see_also="panio target add --host, panio host show, docs/hosts.md",
                details="--local: a host whose worker runs on this machine (two hosts on one machine, a test\n"
                        "bench). It is reached through its worker (transport celery, PANIO_BROKER), keeps its\n"
                        "state in STATE_DIR/hosts/NAME, gets a signing key pair there that this machine\n"
                        "trusts and that trusts this machine's (made if missing), and reads the lab file\n"
                        "itself: its worker takes only its own targets from it and re-reads it on every\n"
                        "change, so no host file is regenerated after a lab edit. The command prints the\n"
                        "worker's command line.")
    c.add_argument("name", metavar="NAME")
    _fields(c, required=False)
    c.add_argument("--local", action="store_true",
                   help="the host's worker runs on this machine (no SSH): see above")
    add_json(c)

    c = command(sub, "set", "change a control host's settings", func=set_,
                example="panio host set bench1 --port 2222", see_also="panio host show")
    c.add_argument("name", metavar="NAME")
    _fields(c, required=False)

    c = command(sub, "rm", "remove a control host (refused while targets use it)", func=rm,
                example="panio host rm bench1", see_also="panio host list")
    c.add_argument("name", metavar="NAME")

    c = command(sub, "show", "show one control host and the targets it owns", func=show,
                example="panio host show bench1 --json", see_also="panio host list")
    c.add_argument("name", metavar="NAME")
    add_json(c)

    c = command(sub, "trust", "record a host's SSH host key so panio will connect to it", func=trust,
                example=["panio host trust bench1", "panio host trust bench1 --fingerprint SHA256:abc...",
                         "panio host trust bench1 --replace --fingerprint SHA256:new..."],
                see_also="panio host show, panio ping TARGET, docs/remote-hosts.md",
                details="panio verifies every host key and refuses an unknown one. Compare the printed\n"
                        "fingerprint with the host's own (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`\n"
                        "on the host), or pass --fingerprint to have panio compare it.\n"
                        "A host whose key differs from the recorded one is refused (exit 13) with both\n"
                        "fingerprints: a reinstalled host, or someone in the middle. Replace the key\n"
                        "only once you know which: --replace (best with --fingerprint).")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--fingerprint", metavar="SHA256:...", help="record only if the key has this fingerprint")
    c.add_argument("--replace", action="store_true",
                   help="replace a recorded key that differs from the one the host presents now")
    add_json(c)

    c = command(sub, "list", "list control hosts", func=list_, example="panio host list", see_also="panio host show")
    add_json(c)


def _fields(c: argparse.ArgumentParser, required: bool) -> None:
    c.add_argument("--ssh", required=required, metavar="[USER@]HOST", help="SSH destination")
    from controller.lab.schema import HOST

    add_field(c, HOST, "port", help="SSH port", fallback="controller.transports.known_hosts:SSH_PORT")
    c.add_argument("--description", help="free text")
    c.add_argument("--python", metavar="PATH", help="python on the host that runs the bench agent")
    c.add_argument("--transport", choices=("ssh", "celery"),
                   help="how runtime commands reach the host: ssh (default; a kept agent channel) or celery "
                        "(the host's `panio worker`, needs PANIO_BROKER)")


def _values(args: argparse.Namespace) -> dict:
    return {"ssh": args.ssh, "port": args.port, "description": args.description, "python": args.python,
            "transport": args.transport}


def add(args: argparse.Namespace) -> None:
    from bench_agent.errors import UsageError

    check_name("host", args.name)
    if args.local == bool(args.ssh):
        raise UsageError("give --ssh [USER@]HOST, or --local for a host whose worker runs on this machine",
                         hint="panio host add bench1 --ssh user@bench1.local")
    values = _values(args)
    if args.local:
        values.update(ssh="localhost", transport="celery",
                      description=args.description or "its worker runs on the controller's machine (--local)")
    with edit(args.lab_path) as doc:
        hosts = edits.section(doc, "hosts")
        edits.require_absent(hosts, args.name, "host", str(args.lab_path))
        hosts[args.name] = edits.new_table(values)
    if not args.local:
        say(f"added host {args.name} (ssh {args.ssh})")
        return
    from controller.cli.lab import host_local

    done = host_local.prepare(args.name, str(args.lab_path))
    if args.json:
        print_json(done)
        return
    say(f"added host {args.name} on this machine (state {done['state_dir']}; keys exchanged)\n"
        f"start its worker: {done['worker']}")


def set_(args: argparse.Namespace) -> None:
    with edit(args.lab_path) as doc:
        changed = edits.set_fields(edits.host(doc, args.name, args.lab_path), _values(args))
    say(f"host {args.name}: " + (f"set {', '.join(changed)}" if changed else "nothing to change"))


def _users(doc_or_data, name: str) -> list[str]:
    return [t for t, body in doc_or_data.get("targets", {}).items() if body.get("host") == name]


def rm(args: argparse.Namespace) -> None:
    with edit(args.lab_path) as doc:
        edits.host(doc, args.name, args.lab_path)
        users = _users(doc, args.name)
        if users:
            raise Refused(f"host {args.name!r} still owns targets: {', '.join(users)}",
                          hint="move or remove them first (`panio target rm NAME`)", host=args.name, targets=users)
        del doc["hosts"][args.name]
    say(f"removed host {args.name}")


@static
def show(args: argparse.Namespace) -> None:
    lab = load_lab(args)
    h = lab.host(args.name)
    users = _users(lab.data, args.name)
    if args.json:
        print_json({"name": args.name, **h, "targets": users})
    else:
        say(host_line(args.name, h))
        say(f"  targets: {', '.join(users) if users else 'none'}")


@static
def list_(args: argparse.Namespace) -> None:
    lab = load_lab(args)
    if args.json:
        print_json([{"name": n, **h, "targets": _users(lab.data, n)} for n, h in lab.hosts.items()])
    elif not lab.hosts:
        say("no hosts: every target is driven from this machine (add one with `panio host add NAME --ssh USER@HOST`)")
    else:
        for n, h in lab.hosts.items():
            say(host_line(n, h))


def trust(args: argparse.Namespace) -> None:
    from controller.transports import known_hosts

    h = load_lab(args).host(args.name)
    recorded = known_hosts.recorded_keys(h)
    key = known_hosts.scan_host_key(args.name, h, prefer=recorded[0][1].get_name() if recorded else None)
    seen = known_hosts.fingerprint(key)
    if args.fingerprint and args.fingerprint not in (seen, seen.split(" ", 1)[1]):
        raise Refused(f"host {args.name} presents {seen}, not {args.fingerprint}; nothing recorded",
                      hint="someone may be in the middle: check the host's key on its console", host=args.name)
    same = next((path for path, old in recorded if old == key), None)
    if same is not None:
        _trusted(args, seen, f"host {args.name} is already trusted", str(same))
        return
    if recorded and not args.replace:
        old = sorted({known_hosts.fingerprint(k) for _, k in recorded})
        raise Refused(f"host {args.name} presents a CHANGED host key: {seen}; recorded: {', '.join(old)}; "
                      "nothing changed",
                      hint=f"if the host was reinstalled, check its new key on its console, then run `panio host "
                           f"trust {args.name} --replace --fingerprint {seen.split(' ', 1)[1]}`; otherwise someone "
                           "may be in the middle", host=args.name, key=seen, recorded=old)
    _refuse_foreign(args.name, h, recorded)
    path = known_hosts.record_host_key(h, key, replace=args.replace)
    _trusted(args, seen, f"replaced the host key of {args.name}" if recorded else f"trusted host {args.name}",
             str(path), old=recorded)


def _refuse_foreign(name: str, h: dict, recorded: list) -> None:
    """A changed key recorded in the user's own ~/.ssh/known_hosts is theirs to remove: panio never edits it."""
    from controller.transports import known_hosts

    foreign = sorted({str(path) for path, _ in recorded if path != known_hosts.known_hosts_path()})
    if foreign:
        _, hostname, port = known_hosts.destination(h)
        raise Refused(f"host {name}: the old key is recorded in {', '.join(foreign)}, which panio does not edit; "
                      "nothing changed",
                      hint=f"remove it with `ssh-keygen -R '{known_hosts.key_name(hostname, port)}'`, then run "
                           f"`panio host trust {name}` again", host=name, files=foreign)


def _trusted(args: argparse.Namespace, seen: str, how: str, path: str, old: list | None = None) -> None:
    from controller.transports import known_hosts

    previous = sorted({known_hosts.fingerprint(k) for _, k in old or []})
    if args.json:
        print_json({"host": args.name, "key": seen, "known_hosts": path, "replaced": previous})
    else:
        say(f"{how}: {seen} (recorded in {path})"
            + (f"; the old key {', '.join(previous)} is gone" if previous else ""))
