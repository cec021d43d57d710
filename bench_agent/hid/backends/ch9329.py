"""The CH9329 UART-to-USB-HID chip: its serial frames, checksums and replies, and a backend that speaks them.

A frame (datasheet, "communication protocol"): ``57 AB`` head, address
(``00`` by default), command, length, data, and a checksum byte = the low 8
bits of the sum of every byte before it. The chip answers each command with
the command code + ``0x80`` and a status byte (``00`` = success), or + ``0xC0``
on error. Worked example: key ``A`` down is
``57 AB 00 02 08 00 00 04 00 00 00 00 00 10`` and its reply ``57 AB 00 82 01 00 85``.

Absolute mouse coordinates on the wire are 0..4095; panio's logical
0..32767 is scaled down here, so every backend takes the same numbers.
"""

from __future__ import annotations

from typing import Any

from bench_agent.errors import DeviceError, Timeout, Unreachable
from bench_agent.hid.base import HidBackend

HEAD = b"\x57\xab"
CMD_GET_INFO = 0x01
CMD_SEND_KB_GENERAL_DATA = 0x02
CMD_SEND_MS_ABS_DATA = 0x04
CMD_SEND_MS_REL_DATA = 0x05
REPLY_OK, REPLY_ERROR = 0x80, 0xC0
STATUS_SUCCESS = 0x00
STATUS_ERR_SUM = 0xE3  # the datasheet's "checksum error" status
CH9329_ABS_MAX = 4095
DEFAULT_BAUD = 9600  # the CH9329's factory setting
REPLY_TIMEOUT_MS = 500  # a rig on a local UART answers in ~5 ms
REPLY_TIMEOUT_S = REPLY_TIMEOUT_MS / 1000


def checksum(data: bytes) -> int:
    return sum(data) & 0xFF


def frame(cmd: int, data: bytes = b"", addr: int = 0x00) -> bytes:
    body = HEAD + bytes([addr, cmd, len(data)]) + data
    return body + bytes([checksum(body)])


def keyboard(modifiers: int, usages: list[int]) -> bytes:
    keys = (list(usages) + [0] * 6)[:6]
    return frame(CMD_SEND_KB_GENERAL_DATA, bytes([modifiers, 0, *keys]))


def to_chip(logical: int) -> int:
    """panio's 0..32767 -> the chip's 0..4095."""
    return min(CH9329_ABS_MAX, logical * (CH9329_ABS_MAX + 1) // 32768)


def mouse_abs(x: int, y: int, buttons: int, wheel: int = 0) -> bytes:
    cx, cy = to_chip(x), to_chip(y)
    return frame(CMD_SEND_MS_ABS_DATA, bytes([0x02, buttons, cx & 0xFF, cx >> 8, cy & 0xFF, cy >> 8, wheel & 0xFF]))


def mouse_rel(dx: int, dy: int, buttons: int, wheel: int = 0) -> bytes:
    return frame(CMD_SEND_MS_REL_DATA, bytes([0x01, buttons, dx & 0xFF, dy & 0xFF, wheel & 0xFF]))


def parse(buf: bytes | bytearray) -> tuple[dict[str, Any] | None, int]:
    """The first whole frame in ``buf`` and how many bytes it used (garbage before a head is skipped).

    Returns (None, n) when no whole frame is there yet (n bytes of garbage may be dropped).
    A frame with a bad checksum is returned with ``"ok": False``.
    """
    start = buf.find(HEAD)
    if start < 0:
        return None, max(0, len(buf) - 1)
    if len(buf) - start < 6:
        return None, start
    length = buf[start + 4]
    end = start + 5 + length + 1
    if len(buf) < end:
        return None, start
    raw = bytes(buf[start:end])
    ok = checksum(raw[:-1]) == raw[-1]
    return {"addr": raw[2], "cmd": raw[3], "data": raw[5:-1], "ok": ok, "raw": raw}, end


def reply(addr: int, cmd: int, status: int = STATUS_SUCCESS) -> bytes:
    code = cmd | (REPLY_OK if status == STATUS_SUCCESS else REPLY_ERROR)
    return frame(code, bytes([status]), addr)


class Ch9329Backend(HidBackend):
    """A CH9329 on a serial port (pyserial URL or path); waits for each command's reply."""

    def __init__(self, device: str, baud: int = DEFAULT_BAUD, reply_timeout_s: float | None = None) -> None:
        import serial

        from bench_agent.serial.urls import refuse_unsupported

        refuse_unsupported(device, "HID rig")
        self.device, self.reply_timeout_s = device, reply_timeout_s or REPLY_TIMEOUT_S
        try:
            self._port = serial.serial_for_url(device, baudrate=baud, timeout=self.reply_timeout_s, exclusive=True)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise Unreachable(f"HID rig {device}: {exc}", hint="check the device path and that no other program "
                              "holds it", device=device, outcome="none") from exc  # not opened: nothing was sent
        self._buf = bytearray()

    def report(self, modifiers: int, usages: list[int]) -> None:
        self._command(keyboard(modifiers, usages))

    def mouse_abs(self, x: int, y: int) -> None:
        self._command(mouse_abs(x, y, 0))

    def mouse_buttons(self, buttons: int) -> None:
        self._command(mouse_rel(0, 0, buttons))  # a press where the pointer is, as a mouse button does

    def mouse_wheel(self, notches: int) -> None:
        self._command(mouse_rel(0, 0, 0, notches))

    def _command(self, data: bytes) -> None:
        import serial

        try:
            self._port.write(data)
            got = self._reply()
        except serial.SerialException as exc:
            raise Unreachable(f"HID rig {self.device}: {exc}", device=self.device) from exc
        if got["cmd"] != data[3] | REPLY_OK or got["data"][:1] != bytes([STATUS_SUCCESS]):
            raise DeviceError(f"HID rig {self.device} refused command 0x{data[3]:02x}: reply {got['raw'].hex(' ')}",
                              device=self.device)

    def _reply(self) -> dict[str, Any]:
        while True:
            found, used = parse(self._buf)
            del self._buf[:used]
            if found is not None:
                return found
            chunk = self._port.read(max(1, self._port.in_waiting))
            if not chunk:
                raise Timeout(f"HID rig {self.device} did not answer within {self.reply_timeout_s:g} s "
                              "(wrong baud rate or address? a rig on a slow link: raise [hid] reply_timeout_ms)",
                              device=self.device)
            self._buf += chunk

    def close(self) -> None:
        self._port.close()
