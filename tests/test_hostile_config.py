"""Hostile configuration values that reach a shell, an ssh command line or a generated config file (issue 22).

Each is refused where it enters (the config command: one human line, one JSON line, the lab file byte-identical),
where the lab file is read (config_invalid, naming the line), and again on the host just before it is used.
"""

from __future__ import annotations

import pytest

from bench_agent.errors import Refused
from conftest import Panio

PROXY = "-oProxyCommand=touch {mark}"


@pytest.fixture
def lab(panio: Panio) -> Panio:
    panio("init")
    panio("host", "add", "bench1", "--ssh", "ops@bench1.invalid")
    panio("target", "add", "far", "--host", "bench1")
    return panio


def unchanged(panio: Panio, *argv: str, code: int):
    before = panio.lab.read_bytes()
    r = panio.fails(*argv, code=code)
    assert panio.lab.read_bytes() == before
    return r


# -- SSH destinations (item 6) ---------------------------------------------------------------------

@pytest.mark.parametrize("dest", [PROXY, "ops@" + PROXY, "-l@bench1", "ops@bench 1", "ops@bench1\n", "op s@bench1",
                                  "ops@bench1;id", "ops@", "@bench1", "ops@bench1\x1b[2J"],
                         ids=["option", "option as host", "option as user", "space", "newline", "space in user",
                              "semicolon", "no host", "no user", "escape"])
def test_an_ssh_destination_ssh_would_read_as_an_option_is_refused_by_host_add_and_set(lab, tmp_path, dest):
    dest = dest.format(mark=tmp_path / "pwned")
    r = unchanged(lab, "host", "add", "bench2", f"--ssh={dest}", code=2)
    assert "is not an SSH destination" in r.err and r.error["error"] == "usage"
    unchanged(lab, "host", "set", "bench1", f"--ssh={dest}", code=2)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("dest", ["ops@bench1.local", "bench1", "ops@10.0.0.5", "ops@fe80::1%eth0", "first.last@h-1"])
def test_ordinary_ssh_destinations_are_accepted(lab, dest):
    lab("host", "set", "bench1", "--ssh", dest)
    assert dest in lab("host", "show", "bench1").out


def test_a_hand_edited_option_destination_is_config_invalid_and_nothing_runs(lab, tmp_path):
    text = lab.lab.read_text().replace('"ops@bench1.invalid"', '"' + PROXY.format(mark=tmp_path / "pwned") + '"')
    lab.lab.write_text(text)
    line = text.splitlines().index(next(ln for ln in text.splitlines() if "ProxyCommand" in ln)) + 1
    for argv in (("ping", "far"), ("host", "trust", "bench1"), ("setup", "--host", "bench1")):
        r = unchanged(lab, *argv, code=5)
        assert "hosts.bench1.ssh" in r.err and r.error["line"] == line
    assert lab.lab.read_text() == text and not (tmp_path / "pwned").exists()


def test_the_transport_and_the_setup_inventory_refuse_it_before_any_connection(tmp_path):
    """Defence in depth: a host table that did not come through the lab file's validation."""
    from controller.provision.inventory import host_vars
    from controller.transports.ssh import SSHTransport

    host = {"ssh": PROXY.format(mark=tmp_path / "pwned")}
    with pytest.raises(Refused, match="not an SSH destination"):
        SSHTransport("bench1", host).call({"op": "system.ping", "args": {}})
    with pytest.raises(Refused, match="not an SSH destination"):
        host_vars("bench1", host)
    assert not (tmp_path / "pwned").exists()


# -- the TFTP root (item 2) ------------------------------------------------------------------------

@pytest.fixture
def pico(panio: Panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    (tmp_path / "tftp").mkdir()
    panio("netboot", "set", "-t", "pico", "--interface", "lo", "--server", "panio", "--tftp-port", "6969",
          "--tftp-root", str(tmp_path / "tftp"))
    yield panio
    panio("daemons", "stop", "netboot-pico", check=False)  # a start that should have been refused (the lab may not load)


@pytest.mark.parametrize("root", ["/", "//", "/etc", "/usr/", "/home", "/var", "/proc/self", "/a/../etc", "~", "tftp",
                                  "{tmp}/file", "{tmp}/to-root", "{tmp}/to-etc", "{tmp}/home-holder", "/srv/x\ny",
                                  "/srv/a,b"])
def test_a_tftp_root_that_is_a_system_folder_a_file_or_a_link_to_one_is_refused_by_netboot_set(pico, tmp_path, root):
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "to-root").symlink_to("/")
    (tmp_path / "to-etc").symlink_to("/etc")
    (tmp_path / "home-holder").symlink_to(tmp_path)  # the test's HOME is tmp_path/home
    r = unchanged(pico, "netboot", "set", "-t", "pico", "--tftp-root", root.format(tmp=tmp_path), code=2)
    assert r.error["argument"] == "tftp_root" and r.err.startswith("panio: --tftp-root: ")


