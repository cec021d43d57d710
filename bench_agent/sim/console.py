"""SimConsole: a simulated board on the far end of a pseudo-terminal.

The slave side of a PTY pair is what a lab file names as the device (or a
symlink to it); this class drives the master side from one background thread:

    powered off   silent, input ignored
    power_on()    banner + boot log over ``boot_s``, then an autoboot countdown
                  ("Hit any key to stop autoboot: N") over ``countdown_s``;
                  ONE key stops it at the U-Boot prompt "=> ", otherwise the
                  kernel boots to the shell prompt "root@sim:~# " (``prompt``; the
                  kernel's last line before it is ``welcome``: another board's look)
    U-Boot        boot | reset | version | printenv | help; else "Unknown command"
    shell         uname -a, uname -r, cat /proc/version, echo ..., reboot, flood N
                  (exactly N bytes as fast as the PTY takes them, then a line end
                  if the cut left none, then the prompt); else "sh: X: not found"

Input lines may end in CR, LF or CRLF; typed characters are echoed, as a real
console does. ``python -m bench_agent.sim.console --link PATH`` runs one until
SIGTERM; in that process SIGUSR1 powers the board on and SIGUSR2 powers it off.
"""

from __future__ import annotations

import collections
import os
import select
import shlex
import threading
import time
import tty
from bench_agent.daemons.signals import set_on
from typing import Callable

PROMPT = "root@sim:~# "
UBOOT_PROMPT = "=> "
UNAME = "Linux sim 6.1.0-sim #1 SMP PREEMPT Thu Jan  1 00:00:00 UTC 2026 armv7l GNU/Linux"
PROC_VERSION = "Linux version 6.1.0-sim (panio@sim) (gcc 12.2.0) #1 SMP PREEMPT Thu Jan  1 00:00:00 UTC 2026"
UBOOT_VERSION = "U-Boot 2024.01-sim (Jan 01 2026 - 00:00:00 +0000)"
BOOT_LOG = [
    UBOOT_VERSION,
    "DRAM:  512 MiB",
    "Core:  42 devices, 14 uclasses, devicetree: separate",
    "MMC:   mmc@7e300000: 0",
    "Loading Environment from FAT... OK",
    "In:    serial",
    "Out:   serial",
    "Err:   serial",
    "Net:   eth0: ethernet@7d580000",
]
KERNEL_LOG = [
    "Starting kernel ...",
    "[    0.000000] Booting Linux on physical CPU 0x0",
    f"[    0.000000] {PROC_VERSION}",
    "[    0.120418] mmc0: new high speed SDHC card at address aaaa",
    "[    0.183207] usb 1-1: new high-speed USB device number 2 using dwc2",
    "[    0.254913] bcmgenet fd580000.ethernet eth0: Link is Up - 1Gbps/Full",
    "[    0.412345] Run /sbin/init as init process",
    "Welcome to the panio simulated board",
]
FLOOD_LINE = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def to_shell(transact: Callable[[str, str], str]) -> bool:
    """Bring a simulated board that was just powered or plugged in to its shell prompt; True when it came.
    ``transact(text, until)`` sends ``text`` and a newline on its console (``panio serial transact``) and
    returns what came back. A board still counting down to autoboot stops in U-Boot at that newline (the echo
    of a typed line is no answer): it is booted from there."""
    import re

    out = transact("", f"({re.escape(PROMPT)}|{re.escape(UBOOT_PROMPT)})")
    if out.rstrip().endswith(UBOOT_PROMPT.rstrip()):
        out = transact("boot", re.escape(PROMPT))
    return out.rstrip().endswith(PROMPT.rstrip())


