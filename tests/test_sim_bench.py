"""panio-sim: detached board processes, their lab file, the simboard:// sense line, and a clean down."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import serial

from bench_agent.sim import protocol_simboard
from bench_agent.sim.console import PROMPT
from simbench import at_shell, read_until, sim, sim_bench

if "bench_agent.sim" not in serial.protocol_handler_packages:
    serial.protocol_handler_packages.append("bench_agent.sim")


@pytest.fixture
def bench(panio, tmp_path):
    """A one-board simulated bench (Gen2, password) in tmp_path/sim; always brought down."""
    with sim_bench(panio, tmp_path / "sim", "--gen", "2", "--password", "pw") as bench:
        yield bench


def test_up_writes_a_lab_whose_board_power_cycles_through_the_plug(panio, bench):
    board = bench.boards()[0]
    lab = panio("config", "show").out
    assert "board0" in lab and "shellyplug -d 127.0.0.1:" in lab
    port = serial.serial_for_url(board["device"], 115200, timeout=0.05)
    try:
        at_shell(port)  # its first boot may have ended before the port was opened (which flushes it)
        assert port.cts and port.dsr and port.cd and not port.ri
        assert panio("power-state", "board0").out == "Power ON (board0)\n"
        panio("power", "off", "board0")
        assert not port.cts
        assert panio("power-state", "board0").out == "Power OFF (board0)\n"
        port.reset_input_buffer()
        panio("power", "on", "board0")
        assert b"panio simulated board board0" in read_until(port, PROMPT.encode())
        r = panio("power-cycle", "board0")
        assert r.out == "board0: power-cycled (cycle_cmd)\n"
        second = read_until(port, PROMPT.encode())
        assert b"DRAM:  512 MiB" in second and b"Hit any key to stop autoboot" in second
    finally:
        port.close()


def test_status_and_down_stop_exactly_the_board_processes(panio, bench):
    pid = bench.boards()[0]["pid"]
    out = sim("status", "--dir", str(bench.dir), env=panio.env).stdout
    assert out.startswith("board0: power on, console ") and f"pid {pid}" in out
    again = sim("up", "--dir", str(bench.dir), env=panio.env, check=False)
    assert again.returncode == 8 and "already running" in again.stderr
    assert "stopped 1 simulated board(s)" in sim("down", "--dir", str(bench.dir), env=panio.env).stdout
    assert not Path(f"/proc/{pid}").exists() or b"bench_agent.sim.board" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert not (bench.dir / "board0.tty").exists()
    gone = sim("down", "--dir", str(bench.dir), env=panio.env, check=False)
    assert gone.returncode == 10 and json.loads(gone.stderr.splitlines()[-1])["error"] == "not_running"


def test_gen1_bench_without_password(panio, tmp_path):
    with sim_bench(panio, tmp_path / "g1", "--gen", "1", boards=2, boot_s=0.1, countdown_s=0.1):
        panio("power", "off", "board1")
        assert panio("power-state", "board1").out == "Power OFF (board1)\n"
        assert panio("power-state", "board0").out == "Power ON (board0)\n"
        assert "-p" not in panio("config", "show").out.split()


@pytest.mark.parametrize("url,why", [("simboard:///dev/null", "state="),
                                     ("simboard:///dev/null?state=/x&lines=CTS,XYZ", "unknown line")])
def test_bad_simboard_urls_are_refused(url, why):
    with pytest.raises(serial.SerialException, match=why):
        protocol_simboard.parse(url)


def test_simboard_lines_follow_the_state_file(tmp_path):
    master, slave = os.openpty()
    state = tmp_path / "power"
    state.write_text("off\n")
    try:
        port = serial.serial_for_url(f"simboard://{os.ttyname(slave)}?state={state}&lines=RI", timeout=0)
        assert not port.ri
        state.write_text("on\n")
        assert port.ri and port.getRI() and not port.cts
        port.close()
    finally:
        os.close(master)
        os.close(slave)


def wait_log(panio, target: str, marker: str, count: int, timeout_s: float = 10.0) -> str:
    end = time.monotonic() + timeout_s
    while True:
        log = panio("serial", "log", target, "--tail", "500").out
        if log.count(marker) >= count or time.monotonic() > end:
            assert log.count(marker) >= count, f"{marker!r} x{count} not in serial log:\n{log[-1500:]}"
            return log
        time.sleep(0.1)


def test_power_cycle_shows_a_second_boot_in_the_serial_log(panio, bench):
    panio("serial", "watch", "board0")
    try:
        panio("power", "off", "board0")
        panio("power", "on", "board0")
        wait_log(panio, "board0", "Welcome to the panio simulated board", 1)
        panio("power-cycle", "board0")
        log = wait_log(panio, "board0", "Welcome to the panio simulated board", 2)
        assert log.count("panio simulated board board0") >= 2 and log.count("DRAM:  512 MiB") >= 2
        assert panio("power-state", "board0").out == "Power ON (board0)\n"
        panio("power", "set", "-t", "board0", "--state-cmd", "")
        panio("power", "off", "board0")  # the sense line is read through the running capture
        assert panio("power-state", "board0", "--json").json()[0]["source"] == "sense CTS (console)"
        assert panio("power-state", "board0").out == "Power OFF (board0)\n"
    finally:
        panio("serial", "stop", "board0", check=False)


def test_power_state_reads_the_sense_line_without_a_state_hook(panio, bench):
    panio("power", "set", "-t", "board0", "--state-cmd", "")
    assert panio("power-state", "board0", "--json").json() == [
        {"target": "board0", "level": None, "state": "on", "source": "sense CTS (console)"}]
    panio("power", "off", "board0")
    assert panio("power-state", "board0").out == "Power OFF (board0)\n"
    panio("serial", "set", "console", "-t", "board0", "--sense", "RI")
    panio("power", "on", "board0")
    assert panio("power-state", "board0").out == "Power OFF (board0)\n"  # RI is not wired to power
    panio("serial", "set", "console", "-t", "board0", "--no-sense")
    assert panio("power-state", "board0").out == "Power UNKNOWN (board0): no state_cmd or power_sense_signal\n"


def test_qemu_netboot_needs_the_qemu_board(panio, tmp_path):
    p = sim("up", "--dir", str(tmp_path / "sim"), "--qemu-netboot", env=panio.env, check=False)
    assert p.returncode == 2 and "--qemu-netboot needs --qemu" in p.stderr
    assert json.loads(p.stderr.splitlines()[-1])["error"] == "usage"
    assert not (tmp_path / "sim" / "sim.pids").exists()


@pytest.mark.parametrize("flag, value", [("--prompt", ""), ("--banner", "two\nlines"), ("--prompt", "x" * 81)])
def test_another_look_must_be_one_short_printable_line(panio, tmp_path, flag, value):
    p = sim("up", "--dir", str(tmp_path / "sim"), flag, value, env=panio.env, check=False)
    assert p.returncode == 2 and "give 1 to 80 printable characters" in p.stderr, p.stderr
    assert p.stderr.count("\n") == 2 and json.loads(p.stderr.splitlines()[-1])["error"] == "usage"
    assert not (tmp_path / "sim").exists()


def test_a_board_of_another_look_boots_to_its_prompt_and_says_so_in_its_profile(panio, tmp_path):
    """`--prompt`, `--banner`, `--no-setup`: the console shows that look and the lab's profile describes it."""
    with sim_bench(panio, tmp_path / "sim", "--prompt", "zeta> ", "--banner", "Zeta (v2) ready", "--no-setup") as b:
        import tomllib

        lab = tomllib.loads((tmp_path / "sim" / "lab.toml").read_text())
        assert lab["targets"]["board0"]["profile"] == {"prompt": "zeta> ", "screen_text": r"Zeta \(v2\) ready"}
        with serial.serial_for_url(b.boards()[0]["device"], 115200, timeout=0.2) as port:
            panio("power-cycle", "board0")
            seen = read_until(port, b"zeta> ", 30)
        assert b"Zeta (v2) ready" in seen and b"Press F2" not in seen and PROMPT.encode() not in seen


