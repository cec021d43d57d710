"""The far end the serial benchmarks measure against: a raw PTY, linked at a path, answering request lines.

A benchmark re-runs its own script as ``SCRIPT --responder LINK`` for it, so
the responder never shares an interpreter with the side being timed:
``running(script, link)`` starts that child and waits for the link; the
child calls ``serve(link, answer)``. (The leading underscore keeps `make
bench` from running this module as a benchmark.)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import tty
from collections.abc import Callable, Iterator


def serve(link: str, answer: Callable[[int, bytes], None]) -> None:
    """Link ``link`` to a raw PTY and call ``answer(master_fd, line)`` for each ``\\r``-ended line, until killed."""
    master, slave = os.openpty()
    tty.setraw(slave)
    os.symlink(os.ttyname(slave), link)
    pending = b""
    try:
        while True:
            pending += os.read(master, 65536)
            while b"\r" in pending:
                line, pending = pending.split(b"\r", 1)
                answer(master, line)
    finally:
        os.unlink(link)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@contextlib.contextmanager
def running(script: str, link: str) -> Iterator[None]:
    """``script --responder link`` in a child, from the moment its link exists until the block ends."""
    resp = subprocess.Popen([sys.executable, script, "--responder", link])
    try:
        while not os.path.exists(link):
            time.sleep(0.01)
        yield
    finally:
        resp.terminate()
        resp.wait(10)
