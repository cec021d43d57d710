"""panio doctor [TARGET]: is the configuration consistent with what is plugged in?

The plan picks the targets (in a job step without TARGET: the job's own, the only
one its host can check); the body (``bench_agent.commands.hardware``) asks each
target's host with ``system.doctor``.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json, check_name
from controller.cli.runtime import Step, job_target, on_job_host, runtime


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Check each target's configured channels against the hardware present on the\n"
        "host that owns it: serial and capture devices, the netboot link and TFTP root,\n"
        "adb serials, hook executables. Reads only; changes nothing.\n\n"
        "Exit status: 0 when everything is present; 1 when something is missing or wrong (the report on\n"
        "stdout, and the usual two error lines on stderr naming what)."
    )
    p.description += ("\n\nWith --host NAME: that control host itself too (panio's version against this\n"
                      "machine's, the worker's systemd unit, device groups), then the targets it owns.\n\n"
                      "With PANIO_BROKER set, the broker too: a WARNING when it answers a client without\n"
                      "credentials, speaks plain text beyond loopback, or this machine has no signing keys\n"
                      "(warnings do not change the exit status; docs/security.md).")
    p.epilog = ("example:\n  panio doctor pico\n  panio doctor --json\n  panio doctor --host bench1\n\n"
                "see also: panio discover (what this host has), panio config show (what the lab says), "
                "panio setup (provision a host)")
    p.add_argument("target", nargs="?", metavar="TARGET", help="check one target (default: all)")
    p.add_argument("--host", metavar="NAME", help="check this control host and the targets it owns")
    add_json(p)
    p.set_defaults(func=run)


@runtime
def run(args: argparse.Namespace, lab: Any) -> Step:
    """The targets to check, with their tables; each is checked on its own host (``route``)."""
    one = args.target or job_target(args)  # in a job step: the job's own target, not the whole lab
    names = [one] if one else list(lab.targets)
    version = None
    if args.host:
        from controller.cli.main import version as panio_version

        check_name("host", args.host)
        lab.host(args.host)  # fails helpfully if the host is unknown
        on_job_host(args, lab, "doctor")
        names = [n for n in names if lab.target(n).get("host") == args.host]
        version = panio_version()
    _reachable_in_job(args, lab, names)
    targets = [{"name": n, "config": dict(lab.target(n))} for n in names]
    host = args.host

    def route(op: str, op_args: dict[str, Any]) -> str | None:
        return host if op == "system.host_check" else op_args["config"].get("host")

    return Step("hardware.doctor", None, {"targets": targets, "host": host, "version": version, "json": args.json,
                                          "broker": _broker()}, route=route)


def _reachable_in_job(args: argparse.Namespace, lab: Any, names: list[str]) -> None:
    """A job step reaches only its target's host: a target another host owns cannot be checked from it."""
    job = job_target(args)
    if job is None:
        return
    own = lab.target(job).get("host")
    far = [n for n in names if lab.target(n).get("host") != own]
    if far:
        from bench_agent.errors import UsageError

        raise UsageError(f"`panio doctor {far[0]}` in a job step would run on {job}'s host ({own or 'local'}), "
                         f"not on {far[0]}'s", hint="check the job's own target, or run `panio doctor` outside the job")


def _broker() -> list | None:
    """The broker's rows (``controller.jobs.broker_check``) when this machine uses one."""
    from controller import backends

    url = backends.broker_url()
    if not url:
        return None
    from controller.jobs import broker_check

    return broker_check.rows(url)
