"""This host's network links over netlink (pyroute2): state, addresses, routes, neighbours.

Everything netboot and netif need from the kernel, read and changed through
netlink rather than by parsing `ip` output. pyroute2 is imported inside the
functions, so a process that never touches a link does not pay for it.
Netlink errors become panio errors here, at the boundary.
"""

from __future__ import annotations

import ipaddress
import socket
from contextlib import contextmanager
from typing import Any, Iterator

from bench_agent.errors import DeviceError, NotConfigured, Refused

AF_INET, AF_INET6 = socket.AF_INET, socket.AF_INET6
IFF_UP = 0x1
RT_TABLE_MAIN = 254


@contextmanager
def netlink() -> Iterator[Any]:
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        with IPRoute() as ipr:
            yield ipr
    except NetlinkError as exc:
        if exc.code == 1:  # EPERM
            raise Refused(f"changing a network link needs root or CAP_NET_ADMIN ({exc})",
                          hint="run panio's bench agent as root, or grant it CAP_NET_ADMIN") from None
        raise DeviceError(f"netlink: {exc}") from None


def names() -> list[str]:
    with netlink() as ipr:
        return sorted(link.get_attr("IFLA_IFNAME") for link in ipr.get_links())


def index(ipr: Any, name: str) -> int:
    found = ipr.link_lookup(ifname=name)
    if not found:
        known = ", ".join(n for n in names() if n != "lo") or "none"
        raise NotConfigured(f"network interface {name!r} not found on this host (interfaces: {known})",
                            hint="`panio discover` lists this host's links; fix it with `panio netboot set`",
                            interface=name)
    return found[0]


def link(name: str) -> dict[str, Any]:
    """Admin state, carrier, operstate, MAC and addresses of ``name``."""
    with netlink() as ipr:
        idx = index(ipr, name)
        info = ipr.get_links(idx)[0]
        addrs = [_cidr(a) for a in ipr.get_addr(index=idx)]
    return {"interface": name, "index": idx, "admin_up": bool(info["flags"] & IFF_UP),
            "carrier": info.get_attr("IFLA_CARRIER") == 1, "operstate": info.get_attr("IFLA_OPERSTATE"),
            "mac": info.get_attr("IFLA_ADDRESS"), "addresses": addrs}


def _cidr(msg: Any) -> str:
    return f"{msg.get_attr('IFA_ADDRESS')}/{msg['prefixlen']}"


def default_route_interfaces() -> set[str]:
    """Interfaces that carry a default route (IPv4 or IPv6) in the main table: this host's primary NICs."""
    out = set()
    with netlink() as ipr:
        by_index = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        for family in (AF_INET, AF_INET6):
            for route in ipr.get_routes(family=family, table=RT_TABLE_MAIN):
                if route["dst_len"] == 0 and route.get_attr("RTA_DST") is None:
                    out.update(by_index.get(i) for i in _oifs(route))
    out.discard(None)
    return out


def _oifs(route: Any) -> list[int]:
    oif = route.get_attr("RTA_OIF")
    if oif is not None:
        return [oif]
    return [hop["oif"] for hop in route.get_attr("RTA_MULTIPATH") or []]


def routes_via(name: str) -> list[str]:
    """The IPv4 routes of the main table that leave through ``name``, as `DST/LEN` (gateway noted)."""
    with netlink() as ipr:
        idx = index(ipr, name)
        out = []
        for route in ipr.get_routes(family=AF_INET, table=RT_TABLE_MAIN):
            if idx in _oifs(route):
                dst = f"{route.get_attr('RTA_DST') or '0.0.0.0'}/{route['dst_len']}"
                gw = route.get_attr("RTA_GATEWAY")
                out.append(f"{dst} via {gw}" if gw else dst)
    return out


def set_admin(name: str, up: bool) -> None:
    with netlink() as ipr:
        ipr.link("set", index=index(ipr, name), state="up" if up else "down")


def add_address(name: str, cidr: str) -> bool:
    """Put ``cidr`` on ``name``; False when it was already there."""
    iface = ipaddress.ip_interface(cidr)
    if cidr in link(name)["addresses"]:
        return False
    with netlink() as ipr:
        ipr.addr("add", index=index(ipr, name), address=str(iface.ip), prefixlen=iface.network.prefixlen)
    return True


def remove_address(name: str, cidr: str) -> None:
    iface = ipaddress.ip_interface(cidr)
    with netlink() as ipr:
        found = ipr.link_lookup(ifname=name)
        if found and cidr in [_cidr(a) for a in ipr.get_addr(index=found[0])]:
            ipr.addr("del", index=found[0], address=str(iface.ip), prefixlen=iface.network.prefixlen)


def link_local_neighbours(name: str) -> list[dict[str, Any]]:
    """IPv6 link-local (fe80::/10) neighbours of ``name`` from the kernel's neighbour table."""
    with netlink() as ipr:
        idx = index(ipr, name)
        out = []
        for n in ipr.get_neighbours(family=AF_INET6, ifindex=idx):
            dst = n.get_attr("NDA_DST")
            if dst and ipaddress.ip_address(dst).is_link_local and n.get_attr("NDA_LLADDR"):
                out.append({"address": dst, "mac": n.get_attr("NDA_LLADDR"), "state": n["state"]})
    return out
