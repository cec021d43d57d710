"""Fault injection for a simulated board: what its next boots do wrong, until cleared.

``panio-sim inject BOARD`` writes ``DIR/BOARD.faults.json``; the board's console
reads it at each boot (a running board needs no restart), so triage, health
checks and notifications can be shown a real failure with a known cause:

    boot_lines    extra lines among the kernel's boot lines (before init runs)
    drop_lines    boot lines that are not printed (any line containing one of these texts)
    boot_delay_s  the kernel stalls this long after "Starting kernel ..."
    no_prompt     the board never reaches its shell (the boot log ends before the prompt)
    version       another kernel version string (boot log, ``uname -a``, ``/proc/version``)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

KERNEL_VERSION = "6.1.0-sim"
KEYS = ("boot_lines", "drop_lines", "boot_delay_s", "no_prompt", "version")


def path(directory: Path, board: str) -> Path:
    return Path(directory) / f"{board}.faults.json"


def load(file: Path | None) -> dict[str, Any]:
    """The faults in force (none when the file is missing or unreadable: a board never fails to boot over it)."""
    if file is None:
        return {}
    try:
        data = json.loads(Path(file).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if k in KEYS} if isinstance(data, dict) else {}


def write(file: Path, faults: dict[str, Any]) -> None:
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps(faults, indent=2))
    os.replace(tmp, file)


def clear(file: Path) -> bool:
    """Remove the faults; True if there were any."""
    try:
        file.unlink()
        return True
    except FileNotFoundError:
        return False


def kernel_lines(faults: dict[str, Any], lines: list[str]) -> list[str]:
    """The kernel's boot lines with ``faults`` applied (the version, lines added and dropped)."""
    version = faults.get("version")
    out = [line.replace(KERNEL_VERSION, version) if version else line for line in lines]
    drop = faults.get("drop_lines") or []
    out = [line for line in out if not any(d in line for d in drop)]
    extra = list(faults.get("boot_lines") or [])
    at = next((i for i, line in enumerate(out) if "Run /sbin/init" in line), len(out))
    return out[:at] + extra + out[at:]


def version_of(faults: dict[str, Any], text: str) -> str:
    version = faults.get("version")
    return text.replace(KERNEL_VERSION, version) if version else text


# -- `panio-sim inject` ------------------------------------------------------------------------------

def add_parser(verb) -> None:
    i = verb("inject", "make a board's next boots go wrong in a known way (fault injection), until --clear",
             "The board reads its faults at each boot: power-cycle it (or run a job) to see them.\n"
             "Faults add up across calls; --clear ends them all; with no fault given it prints those in\n"
             "force. For triage demos and tests:\n"
             "`panio job triage ID` should name what was injected (docs/triage.md).",
             "panio-sim inject board0 --boot-line 'Kernel panic - not syncing: VFS: Unable to mount root fs'\n"
             "  panio-sim inject board0 --version 6.2.0-rc1 --boot-delay-s 5\n  panio-sim inject board0 --clear")
    i.add_argument("board", metavar="BOARD", help="the simulated board (board0, board1, ...)")
    i.add_argument("--boot-line", action="append", metavar="TEXT", help="print TEXT among the kernel's boot lines "
                   "(repeatable)")
    i.add_argument("--drop-line", action="append", metavar="TEXT", help="leave out the boot lines containing TEXT "
                   "(a driver that no longer probes; repeatable)")
    i.add_argument("--boot-delay-s", type=float, metavar="S", help="the kernel stalls S seconds after "
                   "'Starting kernel ...'")
    i.add_argument("--no-prompt", action="store_true", help="the board never reaches its shell prompt")
    i.add_argument("--version", metavar="TEXT", help="another kernel version string (boot log, uname, /proc/version)")
    i.add_argument("--clear", action="store_true", help="end every injected fault of BOARD")
    i.add_argument("--json", action="store_true", help="print the faults in force as JSON")


def inject(directory: Path, names: list[str], args) -> dict:
    """Add (or with ``--clear`` end) the faults of one board (of ``names``) of the bench in ``directory``; the
    faults in force."""
    from bench_agent.errors import UsageError

    if args.board not in names:
        where = f"its simulated boards: {', '.join(names)}" if names else "no simulated bench runs there"
        raise UsageError(f"no simulated board {args.board!r} in {directory} ({where})",
                         hint="see `panio-sim status`; QEMU boards take no injected faults")
    file = path(directory, args.board)
    given = {"boot_lines": args.boot_line, "drop_lines": args.drop_line, "boot_delay_s": args.boot_delay_s,
             "no_prompt": args.no_prompt or None, "version": args.version}
    given = {k: v for k, v in given.items() if v is not None}
    if args.clear:
        if given:
            raise UsageError("--clear ends every fault; give it alone", hint=f"panio-sim inject {args.board} --clear")
        clear(file)
        return {}
    now = load(file)
    if not given:  # nothing new: the faults in force
        return now
    _check_fault_text(given)
    for key in ("boot_lines", "drop_lines"):
        if key in given:
            given[key] = (now.get(key) or []) + given[key]
    now.update(given)
    write(file, now)
    return now


def _check_fault_text(given: dict) -> None:
    from bench_agent.errors import UsageError

    texts = [*given.get("boot_lines", []), *given.get("drop_lines", [])] + ([given["version"]] if "version" in given
                                                                          else [])
    for text in texts:
        if not text.strip() or any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise UsageError(f"{text!r} is not one printable line", hint="give the text of one boot line")
    delay = given.get("boot_delay_s")
    if delay is not None and not 0 < delay <= 3600:
        raise UsageError(f"--boot-delay-s must be more than 0 and at most 3600, not {delay:g}")


def words(faults: dict) -> str:
    words = [f"prints {line!r}" for line in faults.get("boot_lines", [])]
    words += [f"leaves out lines with {text!r}" for text in faults.get("drop_lines", [])]
    if faults.get("boot_delay_s"):
        words.append(f"stalls {faults['boot_delay_s']:g} s after 'Starting kernel ...'")
    if faults.get("no_prompt"):
        words.append("never reaches its shell prompt")
    if faults.get("version"):
        words.append(f"reports kernel {faults['version']}")
    return ", ".join(words)
