"""netboot and netif against real peers in network namespaces: dnsmasq, busybox udhcpc and tftp.

The wire, built per module in namespaces of its own (the host's links are never touched):

    host ns                 wire ns (bridge br0)             target ns
    nb0 (netboot link) ---- nbp ]
                                 br0 --- tgtp ------------- tgt0 (the board's NIC)
    up0 192.0.2.10/24 ----- upp      (the host's "primary": default route)
    ex0 10.99.0.1/24 ------ exp      (a link carrying another network)

panio runs inside the host namespace (`ip netns exec`). The bridge models a USB
adapter whose PHY stays lit: taking nb0 down (`netif mode off`) leaves tgt0's
carrier up, the Wake-on-LAN case; the hard-down hook takes tgtp down, which
tgt0 sees as link loss, the way cutting the adapter's power does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench_agent.process import pid_alive
from conftest import PANIO, Panio, Result
from jobhelp import wait_for, wait_gone

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("dnsmasq") or not shutil.which("busybox"),
                                reason="needs root, dnsmasq and busybox (scripts/system-deps.sh installs them in CI)")

SUFFIX = str(os.getpid())
HOST, WIRE, TGT = f"pnb-h{SUFFIX}", f"pnb-w{SUFFIX}", f"pnb-t{SUFFIX}"
UDHCPC_SCRIPT = ('#!/bin/sh\n[ "$1" = bound ] && echo "$ip $mask $siaddr" > "$(dirname "$0")/lease.txt"\n'
                 '[ "$1" = bound ] && echo "$opt43" > "$(dirname "$0")/opt43.txt"\nexit 0\n')
# what a Raspberry Pi's bootloader sends: PXE vendor class, client architecture 0
PI_DHCP = ("-V", "PXEClient:Arch:00000:UNDI:002001", "-x", "0x5d:0000", "-O", "43")


def sh(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)


def in_target(*argv: str, **kw) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", TGT, *argv, **kw)


def carrier(ns: str, iface: str) -> bool:
    out = sh("ip", "-n", ns, "-j", "link", "show", iface).stdout
    return "NO-CARRIER" not in json.loads(out)[0]["flags"]


def build_wire() -> None:
    for ns in (HOST, WIRE, TGT):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    # the wire is only a wire: no IPv6 of its own to answer the all-nodes probe beside the target
    sh("ip", "netns", "exec", WIRE, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
       "net.ipv6.conf.default.disable_ipv6=1")
    sh("ip", "-n", WIRE, "link", "add", "br0", "type", "bridge")
    for here, peer, ns in (("nb0", "nbp", HOST), ("up0", "upp", HOST), ("ex0", "exp", HOST), ("tgt0", "tgtp", TGT)):
        sh("ip", "-n", WIRE, "link", "add", peer, "type", "veth", "peer", "name", here, "netns", ns)
        sh("ip", "-n", WIRE, "link", "set", peer, "up")
    for port in ("nbp", "tgtp"):
        sh("ip", "-n", WIRE, "link", "set", port, "master", "br0")
    sh("ip", "-n", WIRE, "link", "set", "br0", "up")
    sh("ip", "-n", HOST, "addr", "add", "192.0.2.10/24", "dev", "up0")
    sh("ip", "-n", HOST, "link", "set", "up0", "up")
    sh("ip", "-n", HOST, "route", "add", "default", "via", "192.0.2.1")
    sh("ip", "-n", HOST, "addr", "add", "10.99.0.1/24", "dev", "ex0")
    sh("ip", "-n", HOST, "link", "set", "ex0", "up")
    sh("ip", "-n", TGT, "link", "set", "tgt0", "up")


class NsPanio(Panio):
    """The real panio executable, run inside the host namespace."""

    def __call__(self, *args: str, check: bool = True, timeout: float = 60, input: str | None = None) -> Result:
        p = subprocess.run(["ip", "netns", "exec", HOST, PANIO, *args], capture_output=True, text=True,
                           env=self.env, timeout=timeout, stdin=subprocess.DEVNULL)
        r = Result(p.returncode, p.stdout, p.stderr)
        if check and r.code != 0:
            raise AssertionError(f"panio {' '.join(args)} exited {r.code}\nstdout: {r.out}\nstderr: {r.err}")
        return r


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("netns")
    (tmp / "home").mkdir()
    root = tmp / "tftp"
    (root / "boot").mkdir(parents=True)
    (root / "boot" / "kernel_2712.img").write_bytes(os.urandom(300_000))
    build_wire()
    p = NsPanio(tmp)
    p("init")
    p("target", "add", "pico")
    p("netboot", "set", "-t", "pico", "--interface", "nb0", "--tftp-root", str(root), "--hard-down", "hook",
      "--hard-down-cmd", f"ip -n {WIRE} link set tgtp down", "--hard-up-cmd", f"ip -n {WIRE} link set tgtp up")
    try:
        yield p, tmp
    finally:
        _stop_daemons(p.state)
        for ns in (TGT, WIRE, HOST):
            sh("ip", "netns", "del", ns, check=False)


def _stop_daemons(state: Path) -> None:
    for f in (state / "daemons").glob("*.json"):
        pid = json.loads(f.read_text()).get("pid")
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, TypeError):
            pass


def test_dnsmasq_gives_a_lease_and_serves_the_kernel(bench) -> None:
    p, tmp = bench
    started = p("netboot", "start", "pico", "--json").json()
    assert started["server"] == "dnsmasq" and started["interface"] == "nb0" and not started["already_running"]
    assert p("netboot", "start", "pico", "--json").json()["already_running"]
    daemons = p("daemons", "--json").json()
    assert [d["name"] for d in daemons if d["state"] == "running"] == ["netboot-pico"]

    (tmp / "udhcpc.sh").write_text(UDHCPC_SCRIPT)
    (tmp / "udhcpc.sh").chmod(0o755)
    in_target("busybox", "udhcpc", "-i", "tgt0", "-n", "-q", "-t", "10", "-T", "1", "-s", str(tmp / "udhcpc.sh"),
              *PI_DHCP)
    ip, mask, server = (tmp / "lease.txt").read_text().split()
    # DHCP option 43 carries the PXE menu text the Pi's bootloader insists on
    assert "Raspberry Pi Boot".encode().hex() in (tmp / "opt43.txt").read_text().strip().lower()
    assert ip.startswith("10.233.0.") and server == "10.233.0.1"
    in_target("ip", "addr", "add", f"{ip}/{mask}", "dev", "tgt0")
    in_target("busybox", "tftp", "-g", "-b", "1400", "-r", "boot/kernel_2712.img", "-l", str(tmp / "got.img"), server)
    assert (tmp / "got.img").read_bytes() == (tmp / "tftp" / "boot" / "kernel_2712.img").read_bytes()
    in_target("busybox", "tftp", "-g", "-r", "start4.elf", "-l", str(tmp / "missing"), server, check=False)

    st = p("netboot", "status", "pico", "--json").json()
    assert st["serving"] and st["interface"] == "nb0" and st["tftp_root"] == str(tmp / "tftp")
    assert [lease["ip"] for lease in st["leases"]] == [ip]
    sent = [f for f in st["files"] if f["result"] == "sent"]
    assert sent[-1]["file"].endswith("boot/kernel_2712.img") and sent[-1]["client"] == ip
    assert any(f["result"] == "not found" and f["file"].endswith("start4.elf") for f in st["files"])
    human = p("netboot", "status", "pico").out
    assert "serving with dnsmasq" in human and ip in human and "not found" in human
    conf = (p.state / "netboot" / "pico" / "dnsmasq.conf").read_text()
    assert "interface=nb0" in conf and 'pxe-service=0,"Raspberry Pi Boot"' in conf


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return out


def test_the_daemon_restarts_dnsmasq_and_takes_it_along_when_killed(bench) -> None:
    p, tmp = bench
    daemon = p("netboot", "status", "pico", "--json").json()["pid"]
    [first] = children(daemon)
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: [c for c in children(daemon) if c != first and pid_alive(c)], timeout_s=60)  # restarted
    [second] = [c for c in children(daemon) if pid_alive(c)]
    assert "died; restarting" in (p.state / "netboot" / "pico" / "daemon.err").read_text()
    os.kill(daemon, signal.SIGKILL)
    wait_gone(daemon)
    assert p("netboot", "status", "pico", "--json").json()["serving"] is False
    assert [d["state"] for d in p("daemons", "--json").json()] == ["stale"]
    # a dnsmasq orphaned by the kill is found by its pid file and stopped, so the link is free again
    assert p("netboot", "stop", "pico", "--json").json()["orphan_pid"] in (second, None)
    wait_gone(second, what="dnsmasq outlived its supervisor and netboot stop")
    assert not p("netboot", "start", "pico", "--json").json()["already_running"]


def test_ffx_stops_netboot_and_status_finds_the_link_local(bench) -> None:
    p, _ = bench
    r = p("netif", "mode", "ffx", "pico", "--json").json()
    assert r["netboot_stopped"] is True
    assert not p("netboot", "status", "pico", "--json").json()["serving"]
    assert not [d for d in p("daemons", "--json").json() if d["state"] == "running"]
    # the address panio put on nb0 for DHCP went with the server
    assert "10.233.0.1/24" not in p("netif", "status", "pico", "--json", "--no-probe").json()["addresses"]
    peer = json.loads(sh("ip", "-n", TGT, "-j", "-6", "addr", "show", "dev", "tgt0", "scope", "link").stdout)
    want = peer[0]["addr_info"][0]["local"]
    deadline = time.monotonic() + 20  # DAD keeps a fresh link-local tentative for a second or two
    while True:
        st = p("netif", "status", "pico", "--json").json()
        if st["target_link_local"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert st["mode"] == "ffx" and st["carrier"] and st["admin_up"]
    assert st["target_link_local"] == want and st["ffx"] == f"ffx target add {want}%nb0"
    assert f"ffx target add {want}%nb0" in p("netif", "status", "pico").out


def test_soft_down_leaves_the_far_carrier_hard_down_drops_it(bench) -> None:
    p, _ = bench
    p("netif", "mode", "link", "pico")
    assert carrier(TGT, "tgt0")
    p("netif", "mode", "off", "pico")
    st = p("netif", "status", "pico", "--json").json()
    assert st["mode"] == "off" and not st["admin_up"]
    assert carrier(TGT, "tgt0"), "a soft down must leave the PHY lit (the Wake-on-LAN case)"
    r = p("netif", "down-hard", "pico", "--json").json()
    assert r["hard_down"]["backend"] == "hook"
    assert not carrier(TGT, "tgt0"), "down-hard must make the target see link loss"
    assert p("netif", "status", "pico", "--json").json()["mode"] == "down-hard"
    r = p("netif", "mode", "link", "pico", "--json").json()
    assert r["hard_up"]["backend"] == "hook"
    assert carrier(TGT, "tgt0")
    st = p("netif", "status", "pico", "--json", "--no-probe").json()
    assert st["mode"] == "link" and st["admin_up"] and st["carrier"]


def test_primary_nic_and_a_link_with_other_addresses_are_refused(bench) -> None:
    p, tmp = bench
    p("target", "add", "office")
    p("netboot", "set", "-t", "office", "--interface", "up0", "--tftp-root", str(tmp / "tftp"))
    lab_before = p.lab.read_text()
    r = p.fails("netboot", "start", "office", code=13)
    assert r.error["error"] == "refused" and "primary NIC" in r.error["message"]
    assert "default route" in r.error["message"]
    report = p("doctor", "--json", check=False).json()["targets"]
    office = {row["item"]: row for row in report["office"]}
    assert office["interface"]["status"] == "problem" and "default route" in office["interface"]["detail"]
    pico = {row["item"]: row for row in report["pico"]}
    assert pico["interface"]["status"] == "ok" and pico["server"]["status"] == "ok"
    p("netboot", "set", "-t", "office", "--interface", "ex0")
    r = p.fails("netboot", "start", "office", code=13)
    assert "10.99.0.1/24" in r.error["message"]
    p("netboot", "set", "-t", "office", "--interface", "nope0")
    r = p.fails("netboot", "start", "office", code=3)
    assert "nope0" in r.error["message"] and "nb0" in r.error["message"]
    assert not (p.state / "daemons" / "netboot-office.json").exists()
    assert p("netboot", "status", "office", "--json").json()["serving"] is False
    assert p.lab.read_text().count("[targets.office.netboot]") == 1 and "office" in lab_before
