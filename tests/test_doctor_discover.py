"""doctor, discover and configure: reading the host's real hardware (a real PTY stands in for a USB-serial port)."""

from __future__ import annotations

import os
import tomllib

import pytest

from bench_agent.inventory import primary_interface


@pytest.fixture
def pty_device():
    master, slave = os.openpty()
    yield os.ttyname(slave)
    os.close(master)
    os.close(slave)


def test_doctor_reports_present_and_missing_and_exits_1(panio, pty_device, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", pty_device)
    panio("serial", "add", "bmc", "-t", "pico", "--device", "/dev/ttyUSB-absent")
    panio("power", "set", "-t", "pico", "--cycle-cmd", "true", "--state-cmd", "/nonexistent/plug state")
    (tmp_path / "tftp").mkdir()  # not tmp_path itself: it holds the test's HOME, which panio never serves
    panio("netboot", "set", "-t", "pico", "--interface", "en-absent", "--tftp-root", str(tmp_path / "tftp"))
    r = panio("doctor", "pico", "--json", check=False)
    assert r.code == 1
    rows = {(x["channel"], x["item"]): x["status"] for x in r.json()["targets"]["pico"]}
    assert rows.pop(("netboot", "server")) == "unchecked"  # checked once the interface is (tests/test_netboot_netns.py)
    assert rows == {("serial", "console"): "ok", ("serial", "bmc"): "missing", ("power", "cycle_cmd"): "ok",
                    ("power", "state_cmd"): "missing", ("netboot", "interface"): "missing", ("netboot", "tftp_root"): "ok"}
    human = panio("doctor", check=False).out
    assert "MISSING" in human and "/dev/ttyUSB-absent" in human


def test_doctor_checks_the_folder_netboot_stage_takes_files_from(panio, tmp_path):
    """stage_from: missing until it exists, ok once it does, a problem when it is a folder no stage may use."""
    panio("init")
    panio("target", "add", "pico")
    (tmp_path / "tftp").mkdir()
    builds = tmp_path / "builds"
    panio("netboot", "set", "-t", "pico", "--interface", "en-absent", "--tftp-root", str(tmp_path / "tftp"),
          "--stage-from", str(builds))

    def row():
        rows = panio("doctor", "pico", "--json", check=False).json()["targets"]["pico"]
        return next(x for x in rows if x["item"] == "stage_from")

    missing = row()
    assert missing["status"] == "missing" and str(builds) in missing["detail"], missing
    builds.mkdir()
    assert row()["status"] == "ok"
    builds.rmdir()
    builds.symlink_to(panio.env["HOME"])  # a link to the home folder: never a folder to hand out files from
    problem = row()
    assert problem["status"] == "problem" and "home" in problem["detail"], problem
    assert "stage_from" in panio("doctor", "pico", check=False).out


def test_doctor_exits_0_when_all_present(panio, pty_device):
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", pty_device)
    r = panio("doctor", "--json")
    assert r.json()["ok"] is True


@pytest.mark.skipif(primary_interface() is None, reason="no default route on this machine")
def test_doctor_flags_netboot_on_the_primary_interface(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    panio("netboot", "set", "-t", "pico", "--interface", primary_interface(), "--tftp-root", str(tmp_path / "tftp"))
    rows = panio("doctor", "pico", "--json", check=False).json()["targets"]["pico"]
    assert rows[0]["status"] == "problem" and "primary" in rows[0]["detail"]


def test_discover_json_shape(panio):
    inv = panio("discover", "--json").json()
    assert set(inv) == {"serial", "video", "hid", "usb", "network", "adb"}
    assert all({"interface", "primary", "carrier"} <= set(n) for n in inv["network"])


def test_configure_prints_a_valid_block_and_writes_nothing(panio):
    panio("init")
    before = panio.lab.read_bytes()
    out = panio("configure", "pi2").out
    assert "nothing was written" in out
    tomllib.loads(out)  # the proposal parses as TOML
    assert panio.lab.read_bytes() == before
    assert panio("configure", "pi2", "--json").json()["written"] is False
    panio.fails("configure", "Bad Name", code=7)
