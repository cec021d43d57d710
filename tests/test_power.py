"""Power at runtime: hooks, levels, power-state, and a simulated board behind a real Shelly-protocol plug."""

from __future__ import annotations

import stat
import threading
import time

import pytest
import serial

from bench_agent.sim.console import PROMPT, SimConsole
from bench_agent.sim.plug import SimPlug


class ConsoleReader:
    """Collects everything the board prints, through pyserial on its PTY."""

    def __init__(self, device: str) -> None:
        self.port = serial.serial_for_url(device, 115200, timeout=0.05)
        self.data = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.data += self.port.read(4096)
            except serial.SerialException:
                time.sleep(0.02)

    def wait_for(self, marker: bytes, count: int = 1, timeout_s: float = 8.0) -> None:
        end = time.monotonic() + timeout_s
        while self.data.count(marker) < count and time.monotonic() < end:
            time.sleep(0.02)
        assert self.data.count(marker) >= count, f"{marker!r} x{count} not seen in {bytes(self.data[-400:])!r}"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.port.close()


@pytest.fixture(autouse=True)
def _lab(panio):
    panio("init")


@pytest.fixture
def board():
    """A powered simulated board whose power is switched by a Gen2 plug (re-made per test as needed)."""
    made: list = []

    def make(gen: int = 2, password: str | None = None):
        console = SimConsole(boot_s=0.2, countdown_s=0.3, powered=True)
        plug = SimPlug(gen=gen, password=password, output=True,
                       on_switch=lambda on: console.power_on() if on else console.power_off()).start()
        console.start()
        reader = ConsoleReader(console.device)
        made.append((console, plug, reader))
        return console, plug, reader

    yield make
    for console, plug, reader in made:
        reader.close()
        plug.close()
        console.close()


def plug_cmd(plug: SimPlug, verb: str, password: str | None = None) -> str:
    auth = f" -p {password}" if password else ""
    return f"shellyplug -d 127.0.0.1:{plug.port}{auth} --off-s 0.2 {verb}"


def script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize("gen,password", [(1, None), (2, None), (2, "s3cret")])
def test_power_cycle_through_shellyplug_boots_the_board_again(panio, board, gen, password):
    console, plug, reader = board(gen, password)
    reader.wait_for(PROMPT.encode())
    panio("target", "add", "sim")
    panio("power", "set", "-t", "sim", "--cycle-cmd", plug_cmd(plug, "cycle", password),
          "--state-cmd", plug_cmd(plug, "state", password))
    r = panio("power-cycle", "sim")
    assert r.out.strip() == "sim: power-cycled (cycle_cmd)"
    reader.wait_for(PROMPT.encode(), count=2)
    assert reader.data.count(b"DRAM:  512 MiB") == 2
    assert console.boots == 2 and plug.output
    assert any("Switch.Set" in p for p in plug.requests) == (gen == 2)
    assert any("turn=off" in p for p in plug.requests) == (gen == 1)
    assert panio("power-state", "sim").out == "Power ON (sim)\n"


def test_wrong_plug_password_is_a_hook_failure_showing_the_auth_error(panio, board):
    console, plug, reader = board(2, "right")
    panio("target", "add", "sim")
    panio("power", "set", "-t", "sim", "--cycle-cmd", plug_cmd(plug, "cycle", "wrong"))
    r = panio.fails("power-cycle", "sim", code=9)
    assert "rejected the password" in r.err and r.error["hook_exit"] == 11
    assert console.boots == 1 and plug.output


def test_on_off_and_state_hook_with_a_cycle_made_of_off_then_on(panio, board):
    console, plug, reader = board(1)
    panio("target", "add", "sim")
    panio("power", "set", "-t", "sim", "--on-cmd", plug_cmd(plug, "on"), "--off-cmd", plug_cmd(plug, "off"),
          "--state-cmd", plug_cmd(plug, "state"), "--cycle-off-s", "0.2")
    assert panio("power", "off", "sim").out == "sim: switched off (off_cmd)\n"
    assert not console.powered
    assert panio("power-state", "sim").out == "Power OFF (sim)\n"
    assert panio("power-state", "sim", "--json").json() == [
        {"target": "sim", "level": None, "state": "off", "source": "state_cmd"}]
    panio("power", "on", "sim")
    assert console.powered and panio("power-state", "sim").out == "Power ON (sim)\n"
    assert panio("power-cycle", "sim").out == "sim: power-cycled (off_cmd then on_cmd)\n"
    assert console.boots == 3


