"""The simulated board console, driven through real pyserial on its PTY."""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import time

import serial

from bench_agent.sim.console import PROMPT, SimConsole, flood_bytes
from jobhelp import wait_for


def read_until(port: serial.Serial, marker: bytes, timeout_s: float = 30.0) -> bytes:
    buf, end = b"", time.monotonic() + timeout_s
    while marker not in buf and time.monotonic() < end:
        buf += port.read(65536)
    assert marker in buf, f"no {marker!r} in {buf[-300:]!r}"
    return buf


def test_boots_to_shell_and_answers_commands():
    with SimConsole(boot_s=0.1, countdown_s=0.2, powered=False) as sim:
        port = serial.serial_for_url(sim.device, 115200, timeout=0.05)  # opening flushes input: open first
        screen = []
        sim.add_listener(screen.append)
        sim.power_on()
        boot = read_until(port, PROMPT.encode())
        assert b"".join(screen) == boot
        assert boot.startswith(b"panio simulated board\r\n") and b"Hit any key to stop autoboot: 0" in boot
        for line_end in (b"\r", b"\n", b"\r\n"):
            port.write(b"echo 'hello world'" + line_end)
            assert read_until(port, PROMPT.encode()) == b"echo 'hello world'\r\nhello world\r\n" + PROMPT.encode()
        port.write(b"uname -a\r")
        assert b"Linux sim" in read_until(port, PROMPT.encode())
        port.write(b"nosuch\r")
        assert b"sh: nosuch: not found" in read_until(port, PROMPT.encode())
        port.write(b"flood 300000\r")
        out = read_until(port, PROMPT.encode(), 60)
        assert out == b"flood 300000\r\n" + flood_bytes(300000) + b"\r\n" + PROMPT.encode()
        assert sim.boots == 1
        port.close()


def typed_while_off(sim: SimConsole, port: serial.Serial, data: bytes) -> None:
    """Type ``data`` at the console and wait until the board has read it (none of it waits on its PTY)."""
    port.write(data)
    wait_for(lambda: struct.unpack("i", fcntl.ioctl(sim._master, termios.TIOCINQ, b"\0" * 4))[0] == 0,
             timeout_s=60, every_s=0.01)


def test_one_key_stops_autoboot_and_power_off_is_silent():
    # a countdown no slow machine outruns: the key stops it whenever it comes
    with SimConsole(boot_s=0.1, countdown_s=600, powered=False) as sim:
        port = serial.serial_for_url(sim.device, 115200, timeout=0.05)
        typed_while_off(sim, port, b"uname -a\r")
        assert not sim.powered and sim.boots == 0
        sim.power_on()
        boot = read_until(port, b"Hit any key to stop autoboot: ")
        assert boot.startswith(b"panio simulated board\r\n"), boot[:200]  # nothing answered what came while off
        port.write(b" ")
        assert read_until(port, b"=> ").endswith(b"\r\n=> ")
        port.write(b"version\r")
        assert b"U-Boot 2024.01-sim" in read_until(port, b"=> ")
        port.write(b"boot\r")
        read_until(port, PROMPT.encode())
        sim.power_off()
        wait_for(lambda: sim.state == "off", timeout_s=60, every_s=0.01)
        typed_while_off(sim, port, b"echo x\r")
        assert sim.state == "off"
        sim.power_on()  # the next thing it says is its banner: it said nothing while off
        assert read_until(port, b"\r\n").startswith(b"panio simulated board\r\n")
        port.close()


def test_process_entry_point_runs_until_sigterm(tmp_path):
    link = tmp_path / "ttySIM"
    proc = subprocess.Popen([sys.executable, "-m", "bench_agent.sim.console", "--link", str(link), "--off",
                             "--boot-s", "0.1", "--countdown-s", "0.1"])
    try:
        wait_for(lambda: link.exists(), timeout_s=60, every_s=0.02)
        port = serial.serial_for_url(str(link), 115200, timeout=0.05)
        os.kill(proc.pid, signal.SIGUSR1)
        read_until(port, PROMPT.encode())
        port.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert not link.exists()
