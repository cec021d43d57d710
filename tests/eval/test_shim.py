"""The sandbox's argv shim: records argv + exit status, refuses non-T1-safe commands (fail closed)."""

import json

from scenarios.drift import Guard
from scenarios.safe import classify
from scenarios.sandbox import Sandbox

GROUPS = set(Guard().groups())


def test_shim_records_argv_and_exit_status_and_runs_real_panio(tmp_path):
    box = Sandbox(tmp_path / "box").create(None, sorted(GROUPS))
    assert box.run_panio(["target", "add", "pico"]).returncode == 0
    r = box.run_panio(["serial", "add", "console", "-t", "nope", "--device", "/dev/x"])
    assert r.returncode == 3
    recs = box.records()
    assert [x["argv"] for x in recs] == [["target", "add", "pico"], ["serial", "add", "console", "-t", "nope", "--device", "/dev/x"]]
    assert [x["exit"] for x in recs] == [0, 3]
    assert "[targets.pico]" in box.lab.read_text()


def test_forbidden_commands_are_refused_before_anything_runs(tmp_path):
    fixture = "[targets.dut]\n\n[[targets.dut.serial]]\nname = \"console\"\ndevice = \"/dev/ttyUSB0\"\nbaud = 115200\n"
    box = Sandbox(tmp_path / "box").create(fixture, sorted(GROUPS))
    for argv in (["serial", "watch", "dut"], ["power-cycle", "dut"], ["helper", "shellyplug", "-d", "x", "cycle"],
                 ["daemons", "stop", "--all"], ["target", "add", "x", "--lab", "/tmp/elsewhere.toml"]):
        r = box.run_panio(argv)
        assert r.returncode == 13, argv
        human, js = r.stderr.strip().splitlines()
        assert human.startswith("panio: refused by panio-eval") and json.loads(js)["error"] == "refused"
    assert all(x["refused"] and x["exit"] == 13 for x in box.records())
    assert box.lab.read_text() == fixture  # nothing ran
    assert not (tmp_path / "box" / "state" / "serial").exists()


def test_safe_classification():
    assert classify(["target", "add", "pico"], GROUPS) is None
    assert classify(["serial", "watch", "--help"], GROUPS) is None  # help reads, runs nothing
    assert classify(["helper"], GROUPS) is None and classify(["helper", "--json"], GROUPS) is None
    assert "bare" in classify(["helper", "shellyplug"], GROUPS)
    assert classify(["daemons"], GROUPS) is None and classify(["daemons", "stop", "x"], GROUPS)
    assert classify(["netboot", "start", "pico"], GROUPS) and classify(["power", "on", "pico"], GROUPS)
    assert classify([], GROUPS) is None and classify(["--lab", "/x/lab.toml", "config", "show"], GROUPS, "/x/lab.toml") is None
