"""netboot and netif at the command line: help, refusals and bad input (documented exit codes, files unchanged)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_agent import ops
from bench_agent.errors import UsageError
from bench_agent.netboot.backends.dnsmasq import config_text
from bench_agent.netboot.settings import Settings
from conftest import lab


@pytest.fixture
def pi(panio, tmp_path: Path):
    panio("init")
    panio("target", "add", "pico")
    return panio


def test_help_names_the_pi5_kernel_option_43_and_the_refusal(panio) -> None:
    text = panio("netboot", "start", "--help").out
    assert "kernel_2712.img" in text and "Raspberry Pi Boot" in text and "primary NIC" in text
    assert "example:" in text and "see also:" in text
    text = panio("netif", "--help").out
    assert "Wake-on-LAN" in text and "down-hard" in text
    assert "ffx target add fe80::" in panio("netif", "status", "--help").out
    top = panio("--help").out
    assert "netif" in top and "netboot" in top


def test_set_stores_the_new_fields_and_rejects_bad_ones(pi) -> None:
    pi("netboot", "set", "-t", "pico", "--interface", "en7", "--server", "panio", "--tftp-port", "6969",
       "--address", "10.9.0.1/24", "--hard-down", "uhubctl", "--usb-port", "1-1.2")
    nb = lab(pi)["targets"]["pico"]["netboot"]
    assert nb == {"interface": "en7", "server": "panio", "tftp_port": 6969, "address": "10.9.0.1/24",
                  "hard_down": "uhubctl", "usb_port": "1-1.2"}
    before = pi.lab.read_text()
    for argv in (["--address", "nonsense"], ["--address", "10.9.0.1/31"], ["--address", "fe80::1/64"],
                 ["--tftp-port", "70000"], ["--server", "tftpd"], ["--hard-down", "magic"]):
        pi.fails("netboot", "set", "-t", "pico", *argv, code=2)
    assert pi.lab.read_text() == before
    pi("netboot", "set", "-t", "pico", "--usb-port", "")
    assert "usb_port" not in lab(pi)["targets"]["pico"]["netboot"]


def test_a_bad_value_in_the_lab_file_is_config_invalid(pi) -> None:
    pi("netboot", "set", "-t", "pico", "--interface", "en7")
    pi.lab.write_text(pi.lab.read_text() + 'server = "tftpd"\n')
    r = pi.fails("netboot", "status", "pico", code=5)
    assert "server" in r.error["message"]


def test_runtime_commands_need_a_netboot_channel(pi) -> None:
    for argv in (["netboot", "start", "pico"], ["netboot", "status", "pico"], ["netif", "status", "pico"],
                 ["netif", "mode", "link", "pico"], ["netif", "down-hard", "pico"]):
        r = pi.fails(*argv, code=3)
        assert "netboot" in r.error["message"] and "panio netboot set -t pico" in r.error["hint"]
    pi.fails("netif", "mode", "sideways", "pico", code=2)
    pi.fails("netboot", "status", "pico", "--tail", "0", code=2)


def test_dnsmasq_on_loopback_is_refused_and_a_missing_root_is_named(pi, tmp_path: Path) -> None:
    pi("netboot", "set", "-t", "pico", "--interface", "lo", "--tftp-root", str(tmp_path / "nowhere"))
    r = pi.fails("netboot", "start", "pico", code=13)
    assert "--server panio" in r.error["hint"]
    pi("netboot", "set", "-t", "pico", "--server", "panio", "--tftp-port", "6969")
    r = pi.fails("netboot", "start", "pico", code=3)
    assert str(tmp_path / "nowhere") in r.error["message"]
    st = pi("netboot", "status", "pico", "--json").json()
    assert st["serving"] is False and st["files"] == [] and st["leases"] == []
    assert "was not running" in pi("netboot", "stop", "pico").out


def test_netif_status_of_an_absent_interface_is_not_configured(pi) -> None:
    pi("netboot", "set", "-t", "pico", "--interface", "absent9")
    r = pi.fails("netif", "status", "pico", code=3)
    assert "absent9" in r.error["message"]


def test_specs_bound_the_requests() -> None:
    assert ops.spec("netif.mode").side_effect and not ops.spec("netif.status").side_effect
    assert ops.spec("netboot.start").side_effect and ops.spec("netboot.start").deadline_s({}) > 15
    with pytest.raises(UsageError):
        ops.spec("netif.mode").validate({"mode": "sideways"})
    with pytest.raises(UsageError):
        ops.spec("netboot.status").validate({"tail": 0})
    with pytest.raises(UsageError):
        ops.spec("netif.mode").validate({})


def test_dnsmasq_config_answers_a_pi_unless_a_boot_file_is_set(tmp_path: Path) -> None:
    pi = Settings.of("pico", {"interface": "en7"}, "/srv/pico")
    text = config_text(pi, tmp_path)
    assert 'pxe-service=0,"Raspberry Pi Boot"' in text and "dhcp-boot" not in text
    assert "interface=en7\nbind-interfaces" in text and "port=0" in text
    assert "dhcp-range=10.233.0.2,10.233.0.254,255.255.255.0,1h" in text
    pc = Settings.of("pc", {"interface": "en8", "boot_file": "undionly.kpxe", "address": "10.5.0.1/28"}, "/srv/pc")
    text = config_text(pc, tmp_path)
    assert "dhcp-boot=undionly.kpxe" in text and "pxe-service" not in text
    assert "dhcp-range=10.5.0.2,10.5.0.14,255.255.255.240,1h" in text


def test_panio_tftp_daemon_serves_is_listed_and_stops_by_name(pi, tmp_path: Path) -> None:
    import shutil
    import socket
    import subprocess

    if not shutil.which("busybox"):
        pytest.skip("busybox-static is installed by scripts/system-deps.sh")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = tmp_path / "root"
    root.mkdir()
    (root / "kernel_2712.img").write_bytes(b"k" * 5000)
    pi("netboot", "set", "-t", "pico", "--interface", "lo", "--server", "panio", "--tftp-port", str(port),
       "--tftp-root", str(root))
    out = pi("netboot", "start", "pico").out
    assert f"serving with panio on lo, TFTP port {port}" in out
    got = tmp_path / "got"
    subprocess.run(["busybox", "tftp", "-g", "-r", "kernel_2712.img", "-l", str(got), "127.0.0.1", str(port)],
                   check=True, timeout=30)
    assert got.read_bytes() == b"k" * 5000
    [row] = pi("daemons", "--json").json()
    assert row["name"] == "netboot-pico" and row["kind"] == "netboot" and row["state"] == "running"
    assert "stopped netboot-pico" in pi("daemons", "stop", "netboot-pico").out
    st = pi("netboot", "status", "pico", "--json").json()
    assert not st["serving"] and [f["file"] for f in st["files"]] == [str(root / "kernel_2712.img")]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", port))  # the port is free again


def test_the_default_tftp_root_is_resolved_where_it_is_served(pi, tmp_path: Path) -> None:
    pi("netboot", "set", "-t", "pico", "--interface", "lo", "--server", "panio")
    st = pi("netboot", "status", "pico", "--json").json()
    assert st["tftp_root"] == str(pi.state / "tftp" / "pico")  # the lab's: another lab's pico has its own
    assert pi("netboot", "tftp-root", "pico").out.strip() == st["tftp_root"]


def test_a_tftp_root_under_dollar_home_reads_like_tilde(pi) -> None:
    """`--tftp-root '$HOME/tftp/pico'` (quoted, so no shell expanded it) is the user's home, as `~` is."""
    pi("netboot", "set", "-t", "pico", "--interface", "eth1", "--tftp-root", "$HOME/tftp/pico")
    root = pi("netboot", "tftp-root", "pico").out.strip()
    assert root == str(Path(pi.env["HOME"]) / "tftp" / "pico")
    pi.fails("netboot", "set", "-t", "pico", "--tftp-root", "$HOME", code=2)  # the home itself: its ~/.ssh
