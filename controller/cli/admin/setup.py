"""panio setup --host NAME: provision a control host with the ansible/ playbooks, from zero to a running worker."""

from __future__ import annotations

import argparse
import sys

from controller.cli.common import add_json, check_name, load_lab, print_json, say

DETAILS = """\
Installs on the host, over SSH as the lab file says ([hosts.NAME] ssh, port):
panio in a venv under the SSH user's home (the exact version and dependency
versions this machine runs, from a wheelhouse built here; with --offline the
host needs no package index), the bench worker as a systemd unit (`panio worker --host NAME`
with PANIO_BROKER and PANIO_REDIS_PREFIX from this shell or the flags), udev
rules and device groups, tesseract (OCR) and dnsmasq (netboot, installed, not
enabled). Then it points the lab's host at the new venv's python.

The host gets no results-database URL (PANIO_RESULTS_URL in your shell stays
here): its worker signs its reports with its own key and `panio recorder` on
the controller records them, so one host cannot write another's results.

It also installs the host's own configuration, its part of this lab file
(~/.local/share/panio/lab.toml there: the worker runs only the hooks and
actions of that file), and the message-signing keys: this machine's pair is
made if missing (`panio keys init`), the host makes its own pair, and each
side trusts the other's certificate. Run setup again after editing the lab
(--config-only does just that).

With PANIO_BROKER_PER_HOST=1 (set on the controller: each host's Celery keys
under a prefix of its own) the worker connects as a Redis user of its own,
panio-host-NAME, allowed only that host's queues, its reports and its own
targets' leases: its random password is made on the first setup and kept in
STATE_DIR/setup/redis-hosts.json (0600; the redis role's panio_redis_hosts),
and --broker-admin (the role's panio-admin user) installs it in Redis at once.
It is the lab's choice, not a host's (the controller and every worker must
agree on the key layout), so setup follows the controller's setting and, when
it is off, says once that any host's credentials then reach every host's
queues and leases.

Run it again at any time: it changes only what is not yet right (a second run
reports 0 changed). The host key must be trusted first (`panio host trust`).
Tasks that need root use sudo without a password; --no-sudo skips them and
installs the worker as a user unit. Needs ansible-core (`pip install
'panio[setup]'`). Exit 16 (setup_failed) names the host and the task."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "Provision a control host: panio's venv, the worker's systemd unit, devices, OCR, netboot.\n\n" + DETAILS
    p.epilog = ("example:\n  panio host add bench1 --ssh panio@bench1.lab\n  panio host trust bench1\n"
                "  panio setup --host bench1\n  panio setup --host bench1 --code-only   # deploy a code change\n"
                "  panio doctor --host bench1\n\nsee also: panio host add, panio doctor, panio worker, docs/hosts.md")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--host", required=True, metavar="NAME", help="the control host to provision (see `panio host list`)")
    p.add_argument("--code-only", action="store_true",
                   help="only rebuild and reinstall panio's code and restart the worker (no sudo, no system packages)")
    p.add_argument("--config-only", action="store_true",
                   help="only install the host's configuration (its part of the lab) and exchange the keys")
    p.add_argument("--check", action="store_true", help="show what would change, change nothing")
    p.add_argument("--no-sudo", action="store_true",
                   help="skip the tasks that need root (packages, udev, groups); the worker becomes a user unit")
    p.add_argument("--broker", metavar="URL", help="the broker the worker uses, with the workers' Redis user "
                   "(default: $PANIO_BROKER)")
    p.add_argument("--broker-admin", metavar="URL",
                   help="with PANIO_BROKER_PER_HOST=1: a Redis user allowed ACL SETUSER (the redis role's panio-admin) "
                        "that installs the host's own broker user now (default: $PANIO_BROKER_ADMIN)")
    p.add_argument("--broker-ca", metavar="FILE", help="the CA certificate of a rediss:// broker: installed on the "
                   "host and named in the worker's broker URL")
    p.add_argument("--offline", action="store_true",
                   help="the host has no package index: install from the wheelhouse alone (same Python as here)")
    p.add_argument("--inventory", action="store_true", help="print the generated Ansible inventory and stop")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    import tempfile
    from pathlib import Path

    from controller.provision import inventory, playbook, wheelhouse

    check_name("host", args.host)
    lab = load_lab(args)
    host = lab.host(args.host)
    root = wheelhouse.source_root()
    play_vars = _play_vars(args)
    play_vars.update(_broker_identity(args, lab, play_vars))
    with tempfile.TemporaryDirectory(prefix="panio-setup-") as tmp:
        play_vars.update(_host_files(args, lab, Path(tmp)))
        inv = inventory.write(Path(tmp) / "inventory.json", args.host, host, play_vars)
        if args.inventory:
            sys.stdout.write(inv.read_text())
            return
        _progress(args, f"building the wheelhouse (panio {play_vars['panio_version']} and its dependencies)")
        play_vars["panio_wheelhouse_src"] = str(wheelhouse.build(_cache(), play_vars["panio_version"]))
        inventory.write(inv, args.host, host, play_vars)
        tags = ["code"] if args.code_only else ["config"] if args.config_only else []
        outcome = playbook.run(root, "control_host.yml", inv, check=args.check, tags=tags,
                               skip_tags=["sudo"] if args.no_sudo or args.code_only or args.config_only else [],
                               show=lambda event: _show(args, event))
        if not args.check and not args.code_only:
            _trust_host(args, Path(play_vars["panio_fetched_certs"]))
    stats = outcome.stats.get(args.host, {})
    python = outcome.facts.get("python")
    if python and not args.check and host.get("python") != python:
        _point_lab_at(args, python)
    if args.json:
        print_json({"host": args.host, "check": args.check, "code_only": args.code_only, "stats": stats,
                    "python": python, "version": play_vars["panio_version"],
                    "changed": [r["task"] for r in outcome.results if r["status"] == "changed"]})
    else:
        say(f"{args.host}: {stats.get('ok', 0)} ok, {stats.get('changed', 0)} changed, "
            f"{stats.get('skipped', 0)} skipped{' (check mode: nothing was changed)' if args.check else ''}")
        if not args.check:
            say(f"next: panio doctor --host {args.host} (and `panio recorder` on the controller: the worker "
                "reports its jobs there)")


def _play_vars(args: argparse.Namespace) -> dict:
    import os

    from bench_agent.errors import NotConfigured
    from controller.cli.main import version

    broker = args.broker or os.environ.get("PANIO_BROKER")
    if not broker and not args.code_only:
        raise NotConfigured("the worker needs a broker: set PANIO_BROKER or pass --broker",
                            hint="e.g. --broker rediss://panio-worker:PASSWORD@controller.lab:6380/0 --broker-ca "
                                 "ca.pem (reachable from the host; docs/security.md)")
    out = {}
    if args.broker_ca:
        broker = _with_ca(broker or "")
        out["panio_broker_ca_src"] = os.path.abspath(args.broker_ca)
    return {**out, "panio_version": version(), "panio_broker_url": broker or "",
            "panio_redis_prefix": os.environ.get("PANIO_REDIS_PREFIX", "panio:"),
            "panio_sudo": not args.no_sudo, "panio_offline": args.offline}


def _broker_identity(args: argparse.Namespace, lab, play_vars: dict) -> dict:
    """With keys per host (``PANIO_BROKER_PER_HOST=1``): the worker connects as the host's own Redis user, made the
    first time and kept here (``broker_users``), limited to the targets the host serves; installed in the running
    Redis now with ``--broker-admin``, else by the redis role from the file it names."""
    import os
    from urllib.parse import urlsplit

    from bench_agent.jobs.worker import per_host_keys
    from controller.provision import broker_users, hostlab

    if args.code_only:
        return {}
    admin = args.broker_admin or os.environ.get("PANIO_BROKER_ADMIN")
    if not per_host_keys():
        if admin and not (args.check or args.inventory):
            broker_users.load_functions(admin, args.host)
            _progress(args, "panio's Redis functions loaded")
        if not (args.check or args.inventory):
            _progress(args, f"{args.host}'s worker uses the shared panio-worker Redis user: it can reach every "
                            "host's queues and leases (set PANIO_BROKER_PER_HOST=1 on the controller and run setup "
                            "for every host: docs/security.md, \"One identity per host\")")
        return {}
    targets = [name for name, t in lab.targets.items() if hostlab.serves(t, args.host)]
    entry = broker_users.identity(_cache(), args.host, targets)
    url = broker_users.worker_url(play_vars["panio_broker_url"], args.host, entry["password"])
    user = broker_users.user_name(args.host)
    if admin and not (args.check or args.inventory):
        db = int(urlsplit(url).path.strip("/") or 0)
        broker_users.install(admin, args.host, entry, play_vars["panio_redis_prefix"], db)
        _progress(args, f"Redis user {user} installed (its targets: {', '.join(sorted(targets)) or 'none'}), "
                        "panio's Redis functions loaded")
    elif not (args.check or args.inventory):
        _progress(args, f"Redis user {user}: install it with `ansible-playbook ansible/controller.yml "
                        f"-e @{_cache() / broker_users.USERS_FILE}` (or pass --broker-admin)")
    return {"panio_broker_url": url, "panio_broker_per_host": True}


def _with_ca(url: str) -> str:
    """``url`` verifying the broker's certificate against the CA installed on the host (``--broker-ca``)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    from bench_agent.errors import UsageError

    parts = urlsplit(url)
    if parts.scheme != "rediss":
        raise UsageError("--broker-ca is for a TLS broker: give a rediss:// URL", hint="docs/security.md")
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("ssl_ca_certs", "ssl_cert_reqs")]
    query += [("ssl_cert_reqs", "required"), ("ssl_ca_certs", "CA")]
    # the host's path is known there only: Ansible fills in panio_prefix when it writes worker.env
    return urlunsplit(parts._replace(query=urlencode(query))).replace("=CA", "={{ panio_prefix }}/broker-ca.pem")


