"""pyserial URL handler ``simboard://``: a simulated board's PTY whose modem lines show its power.

A PTY has no modem lines, so a real sense line (``power_sense_signal =
"CTS"``) cannot be read from it. This handler opens the PTY as usual and
answers ``cts``/``dsr``/``cd`` (and ``ri`` when asked; ``getCTS()`` etc. follow) from the
board's power, which the simulated bench writes to a state file (``on`` or
``off``)::

    simboard:///dev/pts/7?state=/tmp/sim/board0.power
    simboard:///dev/pts/7?state=/tmp/sim/board0.power&lines=CTS,RI

``lines`` names the signals wired to power (default ``CTS,DSR,DCD``); the
others read as not asserted. Everything else (read, write, baud) is plain
pyserial on the PTY, so the production code path is unchanged: pyserial finds
this module because ``bench_agent.sim`` is in ``serial.protocol_handler_packages``.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import serial

DEFAULT_LINES = ("CTS", "DSR", "DCD")
SIGNALS = ("CTS", "DSR", "DCD", "RI")


def parse(url: str) -> tuple[str, Path, tuple[str, ...]]:
    """``(pty path, state file, powered lines)`` of a ``simboard://`` URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "simboard":
        raise serial.SerialException(f"expected a simboard:// URL, not {url!r}")
    device = unquote(parts.netloc + parts.path)
    query = parse_qs(parts.query)
    if not device or "state" not in query:
        raise serial.SerialException(f"{url!r}: use simboard://<pty path>?state=<file>[&lines=CTS,DSR]")
    lines = tuple(s.strip().upper() for s in query.get("lines", [",".join(DEFAULT_LINES)])[-1].split(",") if s.strip())
    unknown = [s for s in lines if s not in SIGNALS]
    if unknown:
        raise serial.SerialException(f"{url!r}: unknown line(s) {', '.join(unknown)}; choose from {', '.join(SIGNALS)}")
    return device, Path(query["state"][-1]), lines


def board_powered(state_file: Path) -> bool:
    try:
        return state_file.read_text().strip() == "on"
    except OSError:
        return False


def serial_class_for_url(url: str) -> tuple[str, type[serial.Serial]]:
    """pyserial's hook: the PTY path to open, and a Serial class bound to the board's power."""
    device, state_file, lines = parse(url)

    class SimBoardSerial(serial.Serial):
        def _line(self, name: str) -> bool:
            if not self.is_open:
                raise serial.PortNotOpenError()
            return name in lines and board_powered(state_file)

        @property
        def cts(self) -> bool:
            return self._line("CTS")

        @property
        def dsr(self) -> bool:
            return self._line("DSR")

        @property
        def cd(self) -> bool:
            return self._line("DCD")

        @property
        def ri(self) -> bool:
            return self._line("RI")

    return device, SimBoardSerial