def test_a_hand_edited_tftp_root_of_slash_is_config_invalid_at_its_line(pico, tmp_path):
    text = pico.lab.read_text().replace(f'"{tmp_path / "tftp"}"', '"/"')
    pico.lab.write_text(text)
    line = text.splitlines().index('tftp_root = "/"') + 1
    for argv in (("netboot", "start", "pico"), ("netboot", "tftp-root", "pico"), ("netboot", "status", "pico")):
        r = unchanged(pico, *argv, code=5)
        assert r.error["line"] == line and "system folder" in r.error["message"]


def test_a_root_swapped_for_a_link_to_slash_is_refused_where_it_is_served(pico, tmp_path):
    """The lab file is fine; the folder on disk became a symlink to / after `netboot set`."""
    (tmp_path / "tftp").rmdir()
    (tmp_path / "tftp").symlink_to("/")
    r = pico.fails("netboot", "tftp-root", "pico", code=13)
    assert "system folder" in r.error["message"]
    r = pico.fails("netboot", "start", "pico", code=13)
    assert "system folder" in r.error["message"]
    assert pico("netboot", "status", "pico", "--json").json()["serving"] is False


def test_the_tftp_server_itself_refuses_a_system_root(tmp_path):
    from bench_agent.netboot.tftp import TftpServer
    from bench_agent.netboot.values import BadValue

    (tmp_path / "to-etc").symlink_to("/etc")
    for root in ("/", "/etc", str(tmp_path / "to-etc"), str(tmp_path / "missing")):
        with pytest.raises(BadValue):
            TftpServer(root, "127.0.0.1", 0)


# -- netboot values that reach dnsmasq.conf (item 3) -----------------------------------------------

@pytest.mark.parametrize("flag,value", [
    ("--boot-file", "boot.ipxe\ndhcp-script=/bin/sh"), ("--boot-file", "a,b"), ("--boot-file", "x #y"),
    ("--boot-file", "-x"), ("--boot-file", "../../etc/shadow"), ("--boot-file", 'a"b'),
    ("--interface", "en 7"), ("--interface", "../x"), ("--interface", "-x"), ("--interface", "a/b"),
    ("--interface", "en7\nport=53"), ("--interface", "x" * 16),
    ("--address", "0.0.0.0/0"), ("--address", "10.1.2.3/8"), ("--address", "10.1.2.0/24"),
    ("--address", "10.1.2.255/24"), ("--address", "127.0.0.1/24"), ("--address", "224.0.0.1/24"),
    ("--address", "10.1.2.3/24\ndhcp-script=/bin/sh"), ("--usb-port", "../../../etc"), ("--usb-port", "1-1/x"),
])
def test_a_netboot_value_that_could_inject_a_line_or_an_option_is_refused_by_netboot_set(pico, flag, value):
    r = unchanged(pico, "netboot", "set", "-t", "pico", f"{flag}={value}", code=2)
    assert r.err.startswith(f"panio: {flag}: ") and r.error["argument"] == flag[2:].replace("-", "_")
    assert len(r.err.strip().splitlines()) == 2  # a newline in the value is escaped in the message


def test_a_hand_edited_boot_file_with_a_newline_is_config_invalid_at_its_line(pico):
    text = pico.lab.read_text() + 'boot_file = "boot.ipxe\\ndhcp-script=/bin/sh"\n'
    pico.lab.write_text(text)
    r = unchanged(pico, "netboot", "start", "pico", code=5)
    assert r.error["line"] == len(text.splitlines()) and "not a boot file name" in r.error["message"]


def test_the_host_refuses_values_that_did_not_come_through_the_lab_file(tmp_path):
    """Defence in depth: the operation, the daemon's command line and the config writer each check again."""
    import json
    import subprocess
    import sys

    from bench_agent.netboot.backends.dnsmasq import config_text
    from bench_agent.netboot.settings import Settings
    from bench_agent.netboot.values import BadValue
    from bench_agent.ops import netboot as netboot_ops

    bad = {"interface": "lo", "server": "panio", "boot_file": "boot.ipxe\ndhcp-script=/bin/sh"}
    with pytest.raises(Refused, match="not a boot file name"):
        netboot_ops.start("pico", bad, str(tmp_path))
    with pytest.raises(Refused, match="system folder"):
        Settings.of("pico", {"interface": "en7"}, "/")
    good = Settings.of("pico", {"interface": "en7"}, str(tmp_path / "tftp"))
    for field, value in (("boot_file", "x\ndhcp-script=/bin/sh"), ("interface", "en7\nport=53"),
                         ("address", "0.0.0.0/0"), ("tftp_root", "/")):
        unchecked = object.__new__(Settings)  # as a table that skipped every check would be
        for k in good.__dataclass_fields__:
            object.__setattr__(unchecked, k, value if k == field else getattr(good, k))
        with pytest.raises(BadValue):
            config_text(unchecked, tmp_path)
    config = json.dumps({**good.to_json(), "boot_file": "boot.ipxe\ndhcp-script=/bin/sh"})
    state = tmp_path / "state"
    p = subprocess.run([sys.executable, "-m", "bench_agent.netboot.daemon", "--state-dir", str(state), "--target",
                        "pico", "--config", config], capture_output=True, text=True, timeout=60)
    assert p.returncode == 13 and "Traceback" not in p.stderr
    assert not list(state.rglob("dnsmasq.conf"))