def flood_bytes(n: int) -> bytes:
    """Exactly what ``flood n`` prints before its prompt: numbered 73-byte lines (CRLF included), cut at n bytes."""
    lines = (b"%08d " % i + FLOOD_LINE + b"\r\n" for i in range(n // 73 + 1))
    return b"".join(lines)[:n]


class SimConsole:
    """A simulated board's console on a PTY pair (see the module docstring)."""

    def __init__(self, link: str | None = None, *, banner: str = "panio simulated board", boot_s: float = 1.0,
                 countdown_s: float = 3.0, powered: bool = True, prompt: str = PROMPT,
                 welcome: str = KERNEL_LOG[-1]) -> None:
        self._master, self._slave, self.slave_path = open_pty(link)
        os.set_blocking(self._master, False)
        self.link = link
        self.device = link or self.slave_path
        self.banner, self.boot_s, self.countdown_s = banner, boot_s, countdown_s
        self.prompt, self.welcome = prompt, welcome  # another board's shell prompt and last kernel line
        self._lock = threading.Lock()
        self._powered, self._boots = False, 0
        self._want_on = powered
        self._state = "off"
        self._steps: collections.deque[tuple[float, Callable[[], None]]] = collections.deque()
        self._next_at = 0.0
        self._line = bytearray()
        self._after_cr = False
        self._requests: collections.deque[str] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        self._stop = threading.Event()
        self._listeners: list[Callable[[bytes], None]] = []
        self._injected: collections.deque[bytes] = collections.deque()
        self.notes: list[str] = []  # lines the firmware prints after the banner (settings from its setup menu)
        self.faults_file: str | None = None  # read at each boot (``sim.faults``: panio-sim inject)
        self._faults: dict = {}
        self._thread = threading.Thread(target=self._run, name="sim-console", daemon=True)

    # -- public ---------------------------------------------------------------------------------

    @property
    def powered(self) -> bool:
        return self._powered

    @property
    def boots(self) -> int:
        return self._boots

    @property
    def state(self) -> str:
        """off | boot | countdown | uboot | kernel | shell | busy."""
        return self._state

    def add_listener(self, listener: Callable[[bytes], None]) -> None:
        """Call ``listener(data)`` (on the console's thread) with everything the board prints, e.g. a simulated screen."""
        self._listeners.append(listener)

    def start(self) -> None:
        self._thread.start()
        if self._want_on:
            self.power_on()

    def power_on(self) -> None:
        with self._lock:
            if self._powered:
                return
            self._powered = True
            self._boots += 1
        self._request("on")

    def power_off(self) -> None:
        with self._lock:
            self._powered = False
        self._request("off")

    def inject(self, data: bytes) -> None:
        """Input from another source than the PTY (a USB keyboard on the board), handled as if typed there."""
        self._injected.append(data)
        os.write(self._wake_w, b"x")

    def close(self) -> None:
        self._stop.set()
        os.write(self._wake_w, b"x")
        if self._thread.is_alive():
            self._thread.join(5)
        release_pty((self._master, self._slave, self._wake_r, self._wake_w), self.link, self.slave_path)

    def __enter__(self) -> "SimConsole":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the thread -----------------------------------------------------------------------------

    def _request(self, what: str) -> None:
        self._requests.append(what)
        os.write(self._wake_w, b"x")

    def _run(self) -> None:
        while not self._stop.is_set():
            timeout = max(0.0, self._next_at - time.monotonic()) if self._steps else None
            ready, _, _ = select.select([self._master, self._wake_r], [], [], timeout)
            if self._wake_r in ready:
                os.read(self._wake_r, 512)
                self._handle_requests()
                while self._injected:
                    self._input(self._injected.popleft())
            if self._master in ready:
                self._read_input()
            self._run_due_steps()

    def _handle_requests(self) -> None:
        while self._requests:
            what = self._requests.popleft()
            self._steps.clear()
            self._line.clear()
            if what == "on":
                self._boot()
            else:
                self._state = "off"

    def _read_input(self) -> None:
        try:
            data = os.read(self._master, 4096)
        except OSError:  # EIO: no opener on the slave side right now
            time.sleep(0.01)
            return
        self._input(data)

    def _input(self, data: bytes) -> None:
        if self._state in ("off", "boot", "kernel", "busy"):
            return
        if self._state == "countdown":
            self._schedule([(0, lambda: self._enter("uboot", "\r\n" + UBOOT_PROMPT))], replace=True)
            return
        for byte in data:
            self._feed(byte)

    def _feed(self, byte: int) -> None:
        if byte == 0x0A and self._after_cr:
            self._after_cr = False
            return
        self._after_cr = byte == 0x0D
        if byte in (0x0D, 0x0A):
            self._out(b"\r\n")
            line = self._line.decode("utf-8", "replace").strip()
            self._line.clear()
            (self._uboot_command if self._state == "uboot" else self._shell_command)(line)
        elif byte in (0x08, 0x7F):
            if self._line:
                self._line.pop()
                self._out(b"\b \b")
        else:
            self._line.append(byte)
            self._out(bytes([byte]))

    def _run_due_steps(self) -> None:
        while self._steps and time.monotonic() >= self._next_at and not self._stop.is_set():
            _, action = self._steps.popleft()
            action()
            if self._steps:
                self._next_at = time.monotonic() + self._steps[0][0]

    def _schedule(self, steps: list[tuple[float, Callable[[], None]]], replace: bool = False) -> None:
        if replace:
            self._steps.clear()
        was_empty = not self._steps
        self._steps.extend(steps)
        if was_empty and self._steps:
            self._next_at = time.monotonic() + self._steps[0][0]

    # -- the board ------------------------------------------------------------------------------

    def _enter(self, state: str, text: str = "") -> None:
        self._state = state
        if text:
            self._out(text.encode())

    def _boot(self) -> None:
        self._state = "boot"
        lines = [self.banner, *self.notes, *BOOT_LOG]
        gap = self.boot_s / len(lines)
        steps = [(0 if i == 0 else gap, self._printer(line)) for i, line in enumerate(lines)]
        ticks = max(1, round(self.countdown_s))
        steps.append((gap, lambda: self._enter("countdown")))
        for n in range(ticks, -1, -1):
            steps.append((0 if n == ticks else self.countdown_s / ticks, self._printer(f"Hit any key to stop autoboot: {n}")))
        steps.append((0, self._start_kernel))
        self._schedule(steps, replace=True)

    def _start_kernel(self) -> None:
        from bench_agent.sim import faults

        self._state = "kernel"
        self._faults = faults.load(self.faults_file)
        lines = faults.kernel_lines(self._faults, KERNEL_LOG[:-1] + [self.welcome])
        steps = [(0.02, self._printer(line)) for line in lines]
        if self._faults.get("boot_delay_s") and len(steps) > 1:  # the kernel stalls after "Starting kernel ..."
            steps[1] = (0.02 + float(self._faults["boot_delay_s"]), steps[1][1])
        if not self._faults.get("no_prompt"):
            steps.append((0.02, lambda: self._enter("shell", self.prompt)))
        self._schedule(steps, replace=True)

    def _printer(self, line: str) -> Callable[[], None]:
        return lambda: self._out(line.encode() + b"\r\n")

    def _uboot_command(self, line: str) -> None:
        word = line.split(" ", 1)[0]
        if word in ("boot", "bootm", "run"):
            self._start_kernel()
            return
        if word == "reset":
            self._out(b"resetting ...\r\n")
            with self._lock:
                self._boots += 1
            self._boot()
            return
        replies = {"": "", "version": UBOOT_VERSION, "help": "boot printenv reset version",
                   "printenv": "bootcmd=run distro_bootcmd\r\nbootdelay=3\r\nbaudrate=115200"}
        reply = replies.get(word, f"Unknown command '{word}' - try 'help'")
        self._out((reply + "\r\n" if reply else "").encode() + UBOOT_PROMPT.encode())

    def _shell_command(self, line: str) -> None:
        try:
            argv = shlex.split(line)
        except ValueError:
            argv = line.split()
        if argv[:1] == ["reboot"]:
            self._out(b"reboot: Restarting system\r\n")
            with self._lock:
                self._boots += 1
            self._boot()
            return
        if argv[:1] == ["flood"]:
            self._flood(argv)
            return
        self._out(self._shell_reply(argv).encode() + self.prompt.encode())

    def _shell_reply(self, argv: list[str]) -> str:
        if not argv:
            return ""
        if argv == ["uname", "-a"]:
            return self._version(UNAME) + "\r\n"
        if argv == ["uname", "-r"]:
            return self._version("6.1.0-sim") + "\r\n"
        if argv == ["cat", "/proc/version"]:
            return self._version(PROC_VERSION) + "\r\n"
        if argv[0] == "echo":
            return " ".join(argv[1:]) + "\r\n"
        return f"sh: {argv[0]}: not found\r\n"

    def _version(self, text: str) -> str:
        from bench_agent.sim import faults

        return faults.version_of(self._faults, text)

    def _flood(self, argv: list[str]) -> None:
        if len(argv) != 2 or not argv[1].isdigit():
            self._out(b"usage: flood N\r\n" + self.prompt.encode())
            return
        self._state = "busy"
        data, n = memoryview(flood_bytes(int(argv[1]))), int(argv[1])
        for start in range(0, n, 65536):
            if self._stop.is_set() or not self._powered:
                return
            self._out(data[start:start + 65536])
        self._enter("shell", ("" if data[-1:] == b"\n" else "\r\n") + self.prompt)

    def _out(self, data: bytes | memoryview) -> None:
        """Write all of data to the master, waiting while the PTY is full (a reader drains it)."""
        for listener in self._listeners:
            listener(bytes(data))
        view = memoryview(data)
        while view and not self._stop.is_set():
            try:
                view = view[os.write(self._master, view):]
            except BlockingIOError:
                select.select([], [self._master], [], 0.2)
            except OSError:
                return


def open_pty(link: str | None) -> tuple[int, int, str]:
    """A raw PTY pair and, if ``link`` is given, that symlink to its slave side: (master fd, slave fd, slave path)."""
    master, slave = os.openpty()
    tty.setraw(slave)
    slave_path = os.ttyname(slave)
    if link:
        _symlink(slave_path, link)
    return master, slave, slave_path


def release_pty(fds: tuple[int, ...], link: str | None, slave_path: str) -> None:
    """Close ``fds`` (one already closed is no error) and remove ``link`` if it still points to this PTY."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    if link and os.path.islink(link) and os.readlink(link) == slave_path:
        os.unlink(link)


def _symlink(target: str, link: str) -> None:
    tmp = f"{link}.{os.getpid()}.tmp"
    os.symlink(target, tmp)
    os.replace(tmp, link)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal

    p = argparse.ArgumentParser(prog="python -m bench_agent.sim.console",
                                description="Run a simulated board console on a PTY until SIGTERM.")
    p.add_argument("--link", required=True, help="symlink to create to the PTY's slave side (the device path)")
    p.add_argument("--off", action="store_true", help="start powered off (SIGUSR1 powers on, SIGUSR2 off)")
    p.add_argument("--boot-s", type=float, default=1.0, help="seconds of boot log before the countdown")
    p.add_argument("--countdown-s", type=float, default=3.0, help="seconds of autoboot countdown")
    p.add_argument("--banner", default="panio simulated board", help="first line of every boot")
    a = p.parse_args(argv)
    done = threading.Event()
    set_on(done)
    # Handlers before the link exists: a starter that sees the link may signal at once.
    wanted: list[str] = []
    signal.signal(signal.SIGUSR1, lambda *_: wanted.append("on"))
    signal.signal(signal.SIGUSR2, lambda *_: wanted.append("off"))
    sim = SimConsole(a.link, banner=a.banner, boot_s=a.boot_s, countdown_s=a.countdown_s, powered=not a.off)
    signal.signal(signal.SIGUSR1, lambda *_: sim.power_on())
    signal.signal(signal.SIGUSR2, lambda *_: sim.power_off())
    sim.start()
    for what in wanted:  # a signal that came before the console was made
        sim.power_on() if what == "on" else sim.power_off()
    while not done.wait(3600):
        pass
    sim.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
