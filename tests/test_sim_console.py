"""The simulated board console, driven through real pyserial on its PTY."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import serial

from bench_agent.sim.console import PROMPT, SimConsole, flood_bytes


def read_until(port: serial.Serial, marker: bytes, timeout_s: float = 5.0) -> bytes:
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
        out = read_until(port, PROMPT.encode(), 10)
        assert out == b"flood 300000\r\n" + flood_bytes(300000) + b"\r\n" + PROMPT.encode()
        assert sim.boots == 1
        port.close()


def test_one_key_stops_autoboot_and_power_off_is_silent():
    with SimConsole(boot_s=0.1, countdown_s=2, powered=False) as sim:
        port = serial.serial_for_url(sim.device, 115200, timeout=0.05)
        port.write(b"uname -a\r")
        time.sleep(0.2)
        assert port.read(4096) == b"" and not sim.powered and sim.boots == 0
        sim.power_on()
        read_until(port, b"autoboot: 2")
        port.write(b" ")
        assert read_until(port, b"=> ").endswith(b"\r\n=> ")
        port.write(b"version\r")
        assert b"U-Boot 2024.01-sim" in read_until(port, b"=> ")
        port.write(b"boot\r")
        read_until(port, PROMPT.encode())
        sim.power_off()
        time.sleep(0.1)
        port.write(b"echo x\r")
        time.sleep(0.2)
        assert port.read(4096) == b"" and sim.state == "off"
        port.close()


def test_process_entry_point_runs_until_sigterm(tmp_path):
    link = tmp_path / "ttySIM"
    proc = subprocess.Popen([sys.executable, "-m", "bench_agent.sim.console", "--link", str(link), "--off",
                             "--boot-s", "0.1", "--countdown-s", "0.1"])
    try:
        end = time.monotonic() + 10
        while not link.exists() and time.monotonic() < end:
            time.sleep(0.02)
        port = serial.serial_for_url(str(link), 115200, timeout=0.05)
        os.kill(proc.pid, signal.SIGUSR1)
        read_until(port, PROMPT.encode())
        port.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert not link.exists()
