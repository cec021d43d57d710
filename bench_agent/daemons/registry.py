"""This host's panio daemons: discovery files, the processes behind them, and strays.

A daemon (serial capture now; video capture follows the same convention) is a
process started as ``python -m bench_agent.<...> --state-dir DIR ...`` that
writes ``DIR/daemons/<name>.json`` with at least ``name``, ``kind`` and
``pid``. Listing reads those files and checks each pid; a *stray* is a
bench_agent daemon process of this state directory with no live discovery
file (its file was deleted, say by a /tmp sweep), and a *stale* file is one
whose process is gone. Only this state directory's daemons are ever listed or
stopped, so several users (or test runs) on one host never touch each other's.

The state directory is the lab's (``bench_agent.paths.lab_state_dir``), so two
labs on one host never list or stop each other's daemons either. A lab also
sees the daemons still running from before state was kept per lab (in the bare
state directory), named ``legacy-<name>``, so it can find and stop them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bench_agent.errors import NotRunning
from bench_agent.process import pid_alive
from bench_agent.serial import files
from bench_agent.serial.client import terminate


def _records(state: Path) -> list[dict[str, Any]]:
    """The discovery files of state directory ``state`` that this user's daemons could have written: one someone
    else could have planted or changed (``private.trusted_read``) is no daemon, as for ``per_target.discovery``."""
    out = []
    for path in sorted(files.daemons_dir(state).glob("*.json")):
        info = record(path)
        if info is not None:
            info["file"] = str(path)
            out.append(info)
    return out


def record(path: Path, ignored: str = "") -> dict[str, Any] | None:
    """The discovery record at ``path`` if this user's daemon could have written it (``private.trusted_read``),
    else None: absent, not a JSON object, or one someone else could have planted or changed (not ours, writable
    by others, a symlink, in a folder not ours), which the log says (``ignored``: what that means here)."""
    from bench_agent.private import trusted_read

    data = trusted_read(str(path))
    if data is None:
        if os.path.lexists(path):
            import logging

            logging.getLogger("panio.daemons").warning(
                "ignoring the discovery file %s: someone else could have written it (not a regular file of this "
                "user's, in a folder of this user's, that no one else can write)%s", path, ignored)
        return None
    try:
        info = json.loads(data)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def _daemon_processes(state: Path, every_lab: bool = False) -> dict[int, str]:
    """pid -> command line of every bench_agent daemon process started with --state-dir ``state`` (with
    ``every_lab``, also with the state directory of any lab under it: ``state/labs/KEY``)."""
    from bench_agent.paths import LABS_DIR

    labs = f"{state}{os.sep}{LABS_DIR}{os.sep}"
    found = {}
    for pid, given, cmd in _bench_daemons():
        ours = given == str(state) or (every_lab and given.startswith(labs) and os.sep not in given[len(labs):])
        if ours and pid_alive(pid):
            found[pid] = cmd
    return found


def _bench_daemons():
    """(pid, its --state-dir, command line) of each bench_agent daemon process of this user, any state directory
    (another user's, root's included, is never listed: nothing here stops it)."""
    me = os.geteuid()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != me:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "-m" in argv and any(a.startswith("bench_agent.") for a in argv) and "--state-dir" in argv[:-1]:
            yield int(pid), argv[argv.index("--state-dir") + 1], " ".join(a for a in argv if a)


def daemons_anywhere(devices: set[str]) -> list[dict[str, Any]]:
    """The running daemons of any state directory (another host's worker on this machine keeps its own) that use
    any of ``devices``, as their discovery files say: ``{"name", "pid", "state_dir", "file"}``."""
    by_state: dict[str, set[int]] = {}
    for pid, state, _ in _bench_daemons():
        if pid_alive(pid):
            by_state.setdefault(state, set()).add(pid)
    return [{"name": info.get("name"), "pid": info["pid"], "state_dir": state, "file": info["file"]}
            for state, pids in by_state.items() for info in _records(Path(state))
            if info.get("pid") in pids and _uses(info, devices)]


def stop_captures_of(targets: set[str], worker_pid: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stop the serial captures of ``targets`` that worker ``worker_pid``'s jobs started (or a gone worker's:
    ``starter.a_workers``), in every lab of this state directory: left running they hold the ports with nobody
    to read them. Returns (stopped, left): the captures of ``targets`` someone else started (``panio serial
    watch`` by hand, sharing the worker's state directory) are left running."""
    from bench_agent.daemons import starter
    from bench_agent.paths import known_labs, using_lab

    stopped, left = [], []
    for lab in [None, *known_labs()]:
        with using_lab(lab):
            for entry in _listed(files.state_dir()):
                if entry["kind"] != "serial" or entry["state"] != "running" or entry["target"] not in targets:
                    continue
                if not starter.a_workers(entry["started_by"], worker_pid):
                    left.append(entry)
                    continue
                try:
                    stopped.append(stop_daemon(entry))
                except NotRunning:  # it stopped on its own meanwhile
                    continue
    return stopped, left


def _uses(info: dict[str, Any], devices: set[str]) -> bool:
    used = {i.get("device") for i in info.get("interfaces", [])} | {info.get("device"), info.get("tftp_root")}
    return bool(used & devices)


def list_daemons() -> list[dict[str, Any]]:
    """This lab's daemons (running, stale files, strays), then those still running from before state was kept
    per lab (``legacy``: True, named ``legacy-<name>``)."""
    from bench_agent.paths import current_lab, legacy_state_dir

    out = _listed(files.state_dir())
    if current_lab() is not None:
        old = legacy_state_dir()
        out += [{**e, "name": f"legacy-{e['name']}", "legacy": True, "state_dir": str(old)}
                for e in _listed(old) if e["state"] != "stale"]
    return out


def _listed(state: Path) -> list[dict[str, Any]]:
    procs = _daemon_processes(state)
    out = []
    for info in _records(state):
        pid = info.get("pid")
        alive = pid in procs
        out.append({"name": info.get("name"), "kind": info.get("kind"), "target": info.get("target"), "pid": pid,
                    "state": "running" if alive else "stale", "epoch": info.get("epoch"),
                    "started": info.get("started"), "started_by": info.get("started_by"), "file": info["file"],
                    "command": procs.get(pid) if alive else None})
        procs.pop(pid, None)
    for pid, cmd in sorted(procs.items()):
        out.append({"name": f"stray-{pid}", "kind": "stray", "target": _arg(cmd, "--target"), "pid": pid,
                    "state": "stray", "epoch": None, "started": None, "started_by": None, "file": None,
                    "command": cmd})
    return out


def daemons_of(devices: set[str]) -> list[dict[str, Any]]:
    """The running daemons of this state directory that use any of ``devices`` (e.g. a simulated bench's
    consoles, screens and TFTP roots), as ``list_daemons`` lists them: serial captures by their interfaces'
    devices, video and HID daemons by their device, netboot servers by their TFTP root."""
    reading = {info.get("name") for info in _records(files.state_dir()) if _uses(info, devices)}
    return [e for e in list_daemons() if e["state"] == "running" and e["name"] in reading]


def _arg(cmd: str, flag: str) -> str | None:
    words = cmd.split()
    return words[words.index(flag) + 1] if flag in words[:-1] else None


def stop_daemon(entry: dict[str, Any], force: bool = False) -> dict[str, Any]:
    """Stop one listed daemon: serial supervisors politely, others by SIGTERM; SIGKILL with force."""
    if entry["state"] == "stale":
        Path(entry["file"]).unlink(missing_ok=True)
        return {"name": entry["name"], "pid": entry["pid"], "how": "removed stale discovery file"}
    if entry["kind"] == "serial":
        from bench_agent.serial import client

        state = Path(entry["state_dir"]) if entry.get("legacy") else None
        return {"name": entry["name"], **client.stop(entry["target"], force=force, state=state)}
    pid = entry["pid"]
    how = terminate(pid, entry["name"], entry["name"], force)
    if entry.get("file"):
        Path(entry["file"]).unlink(missing_ok=True)
    return {"name": entry["name"], "pid": pid, "how": how, "stopped": True}


def stop_named(names: list[str] | None, force: bool = False) -> list[dict[str, Any]]:
    """Stop the named daemons (None = all of them)."""
    entries = list_daemons()
    if names is not None:
        known = {e["name"]: e for e in entries}
        missing = [n for n in names if n not in known]
        if missing:
            raise NotRunning(f"no daemon named {', '.join(missing)} (running: {', '.join(known) or 'none'})",
                             hint="`panio daemons` lists them", known=sorted(known))
        entries = [known[n] for n in names]
    return [stop_daemon(e, force) for e in entries]


__all__ = ["daemons_of", "list_daemons", "stop_named"]
