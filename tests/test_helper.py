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


@pytest.mark.parametrize("algorithm,response", [
    ("MD5", "8ca523f5e9506fed4657c9700eebdbec"),
    ("SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"),
])
def test_digest_matches_the_rfc_7616_example(algorithm, response):
    from bench_agent.helpers.shellyplug import digest_authorization

    challenge = (f'Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm={algorithm}, '
                 'nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"')
    header = digest_authorization(challenge, "Mufasa", "Circle of Life", "GET", "/dir/index.html",
                                  cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ")
    assert f'response="{response}"' in header


@pytest.mark.parametrize("gen", [1, 2])
def test_client_detects_generation_and_switches(gen):
    from bench_agent.helpers.shellyplug import ShellyPlug

    events: list[bool] = []
    sim = SimPlug(gen=gen, password="pw", output=False, on_switch=events.append).start()
    try:
        plug = ShellyPlug("127.0.0.1", sim.port, password="pw")
        assert plug.gen == gen and plug.state() is False
        assert plug.toggle() is True and plug.set(False) is False and plug.cycle(0) is True
        assert events == [True, False, True]
    finally:
        sim.close()


def test_sim_gen2_answers_json_rpc_posts_with_digest_auth():
    import json
    import urllib.request

    sim = SimPlug(gen=2, password="pw", output=True).start()
    try:
        body = json.dumps({"id": 7, "method": "Switch.GetStatus", "params": {"id": 0}}).encode()
        url = f"http://127.0.0.1:{sim.port}/rpc"
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=5)
        assert exc.value.code == 401 and "algorithm=SHA-256" in exc.value.headers["WWW-Authenticate"]
        from bench_agent.helpers.shellyplug import digest_authorization

        auth = digest_authorization(exc.value.headers["WWW-Authenticate"], "admin", "pw", "POST", "/rpc")
        with urllib.request.urlopen(urllib.request.Request(url, data=body, headers={"Authorization": auth}), timeout=5) as r:
            reply = json.loads(r.read())
        assert reply["id"] == 7 and reply["result"]["output"] is True
    finally:
        sim.close()


def test_a_plug_on_ipv6_is_reached_bracketed_or_bare(panio):
    plug = SimPlug(gen=2, output=True, host="::1").start()
    try:
        assert panio("helper", "shellyplug", "-d", f"[::1]:{plug.port}", "off").out == "off\n"
        assert not plug.output
        assert panio("helper", "shellyplug", "-d", f"[::1]:{plug.port}", "state").out == "off\n"
    finally:
        plug.close()
    from bench_agent.helpers.shellyplug import ShellyPlug, _host_port

    assert _host_port("fd00::41") == ("fd00::41", 80) and _host_port("[fd00::41]") == ("fd00::41", 80)
    assert ShellyPlug(*_host_port("[fd00::41]:8080")).where == "[fd00::41]:8080"
    for bad in ("[::1", "[::1]x", "[::1]:0", "[]:80"):
        assert "-d" in panio.fails("helper", "shellyplug", "-d", bad, "state", code=2).err
