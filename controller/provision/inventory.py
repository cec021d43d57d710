"""The Ansible inventory of one control host, written from the lab file's ``[hosts.NAME]`` table.

SSH reaches the host as panio does: ``ssh = "USER@HOST"``, ``port``; host keys
are checked against panio's known_hosts (``panio host trust NAME``) and the
user's, and an unknown or changed key is refused (``StrictHostKeyChecking``).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from controller.transports.known_hosts import checked, destination, known_hosts_path


def ssh_args() -> str:
    """ssh's options for Ansible; ``Refused`` if someone else could have written a known_hosts (ssh itself
    would read it: ``known_hosts.checked``)."""
    files = [str(known_hosts_path()), os.path.expanduser("~/.ssh/known_hosts")]
    for path in files:
        checked(Path(path))
    return shlex.join(["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + " ".join(files),
                       "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"])


def host_vars(name: str, host: dict[str, Any]) -> dict[str, Any]:
    user, hostname, port = destination(host)
    out: dict[str, Any] = {"ansible_host": hostname, "ansible_port": port, "panio_host_name": name,
                           "ansible_ssh_common_args": ssh_args()}
    if user:
        out["ansible_user"] = user
    return out


def write(path: Path, name: str, host: dict[str, Any], play_vars: dict[str, Any]) -> Path:
    """Write an inventory with ``name`` in the ``control_hosts`` group; JSON is valid YAML for Ansible."""
    inventory = {"all": {"children": {"control_hosts": {"hosts": {name: host_vars(name, host)}}},
                         "vars": play_vars}}
    path.write_text(json.dumps(inventory, indent=2) + "\n")
    return path
