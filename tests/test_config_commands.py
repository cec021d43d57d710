"""The config command surface: each command's effect on lab.toml, and each bad input's clear refusal."""

from __future__ import annotations

import tomllib

import pytest

from conftest import lab


def test_init_refuses_to_overwrite_and_force_replaces(panio):
    panio("init")
    panio("target", "add", "pico")
    before = panio.lab.read_bytes()
    r = panio.fails("init", code=6)
    assert "--force" in r.err
    assert panio.lab.read_bytes() == before
    panio("init", "--force")
    assert "targets" not in lab(panio)


@pytest.mark.parametrize("args", [
    ["target", "add", "Pico"], ["target", "add", "-x"], ["target", "add", "a b"], ["target", "add", "x" * 65],
    ["host", "add", "Bench!", "--ssh", "a@b"], ["serial", "add", "Console", "-t", "pico", "--device", "/d"],
    ["action", "add", "Flash", "-t", "pico", "--command", "x"], ["power", "set", "-t", "pico", "--level", "HARD", "--on-cmd", "x"],
])
def test_invalid_names_are_refused_with_the_grammar(pico, args):
    before = pico.lab.read_bytes()
    r = pico(*args, check=False)
    assert r.code in (7, 2), r.err  # "-x" is an unknown flag to argparse: usage
    if r.code == 7:
        assert "lowercase letters" in r.err
        assert r.error["error"] == "invalid_name"
    assert pico.lab.read_bytes() == before


def test_duplicates_are_refused(pico):
    before = pico.lab.read_bytes()
    pico.fails("target", "add", "pico", code=6)
    r = pico.fails("serial", "add", "console", "-t", "pico", "--device", "/dev/other", code=6)
    assert "serial set" in r.err
    assert pico.lab.read_bytes() == before


def test_unknown_target_lists_the_known_ones(pico):
    before = pico.lab.read_bytes()
    for args in (["serial", "add", "c", "-t", "nope", "--device", "/d"], ["netboot", "set", "-t", "nope", "--interface", "x"],
                 ["power", "set", "-t", "nope", "--cycle-cmd", "x"], ["video", "set", "-t", "nope", "--device", "/d"],
                 ["target", "show", "nope"], ["target", "rm", "nope"], ["netboot", "tftp-root", "nope"]):
        r = pico.fails(*args, code=3)
        assert "pico" in r.err and r.error["error"] == "not_configured", args
    assert pico.lab.read_bytes() == before


def test_removing_what_is_absent_lists_what_exists(pico):
    r = pico.fails("serial", "rm", "bmc", "-t", "pico", code=3)
    assert "console" in r.err
    pico.fails("power", "rm", "-t", "pico", code=3)
    pico.fails("netboot", "rm", "-t", "pico", code=3)
    pico.fails("adb", "rm", "-t", "pico", code=3)
    pico("power", "set", "-t", "pico", "--level", "soft", "--off-cmd", "x")
    r = pico.fails("power", "rm", "-t", "pico", "--level", "hard", code=3)
    assert "soft" in r.err
    r = pico.fails("action", "rm", "flash", "-t", "pico", code=3)
    r = pico.fails("host", "rm", "bench1", code=3)


@pytest.mark.parametrize("args", [
    ["serial", "set", "console", "-t", "pico", "--baud", "fast"],
    ["serial", "set", "console", "-t", "pico", "--baud", "-5"],
    ["serial", "set", "console", "-t", "pico", "--sense", "XYZ"],
    ["power", "set", "-t", "pico", "--timeout-s", "0"],
    ["host", "add", "b", "--ssh", "a@b", "--port", "x"],
    ["target", "add"],
    ["serial", "add", "c", "-t", "pico"],
    ["power", "set", "-t", "pico"],
])
def test_wrong_flag_values_are_usage_errors(pico, args):
    before = pico.lab.read_bytes()
    r = pico.fails(*args, code=2)
    assert "--help" in r.err
    assert pico.lab.read_bytes() == before


def test_second_interface_makes_name_required_and_rm_keeps_the_rest(pico):
    pico("serial", "set", "-t", "pico", "--baud", "921600")  # one interface: no name needed
    pico("serial", "add", "bmc", "-t", "pico", "--device", "/dev/ttyUSB1", "--baud", "9600")
    pico("netboot", "set", "-t", "pico", "--interface", "en7")
    r = pico.fails("serial", "set", "-t", "pico", "--baud", "57600", code=2)
    assert "console" in r.err and "bmc" in r.err and r.error["interfaces"] == ["console", "bmc"]
    pico("serial", "rm", "bmc", "-t", "pico")
    t = lab(pico)["targets"]["pico"]
    assert t["serial"] == [{"name": "console", "device": "/dev/ttyUSB0", "baud": 921600}]
    assert t["netboot"] == {"interface": "en7"}


def test_serial_sense_and_power_button_set_and_clear(pico):
    pico("serial", "set", "console", "-t", "pico", "--sense", "cts", "--power-button", "--line-ending", "crlf")
    iface = lab(pico)["targets"]["pico"]["serial"][0]
    assert (iface["power_sense_signal"], iface["power_button"], iface["line_ending"]) == ("CTS", True, "crlf")
    pico("serial", "set", "console", "-t", "pico", "--no-sense", "--no-power-button")
    iface = lab(pico)["targets"]["pico"]["serial"][0]
    assert "power_sense_signal" not in iface and "power_button" not in iface
    pico.fails("serial", "set", "-t", "pico", "--sense", "CTS", "--no-sense", code=2)


