"""A QEMU board's keyboard and absolute mouse through QMP ``input-send-event``.

Key reports become key-down/key-up events of QEMU qcodes; the pointer needs a
``usb-tablet`` device in the VM (the QEMU board has one) and takes panio's
0..32767 logical space as it is. Each report is one QMP connection (``qmp.run``),
so the keyboard shares the board's one ``-qmp`` socket with ``video watch`` and
a lab's power hook (the held keys are remembered here, not in the connection).
"""

from __future__ import annotations

from bench_agent.hid.base import KEYS, MODIFIER_QCODES, USAGE_NAMES, HidBackend
from bench_agent import qmp

BUTTON_NAMES = {0x01: "left", 0x02: "right", 0x04: "middle"}
RELEASE_TURN_S = 15.0


class QmpBackend(HidBackend):
    def __init__(self, socket_path: str) -> None:
        self.path = socket_path
        self._down: set[str] = set()
        self._buttons = 0

    def report(self, modifiers: int, usages: list[int]) -> None:
        want = {q for bit, q in MODIFIER_QCODES.items() if modifiers & bit}
        want |= {KEYS[USAGE_NAMES[u]][1] for u in usages}
        events = [_key(q, False) for q in sorted(self._down - want)]
        events += [_key(q, True) for q in _modifiers_first(want - self._down)]
        if events:
            self._send(events)
        self._down = want

    def mouse_abs(self, x: int, y: int) -> None:
        self._send([{"type": "abs", "data": {"axis": "x", "value": x}},
                    {"type": "abs", "data": {"axis": "y", "value": y}}])

    def mouse_buttons(self, buttons: int) -> None:
        events = []
        for bit, name in BUTTON_NAMES.items():
            if (buttons ^ self._buttons) & bit:
                events.append({"type": "btn", "data": {"down": bool(buttons & bit), "button": name}})
        self._buttons = buttons
        if events:
            self._send(events)

    def mouse_wheel(self, notches: int) -> None:
        name = "wheel-up" if notches > 0 else "wheel-down"
        for _ in range(abs(notches)):
            self._send([{"type": "btn", "data": {"down": True, "button": name}}])
            self._send([{"type": "btn", "data": {"down": False, "button": name}}])

    def _send(self, events: list[dict], turn_s: float = qmp.TURN_S) -> None:
        qmp.run(self.path, "input-send-event", turn_s=turn_s, events=events)

    def close(self) -> None:
        """Release what a failed command left pressed (the socket was taken between press and release): a held
        key would repeat in the guest, so this waits longer for its turn."""
        events = [_key(q, False) for q in sorted(self._down)]
        events += [{"type": "btn", "data": {"down": False, "button": name}} for bit, name in BUTTON_NAMES.items()
                   if self._buttons & bit]
        if events:
            from bench_agent.errors import PanioError

            try:
                self._send(events, turn_s=RELEASE_TURN_S)
            except PanioError:
                pass  # the error that stopped the command is the one the caller sees
        self._down, self._buttons = set(), 0


def _key(qcode: str, down: bool) -> dict:
    return {"type": "key", "data": {"down": down, "key": {"type": "qcode", "data": qcode}}}


def _modifiers_first(qcodes: set[str]) -> list[str]:
    mods = set(MODIFIER_QCODES.values())
    return sorted(qcodes & mods) + sorted(qcodes - mods)
