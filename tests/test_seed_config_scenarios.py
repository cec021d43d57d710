"""The seed's config-only scenarios (C1–C8, s1), typed by hand, produce the lab files those scenarios grade."""

from __future__ import annotations

from conftest import lab


def test_c1_provision_a_pi_end_to_end(panio):
    panio("init")
    panio("target", "add", "pico")
    panio("netboot", "set", "-t", "pico", "--interface", "en7", "--tftp-root", "~/tftp/pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/cu.usbserial-XYZ")
    panio("power", "set", "-t", "pico", "--cycle-cmd", "~/bin/cycle.sh")
    shown = panio("config", "show").out
    assert "en7" in shown and "/dev/cu.usbserial-XYZ" in shown and "cycle.sh" in shown
    pico = lab(panio)["targets"]["pico"]
    assert pico["netboot"] == {"interface": "en7", "tftp_root": "~/tftp/pico"}
    assert pico["serial"] == [{"name": "console", "device": "/dev/cu.usbserial-XYZ", "baud": 115200}]
    assert pico["power"] == {"cycle_cmd": "~/bin/cycle.sh"}


def test_c1_trap_channel_before_target_fails_cleanly(panio):
    panio("init")
    r = panio.fails("netboot", "set", "-t", "pico", "--interface", "en7", code=3)
    assert "panio target add pico" in r.err
    r = panio.fails("serial", "add", "console", "pico", "--device", "/dev/x", code=2)  # positional target: wrong
    assert "-t" in r.err or "--target" in r.err


def test_c2_second_named_interface_keeps_the_first(pico):
    pico("serial", "add", "bmc", "-t", "pico", "--device", "/dev/ttyUSB1", "--baud", "9600")
    serial = lab(pico)["targets"]["pico"]["serial"]
    assert [s["name"] for s in serial] == ["console", "bmc"]
    assert serial[0]["device"] == "/dev/ttyUSB0" and serial[1]["baud"] == 9600


def test_c3_shelly_plug_behind_power_hooks(pico):
    pico("power", "set", "-t", "pico",
         "--cycle-cmd", "shellyplug -d 192.0.2.41 cycle", "--state-cmd", "shellyplug -d 192.0.2.41 state",
         "--on-cmd", "shellyplug -d 192.0.2.41 on", "--off-cmd", "shellyplug -d 192.0.2.41 off")
    power = lab(pico)["targets"]["pico"]["power"]
    assert power["cycle_cmd"].split() == ["shellyplug", "-d", "192.0.2.41", "cycle"]
    assert all("192.0.2.41" in power[k] for k in ("on_cmd", "off_cmd", "state_cmd"))
    r = pico.fails("shelly", code=2)  # the trap: there is no panio shelly
    assert r.error["command"] == "shelly"


def test_c4_inspect_the_lab(pico):
    pico("target", "add", "tablet")
    pico("adb", "set", "-t", "tablet", "--serial", "ABC123")
    pico("netboot", "set", "-t", "pico", "--interface", "en7")
    out = pico("config", "show").out
    assert "pico" in out and "tablet" in out and "ABC123" in out and "en7" in out and "/dev/ttyUSB0" in out
    rows = {t["name"]: t["channels"] for t in pico("target", "list", "--json").json()}
    # an adb table brings its console, screen and input (docs/adb.md)
    assert rows == {"pico": ["serial", "netboot"], "tablet": ["serial", "video", "hid", "adb"]}


def test_c5_drop_one_channel_keep_the_target(pico):
    pico("serial", "add", "bmc", "-t", "pico", "--device", "/dev/ttyUSB1", "--baud", "9600")
    pico("power", "set", "-t", "pico", "--cycle-cmd", "x")
    pico("serial", "rm", "bmc", "-t", "pico")
    t = lab(pico)["targets"]["pico"]
    assert [s["name"] for s in t["serial"]] == ["console"] and t["power"] == {"cycle_cmd": "x"}


def test_c6_remote_control_host(panio):
    panio("init")
    panio("host", "add", "bench1", "--ssh", "user@bench1.local")
    assert lab(panio)["hosts"]["bench1"]["ssh"] == "user@bench1.local"


def test_c7_android_target_rebooted_by_the_power_hook(panio):
    panio("init")
    panio("target", "add", "tablet")
    panio("adb", "set", "-t", "tablet", "--serial", "ABC123")
    panio("power", "set", "-t", "tablet", "--cycle-cmd", "adb -s ABC123 reboot")
    t = lab(panio)["targets"]["tablet"]
    assert t["adb"] == {"serial": "ABC123"} and t["power"]["cycle_cmd"] == "adb -s ABC123 reboot"
    panio.fails("adb", "reboot", "tablet", code=2)  # the trap: no adb reboot


def test_s1_dual_interfaces_with_sense_and_dtr_opt_in(panio):
    panio("init")
    panio("target", "add", "dut")
    panio("serial", "add", "console", "-t", "dut", "--device", "/dev/ttyUSB0", "--sense", "CTS", "--power-button")
    panio("serial", "add", "bmc", "-t", "dut", "--device", "/dev/ttyUSB1", "--baud", "9600")
    console, bmc = lab(panio)["targets"]["dut"]["serial"]
    assert console["power_sense_signal"] == "CTS" and console["power_button"] is True
    assert bmc["baud"] == 9600 and "power_button" not in bmc
