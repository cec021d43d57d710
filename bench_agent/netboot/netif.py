"""A target's dedicated link (the netboot interface): its mode, a hard down, and what is on the wire.

Modes (``netif mode``):

    link       the bare link up (after a hard down: the adapter's power restored first)
    ffx        netboot stopped (they are exclusive: a power-cycle then falls through
               to SD), link up with IPv6 so the target's fe80:: address answers
    off        administrative down: soft, the carrier may stay up (Wake-on-LAN
               keeps the PHY powered), so the target may not notice
    down-hard  (``netif down-hard``) the adapter's power cut (``netif_backends``):
               the target sees link loss

The last mode set is kept in ``<state>/netif/<target>.json`` with what a hard
down needs to undo itself; the link's real state always comes from netlink.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import struct
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_agent.errors import NotConfigured
from bench_agent.netboot import links as netif_links
from bench_agent.paths import lab_state_dir as state_dir  # a lab's targets' records

MODES = ("link", "ffx", "off")
REAPPEAR_S = 15.0  # a USB adapter re-enumerates after its port is powered again
PROBE_S = 1.0


def record_path(target: str) -> Path:
    return state_dir() / "netif" / f"{target}.json"


def recorded(target: str) -> dict[str, Any]:
    try:
        return json.loads(record_path(target).read_text())
    except (FileNotFoundError, ValueError):
        return {}


def record(target: str, mode: str, **extra: Any) -> None:
    path = record_path(target)
    from bench_agent.private import private_dir, write_private

    private_dir(path.parent)
    data = {"mode": mode, "changed": datetime.now(timezone.utc).isoformat(timespec="seconds"), **extra}
    write_private(path, (json.dumps(data) + "\n").encode())


def _stop_netboot(target: str) -> bool:
    from bench_agent.netboot import channel as netboot

    return netboot.stop(target)["was_running"]


def set_mode(target: str, netboot_cfg: dict[str, Any], mode: str) -> dict[str, Any]:
    iface = netboot_cfg["interface"]
    out: dict[str, Any] = {"target": target, "interface": iface, "mode": mode}
    if mode in ("ffx", "off"):
        out["netboot_stopped"] = _stop_netboot(target)
    if mode == "off":
        netif_links.set_admin(iface, False)
        record(target, mode)
        return out
    before = recorded(target)
    if before.get("mode") == "down-hard":
        from bench_agent.netboot.netif_backends import make

        out["hard_up"] = make(target, netboot_cfg).up(before.get("hard_down") or {})
        _wait_for(iface)
    if mode == "ffx":
        _enable_ipv6(iface)
    netif_links.set_admin(iface, True)
    record(target, mode)
    return out


def down_hard(target: str, netboot_cfg: dict[str, Any]) -> dict[str, Any]:
    from bench_agent.netboot.netif_backends import make

    before = recorded(target)
    iface = netboot_cfg["interface"]
    if before.get("mode") == "down-hard" and iface not in netif_links.names():  # its adapter is already off
        return {"target": target, "interface": iface, "mode": "down-hard", "netboot_stopped": False,
                "hard_down": before.get("hard_down") or {}, "already": True}
    stopped = _stop_netboot(target)
    done = make(target, netboot_cfg).down()
    record(target, "down-hard", hard_down=done)
    return {"target": target, "interface": netboot_cfg["interface"], "mode": "down-hard", "netboot_stopped": stopped,
            "hard_down": done}


def _wait_for(iface: str) -> None:
    deadline = time.monotonic() + REAPPEAR_S
    while iface not in netif_links.names():
        if time.monotonic() > deadline:
            raise NotConfigured(f"{iface} did not come back within {REAPPEAR_S:.0f} s of powering its port",
                                interface=iface)
        time.sleep(0.2)


def _enable_ipv6(iface: str) -> None:
    # ffx reaches the target over IPv6 link-local; a host that disabled IPv6 on the link would hide it.
    path = Path(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6")
    try:
        if path.read_text().strip() != "0":
            path.write_text("0")
    except OSError:
        pass


def status(target: str, netboot_cfg: dict[str, Any], probe: bool = True) -> dict[str, Any]:
    from bench_agent.netboot import channel as netboot

    iface = netboot_cfg["interface"]
    mode = recorded(target).get("mode")
    out: dict[str, Any] = {"target": target, "interface": iface, "mode": mode,
                           "netboot_serving": netboot.discovery(target) is not None}
    try:
        link = netif_links.link(iface)
    except NotConfigured:
        if mode != "down-hard":  # a wrong name in the lab, or an unplugged adapter: a problem to report
            raise
        return {**out, "present": False, "admin_up": False, "carrier": False, "addresses": [], "neighbours": [],
                "target_link_local": None, "ffx": None,
                "note": f"{iface} is absent: its adapter is powered off (down-hard); `panio netif mode link "
                        f"{target}` brings it back"}
    own = {a.split("/")[0] for a in link["addresses"]}
    peers = _probe(link["index"], own) if probe and link["admin_up"] and link["carrier"] else []
    neigh = [n["address"] for n in netif_links.link_local_neighbours(iface) if n["address"] not in own]
    found = peers + [a for a in neigh if a not in peers]
    ll = found[0] if found else None
    return {**out, "present": True, "admin_up": link["admin_up"], "carrier": link["carrier"],
            "operstate": link["operstate"], "mac": link["mac"], "addresses": link["addresses"], "neighbours": found,
            "target_link_local": ll, "ffx": f"ffx target add {ll}%{iface}" if ll else None}


def _probe(ifindex: int, own: set[str]) -> list[str]:
    """Link-local addresses that answer an ICMPv6 echo to all-nodes (ff02::1) on the link, in reply order."""
    sock = _icmp6_socket()
    if sock is None:
        return []
    found: list[str] = []
    with sock:
        ident = os.getpid() & 0xFFFF
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, ifindex)
        try:
            sock.sendto(struct.pack("!BBHHH", 128, 0, 0, ident, 1) + b"panio", ("ff02::1", 0, 0, ifindex))
        except OSError:
            return []
        deadline = time.monotonic() + PROBE_S
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data, addr = sock.recvfrom(1500)
            except (socket.timeout, OSError):
                break
            source = addr[0].split("%")[0]
            if data[:1] == b"\x81" and ipaddress.ip_address(source).is_link_local and source not in own | set(found):
                found.append(source)
    return found


def _icmp6_socket() -> socket.socket | None:
    for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW):  # a ping socket if allowed, else raw (root)
        try:
            return socket.socket(socket.AF_INET6, kind, socket.IPPROTO_ICMPV6)
        except OSError:
            continue
    return None



