"""SimHidRig: a CH9329 on the far end of a pseudo-terminal, plugged into a simulated board.

It reads the chip's serial frames from the PTY's master side, answers each as
the datasheet says (command + 0x80 and status 00; + 0xC0 and status E3 on a
bad checksum), and turns the reports into what a USB host would see: a key
*press* (a usage that was not down in the previous keyboard report) calls
``on_key(usage, modifiers)``; a left/right/middle button press (in an
absolute or a relative report) calls ``on_click(x, y, buttons)`` with the
pointer's last absolute position in the chip's 0..4095 space.
Every frame is also kept in ``frames`` (for tests of the wire format).
"""

from __future__ import annotations

import os
import select
import threading
from typing import Callable

from bench_agent.hid.backends import ch9329
from bench_agent.sim.console import open_pty, release_pty

OnKey = Callable[[int, int], None]
OnClick = Callable[[int, int, int], None]
INFO_DATA = bytes([0x30, 0x01, 0x00, 0, 0, 0, 0, 0])  # version 1.0, USB enumerated, no lock LEDs


class SimHidRig:
    def __init__(self, link: str | None, on_key: OnKey, on_click: OnClick) -> None:
        self._master, self._slave, self.slave_path = open_pty(link)
        self.link = link
        self.device = link or self.slave_path
        self.on_key, self.on_click = on_key, on_click
        self.frames: list[bytes] = []
        self._buf = bytearray()
        self._keys: set[int] = set()
        self._buttons = 0
        self.pointer = (2048, 2048)
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="sim-hidrig", daemon=True)

    def start(self) -> SimHidRig:
        self._thread.start()
        return self

    def close(self) -> None:
        os.write(self._stop_w, b"x")
        self._thread.join(5)
        release_pty((self._master, self._slave, self._stop_r, self._stop_w), self.link, self.slave_path)

    def _run(self) -> None:
        while True:
            ready, _, _ = select.select([self._master, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            try:
                self._buf += os.read(self._master, 4096)
            except OSError:
                continue
            self._frames()

    def _frames(self) -> None:
        while True:
            found, used = ch9329.parse(self._buf)
            del self._buf[:used]
            if found is None:
                return
            self.frames.append(found["raw"])
            if not found["ok"]:
                os.write(self._master, ch9329.reply(found["addr"], found["cmd"], ch9329.STATUS_ERR_SUM))
                continue
            self._handle(found["cmd"], found["data"])
            os.write(self._master, self._answer(found["addr"], found["cmd"]))

    def _answer(self, addr: int, cmd: int) -> bytes:
        if cmd == ch9329.CMD_GET_INFO:
            return ch9329.frame(cmd | ch9329.REPLY_OK, INFO_DATA, addr)
        return ch9329.reply(addr, cmd)

    def _handle(self, cmd: int, data: bytes) -> None:
        if cmd == ch9329.CMD_SEND_KB_GENERAL_DATA and len(data) == 8:
            keys = {k for k in data[2:] if k}
            for usage in sorted(keys - self._keys):
                self.on_key(usage, data[0])
            self._keys = keys
        elif cmd == ch9329.CMD_SEND_MS_ABS_DATA and len(data) == 7:
            self.pointer = (data[2] | data[3] << 8, data[4] | data[5] << 8)
            self._mouse_buttons(data[1])
        elif cmd == ch9329.CMD_SEND_MS_REL_DATA and len(data) == 5:
            self._mouse_buttons(data[1])

    def _mouse_buttons(self, buttons: int) -> None:
        pressed = buttons & ~self._buttons
        self._buttons = buttons
        if pressed:
            self.on_click(*self.pointer, pressed)