def test_a_netbooting_qemu_board_gets_a_tftp_root_and_a_netboot_table(tmp_path):
    """The lab and TFTP root `--qemu-netboot` writes (the boot itself: tests/eval/test_hardware_netboot.py)."""
    import tomllib

    from bench_agent.sim import bench as simbench
    from bench_agent.sim import qemu

    try:
        root = qemu.prepare_netboot(tmp_path, "qemu0", 6970)
    except Exception as exc:  # noqa: BLE001 - no kernel or busybox on this machine
        pytest.skip(f"no QEMU board image here: {exc}")
    assert sorted(p.name for p in root.iterdir()) == ["boot.ipxe", "initrd.img", "vmlinuz"]
    assert "kernel tftp://10.0.2.2:6970/vmlinuz console=tty0 console=ttyS0,115200" in (root / "boot.ipxe").read_text()
    assert "bootfile=tftp://10.0.2.2:6970/boot.ipxe" in " ".join(qemu._boot_argv(tmp_path, "qemu0"))
    lab = tomllib.loads(simbench.lab_toml([qemu.describe(tmp_path, "qemu0")], None))
    assert lab["targets"]["qemu0"]["netboot"] == {"interface": "lo", "server": "panio", "tftp_port": 6970,
                                                  "tftp_root": str(root)}


def test_one_process_hosts_every_board_each_on_its_own_console_and_plug(panio, tmp_path):
    """`--one-process --no-screen` (the scale harness's light far end): one pid, yet each board powers and
    boots on its own; `down` stops the one process."""
    with sim_bench(panio, tmp_path / "one", "--one-process", "--no-screen", boards=3, boot_s=0.1,
                   countdown_s=0.1) as b:
        boards = b.boards()
        assert len({x["pid"] for x in boards}) == 1 and len({x["plug"] for x in boards}) == 3
        assert len({x["pty"] for x in boards}) == 3 and not any(x["video"] or x["hid"] for x in boards)
        with serial.serial_for_url(boards[2]["device"], 115200, timeout=0.2) as port:
            panio("power", "off", "board1")
            assert panio("power-state", "board1").out == "Power OFF (board1)\n"
            assert panio("power-state", "board2").out == "Power ON (board2)\n"
            at_shell(port)  # its first boot may still be printing
            port.reset_input_buffer()
            panio("power-cycle", "board2")
            seen = read_until(port, PROMPT.encode(), 30)
            assert b"panio simulated board board2" in seen
            port.write(b"uname -a\r")
            assert b"Linux" in read_until(port, PROMPT.encode(), 10)
        pid = boards[0]["pid"]
        assert "stopped 3 simulated board(s)" in sim("down", "--dir", str(b.dir), env=panio.env).stdout
        assert not Path(f"/proc/{pid}").exists() or b"bench_agent.sim.board" not in Path(f"/proc/{pid}/cmdline").read_bytes()
