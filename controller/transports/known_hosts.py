"""Host keys for the SSH transport: panio's known_hosts, fingerprints, scanning and recording a host's key.

panio's own file is ``~/.config/panio/known_hosts`` (OpenSSH's format); the
user's ``~/.ssh/known_hosts`` is read too. A key is recorded only by
``panio host trust``, and a key that differs from the recorded one is replaced
only when asked to (``--replace``): a changed key is what a man in the middle
looks like, as well as a reinstalled host.
"""

from __future__ import annotations

import socket
from pathlib import Path

from bench_agent.errors import Unreachable
from controller.paths import config_dir

CONNECT_TIMEOUT_S = 10.0


def known_hosts_path() -> Path:
    return config_dir() / "known_hosts"


def destination(host: dict) -> tuple[str | None, str, int]:
    user, _, hostname = host["ssh"].rpartition("@")
    return (user or None), hostname, int(host.get("port", 22))


def key_name(hostname: str, port: int) -> str:
    return hostname if port == 22 else f"[{hostname}]:{port}"


def fingerprint(key) -> str:
    """``ssh-ed25519 SHA256:...``: the form ``ssh-keygen -lf`` prints."""
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


def scan_host_key(name: str, host: dict):
    """The host key a host presents now (no authentication)."""
    import paramiko

    _, hostname, port = destination(host)
    try:
        sock = socket.create_connection((hostname, port), timeout=CONNECT_TIMEOUT_S)
        transport = paramiko.Transport(sock)
        transport.banner_timeout = CONNECT_TIMEOUT_S
        transport.start_client(timeout=CONNECT_TIMEOUT_S)
        key = transport.get_remote_server_key()
        transport.close()
        return key
    except (OSError, paramiko.SSHException) as exc:
        raise Unreachable(f"host {name}: cannot reach {hostname}:{port}: {exc}", host=name) from exc


def recorded_keys(host: dict) -> list[tuple[Path, object]]:
    """(file, key) for every key recorded for ``host``, in panio's known_hosts and then the user's."""
    import paramiko

    _, hostname, port = destination(host)
    found = []
    for path in (known_hosts_path(), Path.home() / ".ssh" / "known_hosts"):
        if path.exists():
            keys = paramiko.HostKeys(str(path))
            found.extend((path, key) for key in (keys.lookup(key_name(hostname, port)) or {}).values())
    return found


def record_host_key(host: dict, key, replace: bool = False) -> Path:
    """Record ``key`` for the host in panio's known_hosts; ``replace`` first drops every key it had there."""
    import paramiko

    _, hostname, port = destination(host)
    name = key_name(hostname, port)
    path = known_hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = paramiko.HostKeys()
    if path.exists():
        keys.load(str(path))
    while replace and keys.lookup(name):
        del keys[name]
    keys.add(name, key.get_name(), key)
    partial = path.with_name(path.name + ".tmp")
    keys.save(str(partial))
    partial.replace(path)  # a reader never sees half a file
    return path
