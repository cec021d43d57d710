"""The bodies of ``panio netboot tftp-root|start|stop|status|stage``.

``opts`` carries ``target``, ``json``, ``netboot`` (the lab's table; the host
resolves the TFTP root where it serves it), and ``force`` for ``stop``,
``tail`` for ``status``, ``source`` and ``name`` for ``stage``. ``tftp-root`` resolves the root where the body runs.
"""

from __future__ import annotations

import os
import time

from bench_agent.commands import Call, Output, command, fields, items, passed
from bench_agent.errors import Refused

ROOT = fields({
    "target": ("string", "the target"),
    "tftp_root": ("string", "the folder served over TFTP"),
    "exists": ("boolean", "the folder exists"),
    "interface": ("string", "the control host's link to the target"),
})
SERVER = {
    "target": ("string", "the target"),
    "pid": ("integer|null", "the server's process (null: not serving)"),
    "started": ("string|null", "when it started (ISO 8601)"),
    "server": ("string", "dnsmasq (DHCP+TFTP) or panio (TFTP only)"),
    "interface": ("string", "the link it serves on"),
    "address": ("string|null", "the host's address on the link (CIDR)"),
    "tftp_root": ("string", "the folder served"),
    "tftp_port": ("integer", "the TFTP port"),
    "log": ("string", "the server's log file"),
}
STARTED = fields({
    **SERVER,
    "pid": ("integer", "the server's process"),
    "already_running": ("boolean", "it was serving before (nothing started)"),
    "name?": ("string", "the daemon's name (netboot-TARGET)"),
    "kind?": ("string", "netboot"),
    "argv?": (items("string"), "the daemon's command line"),
    "state_dir?": ("string", "the state directory it keeps its files in"),
})
STOPPED = fields({
    "target": ("string", "the target"),
    "stopped": ("boolean", "a server (or an orphaned dnsmasq) was stopped"),
    "was_running": ("boolean", "a server was running"),
    "pid?": ("integer", "the server stopped"),
    "how?": ("string", "how it ended (SIGTERM, SIGKILL...)"),
    "orphan_pid?": ("integer|null", "an orphaned dnsmasq reaped (not running)"),
})
STATUS = fields({
    **SERVER,
    "serving": ("boolean", "the server runs"),
    "leases": (items(fields({"ip": ("string", "address leased"), "mac": ("string", "the client"),
                             "hostname": ("string|null", "the name it gave"),
                             "expires": ("integer", "when the lease ends (epoch s)")})), "DHCP leases (dnsmasq)"),
    "dhcp": (items(fields({"time": ("string", "log time"), "ip": ("string", "address acknowledged"),
                           "mac": ("string", "the client"), "hostname": ("string|null", "the name it gave")})),
             "recent DHCP acknowledgements (--tail)"),
    "files": (items(fields({"time": ("string", "log time"), "file": ("string", "the path asked for"),
                            "client": ("string|null", "who asked"), "result": ("string", "sent or not found")})),
              "recent TFTP requests (--tail)"),
})
STAGED = fields({
    "target": ("string", "the target"),
    "source": ("string", "the file copied"),
    "name": ("string", "its name in the TFTP root"),
    "path": ("string", "where it now is"),
    "bytes": ("integer", "its size"),
    "sha256": ("string", "its SHA-256 (hex)"),
})


@command("netboot.tftp_root", output=ROOT)
def tftp_root(call: Call, opts: dict, out: Output, context: dict) -> None:
    from bench_agent.netboot.settings import effective_root

    target, netboot = opts["target"], opts["netboot"]
    root = effective_root(target, netboot)
    if opts.get("check_root"):
        from bench_agent.netboot import values as rules

        try:
            rules.served_root(root)
        except rules.BadValue as exc:
            raise Refused(str(exc), hint=f"panio netboot set -t {target} --tftp-root DIR", target=target) from None
    if opts.get("json"):
        out.json({"target": target, "tftp_root": root, "exists": os.path.isdir(root), "interface": netboot["interface"]})
    else:
        out.say(root)


@command("netboot.start", output=STARTED)
def start(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    info = call("netboot.start", {"target": target, "netboot": opts["netboot"]})
    if opts.get("json"):
        out.json(info)
        return
    again = " (already running)" if info.get("already_running") else ""
    where = info["interface"] + (f" {info['address']}" if info.get("address") else "")
    port = f", TFTP port {info['tftp_port']}" if info.get("tftp_port") not in (None, 69) else ""
    out.say(f"netboot for {target}: serving{again} with {info['server']} on {where}{port}, "
            f"TFTP root {info['tftp_root']} (daemon netboot-{target}, pid {info['pid']})")


@command("netboot.stop", output=STOPPED)
def stop(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    result = call("netboot.stop", {"target": target, **passed("netboot.stop", opts)})
    if opts.get("json"):
        out.json(result)
    elif result["was_running"]:
        out.say(f"netboot for {target}: stopped (pid {result['pid']}, {result['how']})")
    else:
        out.say(f"netboot for {target}: was not running")


@command("netboot.status", output=STATUS)
def status(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    st = call("netboot.status", {"target": target, "netboot": opts["netboot"], **passed("netboot.status", opts)})
    if opts.get("json"):
        out.json(st)
        return
    state = f"serving with {st['server']} (pid {st['pid']}, since {st['started']})" if st["serving"] else "not serving"
    out.say(f"netboot {target}: {state}")
    out.say(f"  interface  {st['interface']}" + (f"  address {st['address']}" if st.get("address") else ""))
    out.say(f"  tftp root  {st['tftp_root']}" + (f"  port {st['tftp_port']}" if st["tftp_port"] != 69 else ""))
    _served(st, out)
    out.say(f"  log        {st['log']}")


def _served(st: dict, out: Output) -> None:
    """The recent leases, DHCP acks and TFTP files of ``status``."""
    for lease in st["leases"]:
        expires = time.strftime("%H:%M:%S", time.localtime(lease["expires"]))
        out.say(f"  lease      {lease['ip']}  {lease['mac']}  {lease['hostname'] or '-'}  (expires {expires})")
    for ack in st["dhcp"]:
        out.say(f"  dhcp       {ack['time']}  {ack['ip']}  {ack['mac']}")
    for f in st["files"]:
        to = f" to {f['client']}" if f["client"] else ""
        out.say(f"  tftp       {f['time']}  {f['result']}  {f['file']}{to}")
    if not (st["leases"] or st["dhcp"] or st["files"]):
        out.say("  no leases or files served yet")


@command("netboot.stage", output=STAGED)
def stage(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    staged = call("netboot.stage", {"target": target, "netboot": opts["netboot"], **passed("netboot.stage", opts)})
    if opts.get("json"):
        out.json(staged)
    else:
        out.say(f"netboot {target}: staged {staged['source']} as {staged['path']} ({staged['bytes']} bytes, "
                f"sha256 {staged['sha256']})")
