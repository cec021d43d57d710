"""SimBoard: one simulated board — its console on a PTY, the Shelly plug that powers it, its screen and HID rig.

The plug's relay switches the console's power and records it in a state file
(``on``/``off``) that the ``simboard://`` pyserial handler reads as the sense
line. ``python -m bench_agent.sim.board --dir DIR --name NAME`` hosts one
board until SIGTERM and writes ``DIR/NAME.json`` (pid, device, plug port)
when it is ready; ``panio-sim up`` starts these. ``--name`` again hosts another board in the same process
(``panio-sim up --one-process``: each board still its own console PTY and plug port, one interpreter for all).

The screen (``sim.screen``) shows the console and, after F2 on the HID
keyboard during boot (or at the U-Boot prompt), the firmware's setup menu; it is served as MJPEG on
loopback (``sim.mjpeg``). The HID rig (``sim.hidrig``) is a CH9329 on a second
PTY: its key presses reach the console as a USB keyboard's would, its clicks
reach the setup menu. Settings saved in the menu persist in ``DIR/NAME.setup.json``
and show in the next boot log ("Network boot: enabled").

Another board's look, for checks that must not assume this one: ``prompt`` (its shell prompt),
``banner`` (its first boot line and last kernel line: what its screen shows once up) and
``setup=False`` (no setup menu). ``describe()`` carries the lab's ``profile`` table that says so.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench_agent.sim import console as console_mod
from bench_agent.sim import faults, keys
from bench_agent.sim.console import SimConsole
from bench_agent.sim.plug import SimPlug
from bench_agent.daemons.signals import set_on


class SimBoard:
    def __init__(self, name: str, directory: Path, *, gen: int = 2, password: str | None = None,
                 boot_s: float = 1.0, countdown_s: float = 3.0, powered: bool = True, port: int = 0,
                 screen: bool = True, prompt: str | None = None, banner: str | None = None,
                 setup: bool = True) -> None:
        self.name, self.dir, self.gen, self.password = name, Path(directory), gen, password
        self.state_file = self.dir / f"{name}.power"
        self._write_state(powered)
        # another board's look: its prompt, and a banner that is its first boot line and its last kernel line
        self.setup = setup  # False: a board without a setup menu (F2 is just a key)
        self.prompt, self.banner = prompt or console_mod.PROMPT, banner
        self.console = SimConsole(str(self.dir / f"{name}.tty"), banner=banner or f"panio simulated board {name}",
                                  boot_s=boot_s, countdown_s=countdown_s, powered=powered, prompt=self.prompt,
                                  welcome=banner or console_mod.KERNEL_LOG[-1])
        self.plug = SimPlug(gen=gen, password=password, output=powered, port=port, on_switch=self._switch)
        self.console.faults_file = str(faults.path(self.dir, name))  # `panio-sim inject`, read at each boot
        self.settings_file = self.dir / f"{name}.setup.json"
        self.settings = _load_settings(self.settings_file)
        self._apply_settings()
        self.screen = self.mjpeg = self.rig = None
        if screen:
            from bench_agent.sim.hidrig import SimHidRig
            from bench_agent.sim.mjpeg import MjpegServer
            from bench_agent.sim.screen import SimScreen

            self.screen = SimScreen()
            self.screen.powered = powered
            self.console.add_listener(self.screen.console_output)
            self.mjpeg = MjpegServer(self.screen)
            self.rig = SimHidRig(str(self.dir / f"{name}.hid"), self._key, self._click)

    @property
    def url(self) -> str:
        """The device string for the lab file: the PTY through the ``simboard://`` handler."""
        return f"simboard://{quote(self.console.device)}?state={quote(str(self.state_file))}"

    def start(self) -> SimBoard:
        if self.mjpeg:
            self.mjpeg.start()
            self.rig.start()
        self.console.start()
        self.plug.start()
        return self

    def close(self) -> None:
        self.plug.close()
        if self.mjpeg:
            self.rig.close()
            self.mjpeg.close()
        self.console.close()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "pid": os.getpid(), "device": self.url, "pty": self.console.device,
                "state_file": str(self.state_file), "plug": f"127.0.0.1:{self.plug.port}", "gen": self.gen,
                "password": bool(self.password),
                "video": self.mjpeg.url if self.mjpeg else None, "hid": self.rig.device if self.rig else None,
                "profile": self.profile()}

    def profile(self) -> dict[str, Any]:
        """The lab's ``[targets.NAME.profile]`` of this board: how checks recognise it (docs/lab-file.md)."""
        import re

        def literal(text: str) -> str:  # a regex matching text (re.escape also escapes spaces, '~', '#': unreadable)
            return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", text)

        out: dict[str, Any] = {"prompt": literal(self.prompt),
                               "screen_text": literal(self.banner) if self.banner else "(?i)simulated board"}
        if self.setup and self.screen:
            out.update(setup_key=["ENTER", "F2"], setup_cue="Hit any key", setup_text="Setup Utility")
        return out

    def _switch(self, on: bool) -> None:
        self._write_state(on)
        if self.screen:
            self.screen.power(on)
        if on:
            self.console.power_on()
        else:
            self.console.power_off()

    # -- the USB keyboard and mouse (the HID rig), and the setup menu ------------------------------

    def _key(self, usage: int, modifiers: int) -> None:
        if self.screen.menu is not None:
            self._menu_key(usage)
        elif self.setup and usage == keys.F2 and self.console.state in ("boot", "countdown", "uboot"):
            self.console.power_off()  # the firmware holds the boot while its setup runs
            self.screen.open_menu(self.settings)
        else:
            data = keys.to_bytes(usage, modifiers)
            if data:
                self.console.inject(data)

    def _menu_key(self, usage: int) -> None:
        menu = self.screen.menu
        if usage in (keys.UP, keys.DOWN):
            menu.selected = (menu.selected + (1 if usage == keys.DOWN else -1)) % len(menu.ITEMS)
            self.screen.menu_changed()
        elif usage == keys.ENTER:
            self._menu_result(menu.activate(menu.selected))
        elif usage == keys.ESC:
            self._menu_result("discard")

    def _click(self, x: int, y: int, buttons: int) -> None:
        if self.screen.menu is None or not buttons & 0x01:
            return
        col, row = self.screen.cell_at(x * self.screen.width // 4096, y * self.screen.height // 4096)
        index = self.screen.menu.item_at(row)
        if index is not None:
            self._menu_result(self.screen.menu.activate(index))

    def _menu_result(self, result: str | None) -> None:
        if result is None:
            self.screen.menu_changed()
            return
        if result == "save":
            self.settings = dict(self.screen.menu.settings)
            tmp = self.settings_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.settings))
            os.replace(tmp, self.settings_file)
            self._apply_settings()
        self.screen.close_menu()
        self.console.power_on()

    def _apply_settings(self) -> None:
        if not self.setup:
            self.console.notes = []
            return
        self.console.notes = ["Press F2 for setup",
                              f"Network boot: {'enabled' if self.settings.get('network_boot') else 'disabled'}"]

    def _write_state(self, on: bool) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text("on\n" if on else "off\n")
        os.replace(tmp, self.state_file)


