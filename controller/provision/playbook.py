"""Run a playbook with ``ansible-playbook`` and read its progress, one JSON line per event.

The ``panio_progress`` stdout callback (``ansible/callback_plugins``) writes a
line per task start, per host result and the final stats; this module shows
them as they come and turns a failed or unreachable task into one error that
names the host and the task.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench_agent.errors import NotConfigured, SetupFailed, Unreachable


@dataclass
class Outcome:
    results: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)  # "panio_report" lines: key=value

    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["status"] in ("failed", "unreachable")]


def executable() -> str:
    found = shutil.which("ansible-playbook", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                     os.environ.get("PATH", "")]))
    if found is None:
        raise NotConfigured("panio setup needs ansible-core, which is not installed",
                            hint="install it into panio's venv: pip install 'panio[setup]' (or ansible-core)")
    return found


def run(root: Path, playbook: str, inventory: Path, *, check: bool, tags: list[str], skip_tags: list[str],
        show: Callable[[dict[str, Any]], None]) -> Outcome:
    """Run ``playbook`` on ``inventory``; its SSH control sockets live beside the inventory.

    Ansible's default socket folder, ``~/.ansible/cp``, makes a socket path too
    long for a Unix socket (108 bytes) under a deep home, and the run fails as
    "unreachable". Pipelining (one SSH round trip a task, not three) is on
    unless the user set ``ANSIBLE_PIPELINING``. The SSH master connections
    Ansible keeps (``ControlPersist``) are told to exit when the run ends.
    """
    argv = [executable(), "-i", str(inventory), str(root / "ansible" / playbook)]
    if check:
        argv += ["--check", "--diff"]
    if tags:
        argv += ["--tags", ",".join(tags)]
    if skip_tags:
        argv += ["--skip-tags", ",".join(skip_tags)]
    sockets = inventory.parent / "cp"
    env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "panio_progress",
           "ANSIBLE_CALLBACK_PLUGINS": str(root / "ansible" / "callback_plugins"),
           "ANSIBLE_ROLES_PATH": str(root / "ansible" / "roles"), "ANSIBLE_HOST_KEY_CHECKING": "True",
           "ANSIBLE_RETRY_FILES_ENABLED": "False", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
           "ANSIBLE_PYTHON_INTERPRETER": "auto_silent", "ANSIBLE_DEPRECATION_WARNINGS": "False",
           "ANSIBLE_SSH_CONTROL_PATH_DIR": str(sockets),
           "ANSIBLE_PIPELINING": os.environ.get("ANSIBLE_PIPELINING", "True")}
    outcome = Outcome()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        for line in proc.stdout:
            event = _parse(line)
            if event is None:
                continue
            _record(outcome, event)
            show(event)
        err = proc.stderr.read()
        code = proc.wait()
    except BaseException:
        _stop(proc)
        raise
    finally:
        _close_masters(sockets)
    _raise_for(outcome, code, err)
    return outcome


def _close_masters(sockets: Path) -> None:
    """Ask each SSH master connection of the run to exit (``ssh -O exit``) instead of lingering a minute."""
    for socket in sockets.glob("*") if sockets.is_dir() else []:
        try:
            subprocess.run(["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "panio-setup"], capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass  # the master ends by itself after ControlPersist


def _parse(line: str) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def _record(outcome: Outcome, event: dict[str, Any]) -> None:
    if event["event"] == "result":
        outcome.results.append(event)
        msg = event.get("msg")
        if event["task"].endswith("Report where panio is installed") and isinstance(msg, str):
            for part in msg.split():
                key, _, value = part.partition("=")
                outcome.facts[key] = value
    elif event["event"] == "stats":
        outcome.stats = event["hosts"]


def _raise_for(outcome: Outcome, code: int, err: str) -> None:
    failures = outcome.failures()
    if failures:
        first = failures[0]
        why = first.get("msg") or "no message"
        if first.get("stderr"):  # "non-zero return code" alone does not say what went wrong
            why = f"{why}: {' '.join(str(first['stderr']).split()[-60:])}"
        why = " ".join(str(why).split())[-800:]
        cls = Unreachable if first["status"] == "unreachable" else SetupFailed
        raise cls(f"host {first['host']}: task {first['task']!r} {first['status']}: {why}",
                  hint="fix that, then run `panio setup` again: it only changes what is not yet right",
                  host=first["host"], task=first["task"])
    if code != 0:
        tail = " ".join(err.strip().splitlines()[-3:])[-600:] or f"exit {code}"
        raise SetupFailed(f"ansible-playbook failed before any task ran: {tail}", task="ansible-playbook")


def _stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue
