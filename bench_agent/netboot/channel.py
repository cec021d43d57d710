"""Network boot of one target: DHCP and TFTP on its dedicated link, run by a supervised daemon.

    <state>/netboot/<target>/dnsmasq.conf   panio's own dnsmasq config (rewritten at each start)
    <state>/netboot/<target>/leases         dnsmasq's DHCP leases
    <state>/netboot/<target>/server.log     what the server did: leases given, files sent or missing
    <state>/netboot/<target>/daemon.err     the supervisor's own stderr
    <state>/daemons/netboot-<target>.json   discovery file of the running supervisor

Two servers (``bench_agent.netboot.backends``): ``dnsmasq`` (DHCP + TFTP,
needs root) and ``panio`` (panio's own TFTP server only, no root needed above
port 1023: QEMU user networking, or a link whose DHCP is someone else's).

The one refusal that matters most: panio never serves DHCP on the control
host's primary NIC. A DHCP server there answers every machine on the office
LAN. ``check_interface`` refuses the interface of a default route, and any
interface that carries addresses or routes other than panio's own.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from pathlib import Path
from typing import Any

from bench_agent.errors import NotConfigured, Refused
from bench_agent.netboot.settings import Settings
from bench_agent.paths import lab_state_dir as state_dir  # every netboot path is a lab's
from bench_agent.private import private_dir
from bench_agent.process import start_daemon

MODULE = "bench_agent.netboot.daemon"
START_TIMEOUT_S = 30.0  # python, pyroute2 and dnsmasq starting on a loaded host
RPI5_NOTE = ("Raspberry Pi 5: the kernel file is kernel_2712.img; panio answers its bootloader with "
             "DHCP option 43 \"Raspberry Pi Boot\" unless a boot file is set")


def target_dir(target: str, state: Path | None = None) -> Path:
    return (state or state_dir()) / "netboot" / target


def discovery_path(target: str, state: Path | None = None) -> Path:
    return (state or state_dir()) / "daemons" / f"netboot-{target}.json"


def check_interface(s: Settings) -> None:
    """Refuse an interface panio must not serve on (see the module docstring)."""
    from bench_agent.netboot import links as netif_links

    if s.loopback:
        if s.server != "panio":
            raise Refused("DHCP on the loopback interface reaches no board; `lo` is for panio's TFTP server "
                          "(QEMU user networking)", hint=f"panio netboot set -t {s.target} --server panio")
        return
    link = netif_links.link(s.interface)  # NotConfigured when it is not there
    primary = netif_links.default_route_interfaces()
    why = _primary_reason(s, link, primary, netif_links.routes_via(s.interface))
    if why:
        raise Refused(f"{s.interface} looks like this host's primary NIC ({why}); netboot serves DHCP/TFTP only "
                      "on a link dedicated to the target, never the primary NIC (a DHCP server there would "
                      "answer the whole LAN)", hint=f"wire the target to its own interface and "
                      f"`panio netboot set -t {s.target} --interface IFACE`", interface=s.interface, reason=why)


def _primary_reason(s: Settings, link: dict[str, Any], primary: set[str], routes: list[str]) -> str | None:
    if s.interface in primary:
        return "it carries the default route"
    own = ipaddress.ip_interface(s.address)
    others = [a for a in link["addresses"]
              if a != s.address and not ipaddress.ip_interface(a).ip.is_link_local]
    if others:
        return f"it carries other addresses: {', '.join(others)}"
    foreign = [r for r in routes if r.split()[0] != str(own.network)]
    if foreign:
        return f"it carries other routes: {', '.join(foreign)}"
    return None


def served_root(s: Settings) -> str:
    """The real folder ``s`` serves, refused (13) when it is a file, a system folder or a home directory, whatever
    symlink leads there (``values.served_root``); a missing folder is the caller's to report."""
    from bench_agent.netboot import values

    try:
        return values.served_root(s.tftp_root)
    except values.BadValue as exc:
        raise Refused(f"netboot of {s.target!r}: {exc}", target=s.target, tftp_root=s.tftp_root) from None


# -- the daemon, seen from outside ---------------------------------------------------------------


def discovery(target: str, state: Path | None = None) -> dict[str, Any] | None:
    """The running supervisor's discovery record, or None."""
    from bench_agent.process import pid_alive
    from bench_agent.serial.device import command_line

    try:
        info = json.loads(discovery_path(target, state).read_text())
    except (FileNotFoundError, ValueError):
        return None
    pid = info.get("pid", -1)
    return info if pid_alive(pid) and MODULE in command_line(pid) else None


def start(s: Settings) -> dict[str, Any]:
    """Start serving for ``s.target`` (refusing a primary NIC); already serving is not an error."""
    info = discovery(s.target)
    if info is not None:
        return {**info, "already_running": True}
    check_interface(s)
    served_root(s)
    if not os.path.isdir(s.tftp_root):
        raise NotConfigured(f"TFTP root {s.tftp_root} does not exist", hint=f"mkdir -p {s.tftp_root} and copy the "
                            "boot files there (`panio netboot tftp-root` prints it)", tftp_root=s.tftp_root)
    state = state_dir()
    folder = target_dir(s.target, state)
    private_dir(folder)  # this user's alone, its parents too, whatever the umask (bench_agent.private)
    reply = start_daemon(MODULE, "the netboot server", state=state, target=s.target, config=s.to_json(),
                         log=folder / "daemon.err", timeout_s=START_TIMEOUT_S)
    return {**reply["info"], "already_running": False}


def stop(target: str, force: bool = False) -> dict[str, Any]:
    """Stop the target's netboot server; not running is reported, not an error."""
    from bench_agent.serial.client import terminate

    info = discovery(target)
    if info is None:
        from bench_agent.netboot.backends.dnsmasq import reap_orphan

        discovery_path(target).unlink(missing_ok=True)
        orphan = reap_orphan(target_dir(target))  # its supervisor was killed (kill -9)
        return {"target": target, "stopped": orphan is not None, "was_running": False, "orphan_pid": orphan}
    how = terminate(info["pid"], f"netboot server of {target!r}", f"netboot-{target}", force)
    discovery_path(target).unlink(missing_ok=True)
    return {"target": target, "stopped": True, "was_running": True, "pid": info["pid"], "how": how}


# -- what it did, from its log and leases ---------------------------------------------------------

_LOG = re.compile(r"^(?P<time>\w{3} [ \d]\d \d\d:\d\d:\d\d) [\w-]+\[\d+\]: (?P<text>.*)$")
_SENT = re.compile(r"^sent (?P<path>.+) to (?P<client>\S+)$")
_MISSING = re.compile(r"^file (?P<path>.+) not found")
_ACK = re.compile(r"^(?:\d+ )?DHCPACK\((?P<iface>[^)]+)\) (?P<ip>\S+) (?P<mac>\S+)(?: (?P<host>\S+))?$")


def read_log(path: Path, tail: int) -> dict[str, list[dict[str, str]]]:
    """The last ``tail`` files served or missing and DHCP acknowledgements in a server log."""
    files: list[dict[str, str]] = []
    acks: list[dict[str, str]] = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        m = _LOG.match(line)
        if not m:
            continue
        text, when = m["text"].strip(), m["time"]
        if sent := _SENT.match(text):
            files.append({"time": when, "file": sent["path"], "client": sent["client"], "result": "sent"})
        elif missing := _MISSING.match(text):
            files.append({"time": when, "file": missing["path"], "client": None, "result": "not found"})
        elif ack := _ACK.match(text):
            acks.append({"time": when, "ip": ack["ip"], "mac": ack["mac"], "hostname": ack["host"]})
    return {"files": files[-tail:], "dhcp": acks[-tail:]}


