"""panio action run: named actions, run without a shell, refused on a board whose plug reads off."""

from __future__ import annotations

import pytest

from bench_agent.sim.plug import SimPlug


@pytest.fixture
def plug():
    p = SimPlug(gen=2, output=False).start()
    yield p
    p.close()


@pytest.fixture
def pico(panio, tmp_path, plug):
    panio("init")
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--state-cmd", f"shellyplug -d 127.0.0.1:{plug.port} state",
          "--on-cmd", f"shellyplug -d 127.0.0.1:{plug.port} on")
    return tmp_path / "ran"


def test_requires_power_is_refused_while_the_plug_is_off_then_runs(panio, pico, plug):
    panio("action", "add", "flash", "-t", "pico", "--command", f"touch {pico}", "--requires-power")
    r = panio.fails("action", "run", "pico", "flash", code=13)
    assert "pico is powered off" in r.err and "panio power on pico" in r.err
    assert not pico.exists()
    panio("power", "on", "pico")
    assert plug.output
    panio("action", "run", "pico", "flash")
    assert pico.exists()


def test_action_output_environment_and_no_shell(panio, pico):
    panio("action", "add", "who", "-t", "pico", "--command", "sh -c 'echo $PANIO_TARGET/$PANIO_ACTION \"$0\"' ';x'")
    r = panio("action", "run", "pico", "who")
    assert r.out == "pico/who ;x\n"


def test_failing_action_is_hook_failed_with_its_stderr(panio, pico):
    panio("action", "add", "bad", "-t", "pico", "--command", "sh -c 'echo flash verify failed >&2; exit 2'")
    r = panio("action", "run", "pico", "bad", check=False)
    assert r.code == 9
    assert r.err.splitlines()[0] == "flash verify failed"
    assert r.error["hook_exit"] == 2 and r.error["action"] == "bad"


def test_unknown_action_and_unknown_power_state(panio, pico):
    assert panio.fails("action", "run", "pico", "nope", code=3).error["action"] == "nope"
    panio("target", "add", "bare")
    panio("action", "add", "hello", "-t", "bare", "--command", "echo hi", "--requires-power")
    r = panio("action", "run", "bare", "hello")
    assert r.out == "hi\n" and "cannot read bare's power state" in r.err


def test_action_timeout(panio, pico):
    panio("action", "add", "slow", "-t", "pico", "--command", "sleep 20", "--timeout-s", "0.5")
    assert "action slow of pico" in panio.fails("action", "run", "pico", "slow", code=22).err


def test_action_run_is_refused_while_a_job_leases_the_target(panio, pico, tmp_path):
    """It used to call the transport directly and skip the lease check that every other command applies."""
    from bench_agent.leases.file_store import FileLeaseStore

    panio("action", "add", "flash", "-t", "pico", "--command", f"touch {pico}")
    lease = FileLeaseStore(panio.state / "leases").try_acquire("pico", {"holder": "runner@ci:7", "job": 3}, 30)
    try:
        r = panio.fails("action", "run", "pico", "flash", code=8)
        assert r.error["holder"] == "runner@ci:7" and r.error["job"] == 3
        assert not pico.exists()
        assert "Power OFF (pico)" in panio("power-state", "pico").out  # a read passes while leased
    finally:
        lease.release()
    panio("action", "run", "pico", "flash")
    assert pico.exists()
