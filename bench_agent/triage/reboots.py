"""Boots seen in a serial log: a board that starts again prints its first banner again (U-Boot, a BIOS, iPXE, the
kernel's ``Booting Linux``).

A boot the job did not ask for (no power step, no reset) and that nothing on the board announced first (no panic,
no ``reboot``, no watchdog in the lines before it) is the plug's doing: power lost for a moment between two power
reads, which the reads miss. The lab probe (``bench_agent.jobs.lab_probe``) counts it as the lab's power event,
not the board's failure.
"""

from __future__ import annotations

import re

BANNER = re.compile(r"U-Boot (SPL )?\d{4}\.\d\d|Booting Linux on physical CPU|Linux version \d|SeaBIOS \(version|"
                    r"iPXE \d|^\s*BIOS \w")
OWN = re.compile(r"(?i)kernel panic|\breboot|restarting system|rebooting|watchdog|\breset\b|system halted|"
                 r"power down|Oops|BUG:")
ONE_BOOT_LINES = 300  # banners this close belong to one boot (U-Boot, then the kernel it starts)
LOOK_BACK = 10  # lines before a boot where the board may have announced it


def boots(lines: list[str]) -> list[dict]:
    """Each boot's first banner in ``lines``: ``{"line": index, "text", "own"}``, ``own`` when the lines just
    before it say the board went down by itself (a panic, a reboot it was told or chose, a watchdog)."""
    out: list[dict] = []
    for i, text in enumerate(lines):
        if not BANNER.search(text):
            continue
        if out and i - out[-1]["line"] <= ONE_BOOT_LINES and not _between_boots(lines, out[-1]["line"], i):
            continue
        before = lines[max(0, i - LOOK_BACK):i]
        out.append({"line": i, "text": text.strip(), "own": any(OWN.search(x) for x in before)})
    return out


def _between_boots(lines: list[str], start: int, end: int) -> bool:
    """The board reached a shell or went down again between two banners: they are two boots."""
    return any(OWN.search(x) or x.rstrip().endswith(("login:", "# ", "$ ")) for x in lines[start + 1:end])


def unasked(lines: list[str], expected: int = 0) -> dict | None:
    """A boot the board did not announce, beyond the ``expected`` ones (a power or reset step's own); None if none."""
    seen = boots(lines)
    silent = [b for b in seen if not b["own"]]
    return silent[expected] if len(silent) > expected else None
