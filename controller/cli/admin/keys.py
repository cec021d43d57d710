"""panio keys init|trust|untrust|list: the keys that sign broker messages (docs/security.md, "Keys")."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.common import add_json, command, number, print_json, say, subcommands

WHERE = ("Kept in PANIO_SIGNING_KEY, PANIO_SIGNING_CERT and PANIO_CERT_STORE, else\n"
         "STATE_DIR/keys/signing.key, signing.crt and trusted/ (mode 0600).")


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Every message on the broker is signed with its sender's key, and a worker runs only\n"
        "messages signed by a certificate in its store (Celery's message signing). The\n"
        "controller trusts every worker's certificate (their replies); a worker trusts the\n"
        "controller's and its own. `panio setup --host NAME` makes a host's pair on the host and\n"
        "exchanges the certificates. " + WHERE
    )
    sub = subcommands(p)
    c = command(sub, "init", "make this machine's signing key and certificate, and trust that certificate",
                func=init, example=["panio keys init", "panio keys init --name bench1   # on a control host"],
                see_also="panio keys trust, panio setup, docs/security.md",
                details="A new RSA key and a self-signed certificate (no CA). Give the certificate to the\n"
                        "other side with `panio keys trust FILE` there (or let `panio setup` do it).\n"
                        "--force makes a new pair (rotation); the old certificate stays trusted\n"
                        "elsewhere until `panio keys untrust` removes it. " + WHERE)
    c.add_argument("--name", default="controller", help="the name in the certificate (default: controller)")
    from controller.keys import DEFAULT_DAYS, MAX_DAYS

    c.add_argument("--days", type=number(int, 1, MAX_DAYS), default=DEFAULT_DAYS,
                   help="how long the certificate is valid, in days")
    c.add_argument("--force", action="store_true", help="replace an existing key (rotation)")
    c.add_argument("--if-missing", action="store_true", help="do nothing when a key exists (for scripts)")
    add_json(c)
    c = command(sub, "trust", "trust a certificate: messages signed by its key are accepted here", func=trust,
                example="panio keys trust bench1.crt", see_also="panio keys list, panio keys untrust",
                details="Copies the PEM certificate into the store as NAME-SERIAL.crt. A worker must be\n"
                        "restarted to read its store again.")
    c.add_argument("cert", metavar="FILE", help="a PEM certificate made by `panio keys init`")
    c.add_argument("--name", help="the name to file it under (default: the name in the certificate)")
    add_json(c)
    c = command(sub, "untrust", "stop trusting a certificate (the end of a rotation, a retired host)",
                func=untrust, example="panio keys untrust bench1", see_also="panio keys list")
    c.add_argument("what", metavar="NAME", help="a name from `panio keys list` (every generation) or a file name")
    add_json(c)
    c = command(sub, "list", "show this machine's certificate and the certificates it trusts",
                func=list_, example="panio keys list --json", see_also="panio keys init, panio doctor")
    add_json(c)


def init(args: argparse.Namespace) -> None:
    from bench_agent.jobs.signing import default_keys
    from controller import keys

    if args.if_missing and default_keys().key.exists():
        info = {**keys.describe(default_keys().cert), "key": str(default_keys().key), "created": False}
    else:
        info = {**keys.create(args.name, days=args.days, force=args.force), "created": True}
    if args.json:
        print_json(info)
        return
    say(f"{'made' if info['created'] else 'kept'} the signing key {info['key']} ({info['name']}, serial "
        f"{info['serial']}, expires {info['expires'][:10]})")
    say(f"certificate to give the other side: {default_keys().cert}  (`panio keys trust FILE` there)")


def trust(args: argparse.Namespace) -> None:
    from controller import keys

    info = keys.trust(Path(args.cert), name=args.name)
    if args.json:
        print_json(info)
    else:
        say(f"trusted {info['name']} (serial {info['serial']}, fingerprint {info['fingerprint'][:23]}...) "
            f"as {info['file']}")


def untrust(args: argparse.Namespace) -> None:
    from controller import keys

    gone = keys.untrust(args.what)
    if args.json:
        print_json({"removed": gone})
    else:
        for path in gone:
            say(f"removed {path}")


def list_(args: argparse.Namespace) -> None:
    from controller import keys

    info = keys.listing()
    if args.json:
        print_json(info)
        return
    own = info["cert"]
    say(f"this machine: {own['name']} serial {own['serial']}, expires {own['expires'][:10]} ({info['key']})"
        if own and info["key_present"] else "this machine: no signing key (make one with `panio keys init`)")
    say(f"trusted ({info['store']}):")
    for t in info["trusted"]:
        flag = "  EXPIRED" if t["expired"] else (f"  expires in {t['days_left']} days" if t["days_left"] < 30 else "")
        say(f"  {Path(t['file']).name:<40} {t['name']:<14} {t['fingerprint'][:23]}...{flag}")
    if not info["trusted"]:
        say("  none")
