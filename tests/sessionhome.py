"""The suite's own home: `make test` writes nothing into the home of the user who runs it.

Imported first by conftest, before anything reads ``HOME``: the session gets a fresh directory as ``HOME``
with the XDG directories unset, so they follow it (the default
results database, parse caches, Chromium's profile, Ansible's temp files land there), shared by the xdist
workers (they inherit the environment) and removed when the session ends. What is worth keeping between
runs is kept on purpose, outside any home: the QEMU board's kernel where `scripts/qemu-board-image.sh` put
it (``PANIO_QEMU_CACHE``) and the tests' downloads in ``PANIO_TEST_CACHE`` (``.test-cache/`` in the tree).

Control sockets whose path would be too long go to ``$TMPDIR/panio-<uid>/``; a capture killed with -9 by a
test leaves its socket there. The session's end removes the ones made during the session that nothing
listens on any more.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTED = time.time()
OWNED: str | None = None  # the home this process made (the xdist controller's), removed at its end

os.environ.setdefault("PANIO_QEMU_CACHE", "/var/cache/panio/qemu" if os.getuid() == 0 else os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "panio", "qemu"))
os.environ.setdefault("PANIO_TEST_CACHE", str(ROOT / ".test-cache"))
if "PANIO_TEST_HOME" not in os.environ:
    OWNED = tempfile.mkdtemp(prefix="panio-test-home-")
    os.chmod(OWNED, 0o711)  # a test's fresh user (tests/freshhost.py) may pass through, not list
    os.environ["PANIO_TEST_HOME"] = os.environ["HOME"] = OWNED
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME"):
        os.environ.pop(var, None)  # each follows HOME, the session's or a test's own (tests set HOME, not these)


def _listened(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        try:
            s.connect(path)
        except OSError:
            return False
    return True


def finish() -> None:
    """The end of the session (the process that made the home): stale sockets of this session, then the home."""
    if OWNED is None:
        return
    run = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"panio-{os.getuid()}")
    for entry in os.scandir(run) if os.path.isdir(run) else ():
        try:
            if entry.name.endswith(".sock") and entry.stat(follow_symlinks=False).st_mtime >= STARTED \
                    and not _listened(entry.path):
                os.unlink(entry.path)
        except OSError:
            pass
    shutil.rmtree(OWNED, ignore_errors=True)