def _load_settings(path: Path) -> dict[str, Any]:
    try:
        return {"network_boot": False, **json.loads(path.read_text())}
    except (OSError, ValueError):
        return {"network_boot": False}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench_agent.sim.board",
                                description="Host one simulated board (or several: --name again) until SIGTERM.")
    p.add_argument("--dir", required=True, type=Path)
    p.add_argument("--name", required=True, action="append",
                   help="the board's name; again for another board in this process (each its own PTY and plug)")
    p.add_argument("--gen", type=int, choices=(1, 2), default=2)
    p.add_argument("--password")
    p.add_argument("--boot-s", type=float, default=1.0)
    p.add_argument("--countdown-s", type=float, default=3.0)
    p.add_argument("--off", action="store_true", help="start powered off")
    p.add_argument("--no-screen", action="store_true", help="no screen and no HID rig")
    p.add_argument("--prompt", help="its shell prompt (default 'root@sim:~# ')")
    p.add_argument("--banner", help="its first boot line and last kernel line (what its screen shows once up)")
    p.add_argument("--no-setup", action="store_true", help="no setup menu (F2 is just a key)")
    a = p.parse_args(argv)
    done = threading.Event()
    set_on(done)
    boards = []
    for name in a.name:
        board = SimBoard(name, a.dir, gen=a.gen, password=a.password or os.environ.get("PANIO_SIM_PASSWORD"),
                         boot_s=a.boot_s, countdown_s=a.countdown_s, powered=not a.off,
                         screen=not a.no_screen, prompt=a.prompt, banner=a.banner, setup=not a.no_setup).start()
        boards.append(board)
        ready = a.dir / f"{name}.json"
        tmp = ready.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(board.describe()))
        os.replace(tmp, ready)
    while not done.wait(3600):
        pass
    for board in boards:
        board.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
