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
