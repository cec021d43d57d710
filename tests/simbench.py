"""The simulated bench for tests: ``panio-sim up`` in a folder (boards whose consoles boot on PTYs behind
Shelly-protocol plugs, their screens and CH9329 rigs, a lab file and the bundled jobs), brought down whatever
happens; and reading a board's console or screen until something is there.

``sim_bench`` (a context manager) is the one way a test brings a bench up; conftest's ``sim_bench`` fixture is
the common case (one board, its console captured) and ``video_bench`` the module-wide bench with its screen.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from conftest import BIN

SIM = str(BIN / "panio-sim")
SHELL = b"root@sim:~# "
UBOOT = b"=> "


PROMPT = "root@sim:~# "


def boot_job(wait_ms: int, wait_timeout_s: float, then: str = "") -> str:
    """A job file that boots a simulated board as a suite's would: its capture running, a power-cycle, the shell's
    prompt within ``wait_ms``; ``then``: more ``[[steps]]`` after it."""
    return f"""name = "boot"
timeout_s = 60
[[steps]]
name = "capture is running"
run = "panio serial watch ${{target}}"
[[steps]]
name = "power-cycle"
run = "panio power-cycle ${{target}}"
timeout_s = 30
[[steps]]
name = "boots to a shell"
run = "panio serial wait ${{target}} --since-step --pattern '{PROMPT}' --timeout-ms {wait_ms}"
timeout_s = {wait_timeout_s:g}
""" + then


def sim(*args: str, env: dict, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """``panio-sim ARGS`` (``check``: it must exit 0)."""
    p = subprocess.run([SIM, *args], capture_output=True, text=True, env=env, timeout=timeout)
    assert not check or p.returncode == 0, p.stderr
    return p


class SimBench:
    """A running simulated bench in ``dir``; ``panio`` is pointed at its lab file (and is what calling it runs)."""

    def __init__(self, panio, directory: Path, up: subprocess.CompletedProcess) -> None:
        self.panio, self.dir, self.up = panio, directory, up

    @property
    def lab(self) -> Path:
        return self.dir / "lab.toml"

    @property
    def env(self) -> dict:
        return self.panio.env

    @property
    def state(self) -> Path:
        """The bench lab's state directory (its captures' logs and discovery files)."""
        return self.panio.state

    def __call__(self, *args: str, **kw):
        return self.panio(*args, **kw)

    def fails(self, *args: str, code: int):
        return self.panio.fails(*args, code=code)

    def boards(self) -> list[dict]:
        """What ``sim.pids`` says of each board (its pid, console ``device``, ``plug``, ...)."""
        return json.loads((self.dir / "sim.pids").read_text())

    @property
    def running(self) -> bool:
        return (self.dir / "sim.pids").exists()

    def down(self, check: bool = True) -> subprocess.CompletedProcess:
        return sim("down", "--dir", str(self.dir), env=self.env, check=check)

    def wait_shell(self, board: int = 0, timeout_s: float = 60) -> None:
        """Until the board (0: board0) has booted to its shell (``at_shell``)."""
        import serial

        if "bench_agent.sim" not in serial.protocol_handler_packages:
            serial.protocol_handler_packages.append("bench_agent.sim")
        port = serial.serial_for_url(self.boards()[board]["device"], 115200, timeout=0.1)
        try:
            at_shell(port, timeout_s)
        finally:
            port.close()


@contextmanager
def sim_bench(panio, directory: Path, *args: str, boards: int = 1, boot_s: float = 0.2, countdown_s: float = 0.3,
              booted: bool = False, watch: tuple[str, ...] = (), video: tuple[str, ...] = ()) -> Iterator[SimBench]:
    """``panio-sim up --dir DIRECTORY --boards N ... ARGS``, ``panio`` pointed at its lab, then (``booted``) each
    board's first boot waited for, and the serial captures of ``watch`` and the video captures of ``video``
    started. On the way out the video captures are stopped and the bench brought down (with the serial
    captures of its consoles), unless the test brought it down itself."""
    up = sim("up", "--dir", str(directory), "--boards", str(boards), "--boot-s", str(boot_s),
             "--countdown-s", str(countdown_s), *args, env=panio.env)
    panio.env["PANIO_LAB"] = str(directory / "lab.toml")
    bench = SimBench(panio, directory, up)
    try:
        for board in range(boards) if booted else ():
            bench.wait_shell(board)
        for target in watch:
            panio("serial", "watch", target)
        for target in video:
            panio("video", "watch", target)
        yield bench
    finally:
        for target in video:
            panio("video", "stop", target, check=False)
        if bench.running:
            bench.down(check=False)


def read_until(port, marker: bytes, timeout_s: float = 30) -> bytes:
    """Read a console (pyserial) until ``marker`` arrives; what was read."""
    buf, end = b"", time.monotonic() + timeout_s
    while marker not in buf and time.monotonic() < end:
        buf += port.read(4096)
    assert marker in buf, f"no {marker!r} within {timeout_s} s in {buf[-300:]!r}"
    return buf


def at_shell(port, timeout_s: float = 60) -> bytes:
    """Until the board on ``port`` answers at its shell prompt, whatever it was doing; what was read.

    Opening a port flushes what the board said before, so its prompt may be gone: while the board is quiet,
    ENTER asks for a new one (ignored while it boots; in the countdown it stops at U-Boot: boot on from there).
    """
    buf, end = b"", time.monotonic() + timeout_s
    while time.monotonic() < end:
        if buf.endswith(UBOOT):
            port.write(b"boot\r")
            return buf + read_until(port, SHELL, max(1.0, end - time.monotonic()))
        if buf.endswith(SHELL):
            return buf
        got = port.read(4096)
        if not got:
            port.write(b"\r")
        buf += got
    raise AssertionError(f"no shell prompt within {timeout_s} s: {buf[-300:]!r}")


def shell_ready(bench: SimBench, port, timeout_s: float = 60) -> None:
    """At the shell prompt, whatever the board was doing (an ENTER in the countdown stops at U-Boot: boot on)."""
    bench("hid", "send", "board0", "key", "ENTER")
    buf, end = b"", time.monotonic() + timeout_s
    while not buf.endswith((SHELL, UBOOT)) and time.monotonic() < end:
        buf += port.read(4096)
    if buf.endswith(UBOOT):
        bench("hid", "send", "board0", "type", "boot")
        bench("hid", "send", "board0", "key", "ENTER")
        read_until(port, SHELL, timeout_s)
    else:
        assert buf.endswith(SHELL), buf[-200:]


def hold_at_uboot(port, timeout_s: float = 60) -> bytes:
    """Stop the autoboot from the console: a key after each read (the board ignores keys while it boots) until
    the U-Boot prompt; the board then waits there however slow the machine is. What was read."""
    buf, end = b"", time.monotonic() + timeout_s
    while b"\r\n" + UBOOT not in buf and time.monotonic() < end:  # a key after the prompt is only echoed
        port.write(b" ")
        buf += port.read(4096)
    assert b"\r\n" + UBOOT in buf, f"no U-Boot prompt within {timeout_s} s: {buf[-300:]!r}"
    return buf


def screen_text(bench: SimBench, want: str, timeout_s: float = 60, target: str = "board0") -> str:
    """OCR the target's screen until ``want`` is on it; the text read."""
    end, text = time.monotonic() + timeout_s, ""
    while time.monotonic() < end:
        text = bench("video", "read", target).out
        if want in text:
            return text
        time.sleep(0.2)
    raise AssertionError(f"{want!r} never on screen within {timeout_s} s; last read:\n{text}")


def qemu_missing() -> str | None:
    """Why the QEMU board cannot run here (None when it can): a reason for skipif."""
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86 is not installed (scripts/system-deps.sh installs it)"
    if not os.path.isfile("/bin/busybox"):
        return "busybox-static is not installed (scripts/system-deps.sh installs it)"
    from bench_agent.errors import NotConfigured
    from bench_agent.sim import qemu_image

    try:
        qemu_image.kernel()
    except NotConfigured:
        return "no kernel for the QEMU board (scripts/qemu-board-image.sh fetches one)"
    return None
