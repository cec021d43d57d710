"""panio doctor [TARGET]: is the configuration consistent with what is plugged in?"""

from __future__ import annotations

import argparse

from controller.cli.common import add_json, load_lab, print_json, say

MARK = {"ok": "ok     ", "missing": "MISSING", "problem": "PROBLEM", "unchecked": "-      ", "warning": "WARNING"}


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


def run(args: argparse.Namespace) -> int:
    from controller import dispatch
    from controller.cli.netboot import effective_root

    lab = load_lab(args)
    names = [args.target] if args.target else list(lab.targets)
    report = {}
    if args.host:
        from controller.cli.common import check_name
        from controller.cli.main import version

        check_name("host", args.host)
        lab.host(args.host)  # fails helpfully if the host is unknown
        names = [n for n in names if lab.target(n).get("host") == args.host]
        report[f"{args.host} (host)"] = dispatch.call_host(lab, args.host, "system.host_check", {"version": version()})
    for name in names:
        config = lab.target(name)
        root = effective_root(name, config["netboot"]) if "netboot" in config else None
        report[name] = dispatch.call(lab, name, "system.doctor", {"config": config, "tftp_root": root})
    bad = any(r["status"] in ("missing", "problem") for rows in report.values() for r in rows)
    broker = _broker()
    if args.json:
        print_json({"ok": not bad, "targets": report, **({"broker": broker} if broker is not None else {})})
    else:
        if broker is not None:
            say("broker:")
            for r in broker:
                say(f"  {MARK[r['status']]}  {r['channel']:<8} {r['item']:<14} {r['detail']}")
        for name, rows in report.items():
            say(f"{name}:")
            for r in rows or [{"status": "unchecked", "channel": "-", "item": "-", "detail": "no channels configured"}]:
                say(f"  {MARK[r['status']]}  {r['channel']:<8} {r['item']:<14} {r['detail']}")
        if not names:
            say("no targets in the lab file")
        if not bad:
            say("all configured hardware is present")
    if bad:  # the report is on stdout; the failure gets its two lines on stderr like every other
        from bench_agent.errors import PanioError

        wrong = [f"{t}/{r['channel']}/{r['item']}" for t, rows in report.items() for r in rows
                 if r["status"] in ("missing", "problem")]
        raise PanioError(f"{len(wrong)} configured item(s) missing or wrong: {', '.join(wrong)}",
                         hint="see the report on stdout and `panio discover`", items=wrong)
    return 0


def _broker() -> list | None:
    """The broker's rows (``controller.jobs.broker_check``) when this machine uses one."""
    from controller.jobs import backends

    url = backends.broker_url()
    if not url:
        return None
    from controller.jobs import broker_check

    return broker_check.rows(url)
