"""The host's own configuration guards every broker request (bench_agent/jobs/host_config.py), unit by unit.

The real-worker road is in tests/test_peer_signing.py; here each rule is checked on its own, against a lab
file on disk, through the single entry every operation takes (``bench_agent.ops.call``).
"""

from __future__ import annotations

import pytest

from bench_agent import ops
from bench_agent.errors import NotConfigured, Refused
from bench_agent.jobs import host_config
from bench_agent.jobs.host_config import HostConfig

LAB = """
[hosts.h1]
ssh = "ops@h1.invalid"
[hosts.h2]
ssh = "ops@h2.invalid"

[targets.t1]
host = "h1"
power = { on_cmd = "true", levels = { hard = { on_cmd = "true" } } }
netboot = { interface = "lo", tftp_root = "/srv/tftp/t1" }
video = { device = "/dev/video9" }
[[targets.t1.serial]]
name = "console"
device = "/dev/ttyUSB0"
[[targets.t1.serial]]
name = "debug"
device = "/dev/ttyUSB1"
[targets.t1.actions.flash]
command = "true"

[targets.t2]
host = "h2"
[targets.t2.actions.probe]
command = "echo probe"
host = "h1"

[targets.here]
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text(LAB)
    return HostConfig(path, "h1")


@pytest.fixture
def guarded(config):
    host_config.install(config)
    yield config
    host_config._INSTALLED.clear()


def enforce(config: HostConfig, op: str, args: dict) -> dict:
    func = ops.lookup(op)
    code = func.__code__
    return config.enforce(op, args, {p.name for p in ops.SPECS[op].params},
                          set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]))


def test_configuration_comes_from_the_host_and_a_different_value_is_refused(config):
    table = config.target("t1")
    assert enforce(config, "power.on", {"target": "t1"})["power"] == table["power"]  # filled in when absent
    assert enforce(config, "power.on", {"target": "t1", "power": table["power"]})["power"] == table["power"]
    for op, args in [("power.on", {"target": "t1", "power": {"on_cmd": "sh -c id"}}),
                     ("power.on", {"target": "t1", "power": None}),
                     ("action.run", {"target": "t1", "name": "flash", "command": "sh -c id"}),
                     ("netif.down_hard", {"target": "t1", "netboot": {"interface": "lo", "hard_down_cmd": "id"}}),
                     ("netboot.start", {"target": "t1", "netboot": table["netboot"], "tftp_root": "/"}),
                     ("video.watch", {"target": "t1", "video": {"device": "http://elsewhere/"}}),
                     ("serial.send", {"target": "t1", "iface": {"name": "console", "device": "/etc/shadow"},
                                      "text": "x"}),
                     ("serial.watch", {"target": "t1", "interfaces": [{"name": "console", "device": "/dev/mem"}]}),
                     ("system.doctor", {"config": {"power": {"on_cmd": "id"}}})]:
        with pytest.raises(Refused, match="differ|not one of this host.s targets"):
            enforce(config, op, args)


def test_serial_interfaces_by_name_and_a_subset_of_them(config):
    console, debug = config.target("t1")["serial"]
    assert enforce(config, "serial.log", {"target": "t1", "iface": console})["iface"] == console
    with pytest.raises(Refused, match="no serial interface 'other'"):
        enforce(config, "serial.log", {"target": "t1", "iface": {"name": "other", "device": "/dev/null"}})
    with pytest.raises(Refused, match="no serial interface"):  # two interfaces: the message must say which
        enforce(config, "serial.log", {"target": "t1"})
    assert enforce(config, "serial.watch", {"target": "t1", "interfaces": [debug]})["interfaces"] == [debug]
    assert enforce(config, "serial.watch", {"target": "t1"})["interfaces"] == [console, debug]


def test_targets_and_actions_belong_to_one_host(config):
    assert enforce(config, "action.run", {"target": "t2", "name": "probe", "command": "echo probe"})  # h1 runs it
    for args, why in [({"target": "t2", "name": "other", "command": "true"}, "no action 'other'"),
                      ({"target": "here", "name": "x", "command": "true"}, "no action 'x'"),
                      ({"target": "nosuch", "name": "x", "command": "true"}, "not in this host's configuration")]:
        with pytest.raises(Refused, match=why):
            enforce(config, "action.run", args)
    with pytest.raises(Refused, match="belongs to host 'h2'"):
        enforce(config, "serial.stop", {"target": "t2"})
    with pytest.raises(Refused, match="belongs to host 'local'"):  # no host: `panio worker --host local`'s
        enforce(config, "serial.stop", {"target": "here"})
    assert HostConfig(config.path, "local").target("here") == {}


def test_host_operations_pass_and_an_unknown_kind_of_configuration_is_refused(config, monkeypatch):
    assert enforce(config, "system.ping", {"payload": 1}) == {"payload": 1}
    assert enforce(config, "daemons.list", {}) == {}

    @ops.operation("test.hooked", side_effect=True)
    def hooked(target: str, helper_cmd: str) -> dict:  # a future op taking a command the guard does not know
        return {}

    monkeypatch.setitem(ops.REGISTRY, "test.hooked", hooked)
    try:
        with pytest.raises(Refused, match=r"configuration a broker message may not carry \(helper_cmd\)"):
            enforce(config, "test.hooked", {"target": "t1", "helper_cmd": "id"})
    finally:
        ops.REGISTRY.pop("test.hooked", None)
        ops.SPECS.pop("test.hooked", None)


def test_the_file_is_read_again_when_it_changes_and_a_broken_one_refuses_everything(config):
    assert "t1" in config.owned()
    config.path.write_text(LAB.replace('[targets.t1]\nhost = "h1"', '[targets.t1]\nhost = "h2"'))
    assert "t1" not in config.owned()
    config.path.write_text("[targets\n")
    with pytest.raises(NotConfigured, match="cannot read its configuration"):
        config.target("t1")
    config.path.unlink()
    with pytest.raises(NotConfigured, match="No such file") as info:
        config.owned()
    assert "panio setup --host h1" in info.value.hint


def test_installed_it_guards_ops_call_and_refusals_are_logged(guarded, caplog):
    with pytest.raises(Refused):
        ops.call("action.run", {"target": "t1", "name": "flash", "command": "touch /tmp/never"})
    assert "refused a broker request on host h1" in caplog.text
    assert ops.call("action.run", {"target": "t1", "name": "flash"})["exit"] == 0  # the host's own command


def test_a_missing_configuration_for_host_local_points_at_a_lab_file_not_at_setup(panio, tmp_path):
    """`panio setup` provisions a control host over SSH; `local` (this machine's targets) is never set up."""
    missing = tmp_path / "nowhere.toml"
    r = panio.fails("worker", "--host", "local", "--lab", str(missing), code=3)
    assert r.error["error"] == "not_configured" and str(missing) in r.err
    hint = r.error["hint"]
    assert "panio worker --host local --lab FILE" in hint and "panio init" in hint
    assert "panio setup" not in hint
    r = panio.fails("worker", "--host", "bench1", "--lab", str(missing), code=3)
    assert "panio setup --host bench1" in r.error["hint"] and "--lab PATH" in r.error["hint"]


def test_a_broken_configuration_of_host_local_names_the_lab_not_setup(tmp_path):
    config = HostConfig(tmp_path / "gone.toml", "local")
    with pytest.raises(NotConfigured) as info:
        config.owned()
    assert "panio init" in info.value.hint and "panio setup" not in info.value.hint