def _host_files(args: argparse.Namespace, lab, tmp) -> dict:
    """What the host gets from here: its part of the lab, and this machine's signing certificate (made now if
    this machine has no key yet)."""
    from bench_agent.jobs.signing import default_keys
    from controller import keys
    from controller.provision import hostlab

    mine = default_keys()
    if not mine.key.exists():
        keys.create("controller", mine)
        _progress(args, f"made this machine's message-signing key {mine.key} (`panio keys list`)")
    host_lab = tmp / f"{args.host}-lab.toml"
    host_lab.write_text(hostlab.text(lab.data, args.host))
    return {"panio_host_lab_src": str(host_lab), "panio_controller_cert_src": str(mine.cert),
            "panio_fetched_certs": str(_cache() / "certs")}  # kept: a second run fetches nothing new


def _trust_host(args: argparse.Namespace, fetched) -> None:
    from controller import keys

    cert = fetched / f"{args.host}.crt"
    if cert.exists():
        info = keys.trust(cert, name=args.host)
        _progress(args, f"this machine trusts {args.host}'s signing certificate ({info['file']})")


def _cache():
    from bench_agent.paths import state_dir

    path = state_dir() / "setup"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _progress(args: argparse.Namespace, text: str) -> None:
    """Progress is the command's output (stdout): stderr stays for the two lines of an error."""
    if not args.json:
        sys.stdout.write(f"setup: {text}\n")
        sys.stdout.flush()


def _show(args: argparse.Namespace, event: dict) -> None:
    """One line per host result as it arrives (not with --json, whose stdout is one JSON document)."""
    if event["event"] != "result" or args.json:
        return
    status = event["status"]
    line = f"[{event['host']}] {status:<11} {event['task']}"
    if status in ("failed", "unreachable") and event.get("msg"):
        line += f": {' '.join(str(event['msg']).split())[:200]}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _point_lab_at(args: argparse.Namespace, python: str) -> None:
    from controller.lab import edit, edits

    with edit(args.lab_path) as doc:
        edits.host(doc, args.host, args.lab_path)["python"] = python
    _progress(args, f"hosts.{args.host}.python = {python} (the agent now runs from panio's venv)")
