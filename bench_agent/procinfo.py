"""What /proc says about a process: alive, and its command line.

Kept apart from ``bench_agent.process`` (children, subprocess, signals) so that a
reading command that only asks "is the capture running?" (`panio serial log`)
imports two functions, not the child-process machinery or pyserial.
"""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (one of another user's counts; a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def command_line(pid: int) -> str:
    """``pid``'s command line, its arguments joined by spaces ("?" if it cannot be read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"