def read_leases(path: Path) -> list[dict[str, Any]]:
    """dnsmasq's leases file: one `EXPIRY MAC IP HOSTNAME CLIENT-ID` line per lease."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        words = line.split()
        if len(words) >= 4 and words[0].isdigit():
            out.append({"expires": int(words[0]), "mac": words[1], "ip": words[2],
                        "hostname": None if words[3] == "*" else words[3]})
    return out


def status(s: Settings, tail: int = 10) -> dict[str, Any]:
    info = discovery(s.target)
    folder = target_dir(s.target)
    seen = read_log(folder / "server.log", tail)
    return {"target": s.target, "serving": info is not None, "pid": info and info["pid"],
            "server": (info or {}).get("server", s.server), "interface": s.interface,
            "address": (info or {}).get("address", None if s.loopback else s.address),
            "tftp_root": s.tftp_root, "tftp_port": (info or {}).get("tftp_port", s.tftp_port),
            "leases": read_leases(folder / "leases"), "dhcp": seen["dhcp"], "files": seen["files"],
            "log": str(folder / "server.log"), "started": (info or {}).get("started")}


# -- doctor --------------------------------------------------------------------------------------


def _serving() -> list[dict[str, Any]]:
    """Discovery records of this state dir's running netboot daemons."""
    names = [p.name.removeprefix("netboot-").removesuffix(".json")
             for p in (state_dir() / "daemons").glob("netboot-*.json")]
    return [info for info in map(discovery, names) if info is not None]


def doctor_rows(netboot: dict[str, Any], tftp_root: str) -> list[tuple[str, str, str]]:
    """(item, status, detail) rows for `panio doctor`: the link, the TFTP root, whether the server can run."""
    s = Settings.of("doctor", netboot, tftp_root)
    try:
        check_interface(s)
        rows = [("interface", "ok", f"{s.interface} present and dedicated (no default route, no other addresses)")]
    except NotConfigured as exc:
        rows = [("interface", "missing", exc.message)]
    except Refused as exc:
        rows = [("interface", "problem", exc.message)]
    try:
        served_root(s)
        ok = os.path.isdir(s.tftp_root)
        rows.append(("tftp_root", "ok" if ok else "missing", f"{s.tftp_root} {'exists' if ok else 'does not exist'}"))
    except Refused as exc:
        rows.append(("tftp_root", "problem", exc.message))
    if netboot.get("stage_from"):
        rows.append(("stage_from", *_stage_from_check(netboot["stage_from"])))
    if rows[0][1] != "ok":
        return rows + [("server", "unchecked", "checked once the interface is right")]
    return rows + [("server", *_server_check(s))]


def _stage_from_check(given: str) -> tuple[str, str]:
    """The folder ``netboot stage`` takes files from, as a stage would find it here: allowed, a folder, readable."""
    from bench_agent.netboot import values

    try:
        real = values.stage_root(given)
    except values.BadValue as exc:
        return "problem", str(exc)
    where = given if real == given else f"{given} ({real})"
    if not os.path.isdir(real):
        return "missing", f"{where} does not exist: `panio netboot stage` refuses until it does"
    if not os.access(real, os.R_OK | os.X_OK):
        return "problem", f"{where} cannot be read by this user: `panio netboot stage` cannot take files from it"
    return "ok", f"{where} exists; `panio netboot stage` takes files from below it"


def _server_check(s: Settings) -> tuple[str, str]:
    import shutil
    import socket

    if s.server == "dnsmasq":
        if not (shutil.which("dnsmasq") or shutil.which("dnsmasq", path="/usr/sbin:/sbin")):
            return "missing", "dnsmasq is not installed (apt-get install dnsmasq-base)"
        if os.geteuid() != 0:
            return "problem", "dnsmasq needs root here (DHCP port 67); or `--server panio` for TFTP only"
    host = "127.0.0.1" if s.loopback else str(ipaddress.ip_interface(s.address).ip)
    if any(info.get("interface") == s.interface for info in _serving()):
        return "ok", f"panio's netboot server is serving on {s.interface}"
    ports = (67, 69) if s.server == "dnsmasq" else (s.tftp_port,)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                if not s.loopback:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, s.interface.encode())
                sock.bind((host if s.loopback else "0.0.0.0", port))
            except OSError as exc:
                return "problem", f"cannot bind UDP port {port} on {s.interface}: {exc.strerror} (another server?)"
    return "ok", f"{s.server} can bind UDP port{'s' if len(ports) > 1 else ''} {', '.join(map(str, ports))} on {s.interface}"