def test_power_levels(pico):
    pico("power", "set", "-t", "pico", "--cycle-cmd", "plug cycle", "--state-cmd", "plug state")
    pico("power", "set", "-t", "pico", "--level", "hard", "--off-cmd", "relay off", "--on-cmd", "relay on")
    power = lab(pico)["targets"]["pico"]["power"]
    assert power["cycle_cmd"] == "plug cycle"
    assert power["levels"]["hard"] == {"off_cmd": "relay off", "on_cmd": "relay on"}
    pico("power", "set", "-t", "pico", "--state-cmd", "")
    assert "state_cmd" not in lab(pico)["targets"]["pico"]["power"]
    pico("power", "rm", "-t", "pico", "--level", "hard")
    assert lab(pico)["targets"]["pico"]["power"] == {"cycle_cmd": "plug cycle"}


def test_hosts(pico):
    pico("host", "add", "bench1", "--ssh", "lab@bench1.local")
    pico.fails("target", "add", "pi2", "--host", "bench2", code=3)
    pico("target", "add", "pi2", "--host", "bench1")
    pico("host", "set", "bench1", "--port", "2222")
    assert lab(pico)["hosts"]["bench1"] == {"ssh": "lab@bench1.local", "port": 2222}
    shown = pico("host", "show", "bench1", "--json").json()
    assert shown["targets"] == ["pi2"]
    r = pico.fails("host", "rm", "bench1", code=13)
    assert "pi2" in r.err
    pico("target", "rm", "pi2")
    pico("host", "rm", "bench1")
    assert pico("host", "list", "--json").json() == []


def test_video_hid_adb_and_show_accept_positional_or_t(pico):
    pico("video", "set", "-t", "pico", "--device", "/dev/video0", "--width", "1920", "--height", "1080")
    pico("hid", "set", "-t", "pico", "--device", "/dev/ttyUSB2", "--protocol", "ch9329")
    pico.fails("adb", "set", "-t", "pico", code=2)
    pico("adb", "set", "-t", "pico", "--serial", "ABC123")
    assert pico("video", "show", "pico", "--json").json()["device"] == "/dev/video0"
    assert pico("hid", "show", "-t", "pico", "--json").json()["protocol"] == "ch9329"
    assert "ABC123" in pico("adb", "show", "pico").out
    pico("video", "rm", "-t", "pico")
    # the adb table implies the screen (docs/adb.md) until the lab names its own or the adb table goes
    assert pico("video", "show", "pico", "--json").json()["device"] == "adb:ABC123"
    pico("adb", "rm", "-t", "pico")
    pico.fails("video", "show", "pico", code=3)


def test_actions(pico):
    pico("action", "add", "flash", "-t", "pico", "--command", "make flash", "--requires-power", "--description", "flash it")
    acts = pico("action", "list", "pico", "--json").json()
    assert acts == [{"name": "flash", "description": "flash it", "command": "make flash", "requires_power": True, "host": None}]
    pico.fails("action", "add", "flash", "-t", "pico", "--command", "x", code=6)
    pico("action", "rm", "flash", "-t", "pico")
    assert pico("action", "list", "pico", "--json").json() == []


def test_reading_commands_take_json(pico):
    assert pico("target", "list", "--json").json()[0]["channels"] == ["serial"]
    assert pico("target", "show", "pico", "--json").json()["serial"][0]["name"] == "console"
    data = pico("config", "show", "--json").json()
    assert data["targets"]["pico"]["serial"][0]["device"] == "/dev/ttyUSB0"
    assert pico("config", "show", "--path", "--json").json()["source"] == "PANIO_LAB"
    pico("netboot", "set", "-t", "pico", "--interface", "en7")
    root = pico("netboot", "tftp-root", "pico", "--json").json()["tftp_root"]
    assert root.endswith("tftp/pico")
    assert isinstance(pico("serial", "devices", "--json").json(), list)


def test_lab_flag_beats_env(panio, tmp_path):
    other = tmp_path / "other.toml"
    panio("--lab", str(other), "init")
    panio("--lab", str(other), "target", "add", "x")
    assert not panio.lab.exists()
    assert "x" in tomllib.loads(other.read_text())["targets"]


def test_target_set_changes_tags_description_and_host_and_keeps_the_channels(pico):
    pico("host", "add", "bench1", "--ssh", "lab@bench1.example")
    assert pico("target", "set", "pico", "--tag", "pi5", "--tag", "lab2", "--tag", "pi5").out == \
        "target pico: set tags\n"
    pico("target", "set", "pico", "--untag", "lab2", "--description", "Raspberry Pi 5", "--host", "bench1")
    t = lab(pico)["targets"]["pico"]
    assert (t["tags"], t["description"], t["host"]) == (["pi5"], "Raspberry Pi 5", "bench1")
    assert t["serial"][0]["device"] == "/dev/ttyUSB0"  # channels untouched
    assert [x["name"] for x in pico("target", "list", "--json").json() if "pi5" in x["tags"]] == ["pico"]
    pico("target", "set", "pico", "--untag", "pi5", "--local", "--description", "")
    t = lab(pico)["targets"]["pico"]
    assert "tags" not in t and "host" not in t and "description" not in t

    before = pico.lab.read_text()
    assert "has no tag 'nope'" in pico.fails("target", "set", "pico", "--untag", "nope", code=3).err
    pico.fails("target", "set", "pico", "--host", "nohost", code=3)
    pico.fails("target", "set", "nosuch", "--tag", "x", code=3)
    pico.fails("target", "set", "pico", "--tag", "Bad Tag", code=7)  # invalid_name
    assert "give something to change" in pico.fails("target", "set", "pico", code=2).err
    pico.fails("target", "set", "pico", "--host", "bench1", "--local", code=2)
    assert pico.lab.read_text() == before
