"""Where serial state lives on a control host, in the lab's state directory (``<state>/labs/<lab key>``,
``bench_agent.paths.lab_state_dir``; ``<state>`` itself for a caller with no lab):

    <state>/serial/<target>/<iface>.log[.N]   record logs (current segment, older ones)
    <state>/serial/<target>/<iface>.log[.N].gaps  each segment's gap count (see logstore)
    <state>/serial/<target>/epoch             last capture epoch of the target
    <state>/daemons/serial-<target>.json      discovery file of a running supervisor
    <state>/run/serial-<target>.sock          control socket (/tmp/panio-<uid>/serial-<hash>.sock if too long)

The socket's directory is private (``bench_agent.private``: 0700, ours, checked before use): a ``/tmp/panio-<uid>``
that another user made first is refused, never used.

``PANIO_STATE_DIR`` overrides the state directory, as on the controller side.
"""

from __future__ import annotations

import os

from bench_agent.paths import lab_state_dir, lab_state_dir_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

MAX_SOCKET_PATH = 100
SUPERVISOR = "bench_agent.serial.supervisor"  # the capture daemon's module, in its command line


def state_dir() -> Path:
    """The current lab's state directory: every serial path below is a lab's."""
    return lab_state_dir()


def target_dir(target: str, state: Path | None = None) -> Path:
    return (state or state_dir()) / "serial" / target


def log_path(target: str, iface: str, state: Path | None = None) -> Path:
    return target_dir(target, state) / f"{iface}.log"


def log_name(target: str, iface: str) -> str:
    """``log_path`` in the current lab's state dir, as a string: a reading command (`serial log`) needs no pathlib
    (pathlib imports urllib.parse and ipaddress: a tenth of that command's start-up)."""
    return os.path.join(lab_state_dir_name(), "serial", target, f"{iface}.log")


def daemons_dir(state: Path | None = None) -> Path:
    return (state or state_dir()) / "daemons"


def every_lab_daemons_dir() -> list[Path]:
    """The daemons directories of every lab on this machine, and the bare one (no lab, or from before labs):
    for what is physical and shared by all of them, a network port that one lab's capture holds."""
    from bench_agent.paths import known_labs, legacy_state_dir

    return [daemons_dir(legacy_state_dir()), *(daemons_dir(lab_state_dir(key)) for key in known_labs())]


def discovery_path(target: str, state: Path | None = None) -> Path:
    return daemons_dir(state) / f"serial-{target}.json"


# socket_address by (state directory, kind, target), when short; a dict, as paths._LAB_DIRS (no functools at start-up)
_SOCKETS: dict[tuple[str, str, str], str] = {}


def socket_address(target: str, state: Path | None = None, kind: str = "serial") -> str:
    """The control socket's path; when that would be too long for a unix socket, a short one in a private /tmp dir.
    Its directory is made private and checked first (``Refused`` if another user could reach it)."""
    base = str(state) if state is not None else lab_state_dir_name()
    path = _SOCKETS.get((base, kind, target))  # asked at every request to a daemon: a join less
    if path is not None:
        return path
    path = os.path.join(base, "run", f"{kind}-{target}.sock")
    if len(path) > MAX_SOCKET_PATH:
        import hashlib

        digest = hashlib.sha256(path.encode()).hexdigest()[:24]
        path = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"panio-{os.getuid()}", f"{kind}-{digest}.sock")
    from bench_agent.private import private_dir

    private_dir(os.path.dirname(path))  # once a process and path: what we checked, no one else can replace
    if len(_SOCKETS) >= 256:
        _SOCKETS.clear()
    _SOCKETS[base, kind, target] = path
    return path


def discovery(target: str, state: Path | None = None) -> dict | None:
    """The running supervisor's discovery record, or None (a record whose pid is gone counts as none, and so does
    one someone else could have written: ``private.trusted_read``). Here, not in ``client``, so a reading command
    learns whether a capture runs without importing it."""
    where = os.path.join(lab_state_dir_name(), "daemons", f"serial-{target}.json") if state is None else \
        discovery_path(target, state)
    from bench_agent.private import trusted_read

    text = trusted_read(str(where))
    if text is None:
        return None
    import json  # only when a capture has run: a read of a stopped target's log need not import it

    try:
        info = json.loads(text)
    except ValueError:
        return None
    from bench_agent.procinfo import command_line, pid_alive
    pid = info.get("pid", -1)
    return info if pid_alive(pid) and SUPERVISOR in command_line(pid) else None
