"""Per-target daemons other than serial capture (``video.daemon``, ``hid.daemon``): find, start, reap, serve.

Such a daemon is ``python -m <module> --state-dir DIR --target T --config JSON``;
it prints one JSON line (``{"ok": true, "pid": N}`` or ``{"ok": false, "error":
{...}}``) when it is ready or has failed, and keeps a discovery file while it
runs. A live daemon of this state directory whose discovery file is gone is
*untracked* (``panio daemons`` lists it as a stray); starting a new one reaps
it first, so a sweep of the state directory never leaves two holding a device.
``serve`` is such a daemon's ``main()``; the daemon itself is an object with a
``stop`` event, ``run()`` (until ``stop`` is set) and ``close()``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_agent.errors import PanioError, Timeout, from_json
from bench_agent.private import open_private, private_dir, write_private

START_TIMEOUT_S = 15.0


def state_dir() -> Path:
    """The current lab's state directory (``bench_agent.paths.lab_state_dir``), the daemon's ``--state-dir``."""
    from bench_agent.paths import lab_state_dir

    return lab_state_dir()


def processes(module: str, target: str) -> dict[int, str]:
    """pid -> command line of every live ``module`` daemon of ``target`` in this state directory."""
    from bench_agent.daemons.registry import _arg, _daemon_processes

    return {pid: cmd for pid, cmd in _daemon_processes(state_dir()).items()
            if module in cmd.split() and _arg(cmd, "--target") == target}


def discovery(module: str, path: Path, target: str) -> dict[str, Any] | None:
    """The discovery record of ``target``'s running ``module`` daemon, or None. Only a file this user's daemon
    could have written is followed (``trusted_read``): one someone else could have planted or changed (not ours,
    writable by others, a symlink, in a folder not ours) counts as no daemon, and says so in the log."""
    from bench_agent.daemons.registry import record

    info = record(path, f"; no {module} daemon counted for {target}")
    return info if info is not None and info.get("pid") in processes(module, target) else None


def status(module: str, path: Path, target: str) -> dict[str, Any]:
    """running (pid), untracked (a live daemon without its discovery file: pids), or stopped."""
    info = discovery(module, path, target)
    if info is not None:
        return {"target": target, "state": "running", "pid": info["pid"], "device": info.get("device")}
    strays = sorted(processes(module, target))
    if strays:
        return {"target": target, "state": "untracked", "pid": strays[0], "pids": strays}
    return {"target": target, "state": "stopped", "pid": None}


def reap(pids: list[int], what: str) -> None:
    from bench_agent.serial.client import terminate

    for pid in pids:
        terminate(pid, what, f"stray-{pid}", force=True)


def start(module: str, target: str, config: dict[str, Any], log: Path) -> int:
    """Spawn the detached daemon and wait for its ready line; its start-up error is raised as ours."""
    private_dir(log.parent)
    argv = [sys.executable, "-P", "-m", module, "--state-dir", str(state_dir()), "--target", target,
            "--config", json.dumps(config)]
    with os.fdopen(open_private(log, os.O_WRONLY | os.O_APPEND), "ab") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True, close_fds=True, cwd="/")
    try:
        line = _ready_line(proc)
    finally:
        proc.stdout.close()
    try:
        reply = json.loads(line)
    except ValueError:
        proc.wait(5)
        tail = log.read_text(errors="replace").strip().splitlines()[-1:]
        raise PanioError(f"the {module} daemon of {target!r} exited at start-up: {' '.join(tail)}",
                         hint=f"see {log}", target=target) from None
    if not reply.get("ok"):
        proc.wait(5)
        raise from_json(reply["error"])
    from bench_agent.process import reap_when_done

    reap_when_done(proc)  # a long-lived starter (a worker, the SSH agent) must not keep it as a zombie
    return proc.pid


def _ready_line(proc: subprocess.Popen) -> bytes:
    import select

    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    if not ready:
        proc.kill()
        proc.wait(5)
        raise Timeout(f"{proc.args[3]} did not start within {START_TIMEOUT_S:g} s")
    return proc.stdout.readline()


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_private(path, json.dumps(data).encode())


def serve(module: str, kind: str, open_daemon: Callable[[Path, str, dict[str, Any]], Any],
          discovery_path: Callable[[str, Path], Path], argv: list[str] | None = None,
          described: tuple[str, ...] = ()) -> int:
    """Open the daemon, print the ready line, keep the discovery file while it runs until SIGTERM or SIGINT.

    ``described`` names the config keys, besides ``device``, that the discovery file repeats.
    """
    import argparse

    p = argparse.ArgumentParser(prog=f"python -m {module}")
    p.add_argument("--state-dir", required=True, type=Path)
    p.add_argument("--target", required=True)
    p.add_argument("--config", required=True, help=f"the target's {kind} table as JSON")
    a = p.parse_args(argv)
    config = json.loads(a.config)
    try:
        daemon = open_daemon(a.state_dir, a.target, config)
    except PanioError as err:
        _say({"ok": False, "error": err.to_json()})
        return 1
    from bench_agent.daemons.signals import set_on

    set_on(daemon.stop)
    disc = discovery_path(a.target, a.state_dir)
    private_dir(disc.parent)
    write_json(disc, {"name": f"{kind}-{a.target}", "kind": kind, "target": a.target, "pid": os.getpid(),
                      "started": time.time(), "device": config["device"], **{k: config.get(k) for k in described}})
    _say({"ok": True, "pid": os.getpid()})
    try:
        daemon.run()
    finally:
        daemon.close()
        try:
            if json.loads(disc.read_text()).get("pid") == os.getpid():
                disc.unlink()
        except (OSError, ValueError):
            pass
    return 0


def _say(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