def test_levels_never_fall_back_to_the_default_hooks(panio, tmp_path):
    log = tmp_path / "calls"
    hook = script(tmp_path, "relay", f'echo "$PANIO_POWER_LEVEL $PANIO_POWER_ACTION $*" >> {log}')
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--on-cmd", f"{hook} main on", "--state-cmd", "echo on")
    panio("power", "set", "-t", "pico", "--level", "hard", "--off-cmd", f"{hook} hard off")
    r = panio.fails("power", "on", "pico", "--level", "hard", code=3)
    assert "no on_cmd for power of pico, level hard" in r.err and r.error["level"] == "hard"
    assert not log.exists()
    panio("power", "off", "pico", "--level", "hard")
    panio("power", "on", "pico")
    assert log.read_text() == "hard off hard off\ndefault on main on\n"
    assert panio("power-state", "pico").out == (
        "Power ON (pico)\nPower UNKNOWN (pico, level hard): no state_cmd\n")
    assert panio("power-state", "pico", "--level", "hard").out == "Power UNKNOWN (pico, level hard): no state_cmd\n"
    assert panio.fails("power-cycle", "pico", "--level", "soft", code=3).error["level"] == "soft"
    panio.fails("power-state", "pico", "--level", "soft", code=3)


def test_power_state_unknown_without_state_hook_or_sense_line(panio):
    panio("target", "add", "pico")
    assert panio("power-state", "pico").out == "Power UNKNOWN (pico): no state_cmd or power_sense_signal\n"
    r = panio.fails("power", "on", "pico", code=3)
    assert "no power channel" in r.err


def test_hook_exit_nonzero_shows_its_stderr(panio, tmp_path):
    hook = script(tmp_path, "bad", 'echo "relay board 3 not found" >&2; exit 5')
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--cycle-cmd", hook)
    r = panio.fails("power-cycle", "pico", code=9)
    assert "relay board 3 not found" in r.err.splitlines()[0]
    assert r.error["hook"] == "cycle_cmd of pico" and r.error["hook_exit"] == 5


def test_hook_past_its_timeout_is_killed_with_its_children(panio, tmp_path):
    from jobhelp import wait_gone

    hook_pid, sleeper_pid = tmp_path / "hook.pid", tmp_path / "sleeper.pid"
    hook = script(tmp_path, "hang", f"sleep 120 & echo $! > {sleeper_pid}; echo $$ > {hook_pid}; wait")
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--off-cmd", hook, "--timeout-s", "0.5")
    started = time.monotonic()
    r = panio.fails("power", "off", "pico", code=22)
    assert time.monotonic() - started < 45  # stopped at its timeout, not after the hook's 120 s
    assert "off_cmd of pico" in r.err and "0.5 s" in r.err and "outcome is unknown" in r.err
    pids = [int(hook_pid.read_text()), int(sleeper_pid.read_text())]  # both ran: the hook and its child
    wait_gone(*pids, what="the hook or its child outlived panio")


@pytest.mark.parametrize("cmd,what", [("/nonexistent/relay on", "does not exist"),
                                      ("no-such-relay-tool on", "not found on PATH")])
def test_missing_hook_program_is_not_configured(panio, cmd, what):
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--on-cmd", cmd)
    r = panio.fails("power", "on", "pico", code=3)
    assert what in r.err and r.error["hook"] == "on_cmd of pico"


def test_hook_never_reaches_a_shell(panio, tmp_path):
    marker = tmp_path / "pwned"
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--state-cmd", f"echo on ; touch {marker}")
    assert panio("power-state", "pico").out == "Power ON (pico)\n"
    assert not marker.exists()


def test_state_hook_with_unreadable_output_fails(panio):
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--state-cmd", "echo maybe")
    r = panio.fails("power-state", "pico", code=9)
    assert "expected `on` or `off`" in r.err


def test_unreachable_plug_fails_the_hook_with_the_plug_named(panio):
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--cycle-cmd", "shellyplug -d 127.0.0.1:9 cycle")
    r = panio.fails("power-cycle", "pico", code=9)
    assert "plug 127.0.0.1:9 unreachable" in r.err and r.error["hook_exit"] == 4


def test_c1_tilde_cycle_script_runs_from_home(panio, tmp_path):
    home = tmp_path / "home"
    (home / "bin").mkdir()
    cycle = script(home / "bin", "cycle.sh", f'echo "$PANIO_TARGET $PANIO_POWER_ACTION" > {tmp_path}/cycled')
    assert cycle.endswith("/bin/cycle.sh")
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--cycle-cmd", "~/bin/cycle.sh")
    panio("power-cycle", "pico")
    assert (tmp_path / "cycled").read_text() == "pico cycle\n"
