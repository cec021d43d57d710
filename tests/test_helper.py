"""panio helper: the bundled helpers listed one line each, and run with their arguments verbatim."""

from __future__ import annotations

import subprocess

import pytest

from bench_agent.sim.plug import SimPlug
from conftest import BIN


@pytest.fixture
def plug():
    p = SimPlug(gen=1, output=True).start()
    yield p
    p.close()


def test_list_names_shellyplug_with_a_summary(panio):
    out = panio("helper").out.splitlines()
    assert out[0].startswith("shellyplug ") and "Shelly" in out[0]
    assert panio("helper", "--json").json()[0]["name"] == "shellyplug"


def test_run_passes_arguments_verbatim(panio, plug):
    assert panio("helper", "shellyplug", "-d", f"127.0.0.1:{plug.port}", "off").out == "off\n"
    assert not plug.output
    assert panio("helper", "shellyplug", "-d", f"127.0.0.1:{plug.port}", "toggle").out == "on\n"
    assert "usage: shellyplug" in panio("helper", "shellyplug", "--help").out


def test_standalone_console_script_matches(plug):
    p = subprocess.run([str(BIN / "shellyplug"), "-d", f"127.0.0.1:{plug.port}", "state"], capture_output=True, text=True)
    assert (p.returncode, p.stdout) == (0, "on\n")


def test_errors(panio):
    assert panio.fails("helper", "shelly", code=3).error["helper"] == "shelly"
    assert "invalid choice" in panio.fails("helper", "shellyplug", "-d", "127.0.0.1", "reboot", code=2).err
    assert panio.fails("helper", "shellyplug", "-d", "127.0.0.1:9", "on", code=4).error["plug"] == "127.0.0.1:9"


def test_help_lists_the_new_commands(panio):
    top = panio("--help").out
    for name in ("power-cycle", "power-state", "helper"):
        assert f"  {name} " in top
    assert "panio power-state pico" in panio("power-state", "--help").out
    assert "panio action run pico flash" in panio("action", "run", "--help").out
    assert "--level" in panio("power", "on", "--help").out
