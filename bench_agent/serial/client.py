"""Starting, finding, asking and stopping a target's serial supervisor."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from bench_agent.errors import NotRunning, PanioError, Timeout
from bench_agent.serial import files
from bench_agent.serial.files import discovery  # noqa: F401 - re-exported: the daemon's callers ask it here
from bench_agent.serial.control import ControlClient
from bench_agent.private import private_dir
from bench_agent.process import pid_alive, start_daemon
from bench_agent.serial.supervisor import MODULE

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0


def connect(target: str, timeout_s: float | None = 10.0, state: Path | None = None) -> ControlClient:
    return ControlClient(files.socket_address(target, state), target, timeout_s)


def request(target: str, req: dict[str, Any], timeout_s: float | None = 10.0, state: Path | None = None) -> Any:
    with connect(target, timeout_s, state) as c:
        return c.call(req)


def start(target: str, interfaces: list[dict[str, Any]]) -> dict[str, Any]:
    """Spawn the detached supervisor and wait until it reports ready (or its start-up error). It records who
    started it (``bench_agent.daemons.starter``): a worker that stops stops only its own jobs' captures."""
    import json

    from bench_agent.daemons import starter

    state = files.state_dir()
    log = files.target_dir(target, state) / "supervisor.err"
    private_dir(log.parent)  # the target's logs: this user's alone (bench_agent.private)
    _rotate(log)
    by = json.dumps(starter.current(), separators=(",", ":"))
    return start_daemon(MODULE, "the serial supervisor", state=state, target=target, config=interfaces, log=log,
                        timeout_s=START_TIMEOUT_S, options=("--started-by", by))


ERR_LOG_MAX_BYTES = 1 << 20  # the supervisor's stderr, appended to at every start: one old copy is kept


def _rotate(log: Path) -> None:
    try:
        if log.stat().st_size > ERR_LOG_MAX_BYTES:
            os.replace(log, log.with_name(log.name + ".1"))
    except FileNotFoundError:
        pass


def stop(target: str, force: bool = False, state: Path | None = None) -> dict[str, Any]:
    """Stop the target's supervisor (of the current lab, or of state directory ``state``): politely over the
    socket, else SIGTERM, and with force SIGKILL."""
    info = discovery(target, state)
    if info is None:
        # not "start it with serial watch": whoever stops a capture wants it stopped, and it is
        raise NotRunning(f"no serial capture is running for {target!r}: nothing to stop",
                         hint=f"the log stays on disk: `panio serial log {target}`; `panio daemons` lists this "
                              f"host's captures", target=target)
    pid = info["pid"]
    try:
        request(target, {"op": "stop"}, timeout_s=5, state=state)
        asked = True
    except PanioError:
        asked = False
    how = terminate(pid, f"serial supervisor of {target!r}", f"serial-{target}", force, already_asked=asked)
    return {"target": target, "pid": pid, "epoch": info.get("epoch"), "stopped": True, "how": how}


def terminate(pid: int, what: str, name: str, force: bool, already_asked: bool = False) -> str:
    """Stop process ``pid``: SIGTERM (unless it was already asked to stop), wait, and with ``force`` SIGKILL.

    Returns how it went: "request", "SIGTERM" or "SIGKILL". Without ``force``, a process that
    outlives the wait is a ``Timeout`` naming the `panio daemons stop NAME --force` that kills it.
    """
    how = "request" if already_asked else "SIGTERM"
    if not already_asked:
        _signal(pid, signal.SIGTERM)
    if not wait_gone(pid, STOP_TIMEOUT_S):
        if not force:
            raise Timeout(f"{what} (pid {pid}) did not stop within {STOP_TIMEOUT_S:.0f} s",
                          hint=f"`panio daemons stop {name} --force` kills it", pid=pid)
        _signal(pid, signal.SIGKILL)
        how = "SIGKILL"
        wait_gone(pid, 5)
    return how


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return not pid_alive(pid)
