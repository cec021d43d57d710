"""Host keys for the SSH transport: panio's known_hosts, fingerprints, scanning and recording a host's key.

panio's own file is ``~/.config/panio/known_hosts`` (OpenSSH's format); the
user's ``~/.ssh/known_hosts`` is read too. A key is recorded only by
``panio host trust``, and a key that differs from the recorded one is replaced
only when asked to (``--replace``): a changed key is what a man in the middle
looks like, as well as a reinstalled host. A known_hosts file someone else
could have written is refused, not read (``checked``).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from bench_agent.errors import Unreachable
from controller.paths import config_dir

SSH_PORT = 22
CONNECT_TIMEOUT_S = 10.0


def known_hosts_path() -> Path:
    return config_dir() / "known_hosts"


def destination(host: dict) -> tuple[str | None, str, int]:
    """(user, hostname, port) of a host table; a destination ssh would read as an option is refused here too,
    before any connection, whatever road the table came by."""
    from bench_agent.errors import Refused
    from controller.lab.schema import ssh_destination_problem

    if why := ssh_destination_problem(str(host["ssh"])):
        raise Refused(f"refusing to connect: {why}", hint="fix the host's ssh = \"USER@HOST\" in the lab file")
    user, _, hostname = host["ssh"].rpartition("@")
    return (user or None), hostname, int(host.get("port", SSH_PORT))


def key_name(hostname: str, port: int) -> str:
    return hostname if port == SSH_PORT else f"[{hostname}]:{port}"


def fingerprint(key) -> str:
    """``ssh-ed25519 SHA256:...``: the form ``ssh-keygen -lf`` prints."""
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


def scan_host_key(name: str, host: dict, prefer: str | None = None):
    """The host key a host presents now (no authentication); of type ``prefer`` first, as a connection
    negotiates it when a key of that type is recorded (a host has several keys, one per type)."""
    import paramiko

    _, hostname, port = destination(host)
    try:
        sock = socket.create_connection((hostname, port), timeout=CONNECT_TIMEOUT_S)
        transport = paramiko.Transport(sock)
        transport.banner_timeout = CONNECT_TIMEOUT_S
        if prefer:
            options = transport.get_security_options()
            first = ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if prefer == "ssh-rsa" else [prefer]
            options.key_types = [t for t in first if t in options.key_types] + \
                [t for t in options.key_types if t not in first]
        transport.start_client(timeout=CONNECT_TIMEOUT_S)
        key = transport.get_remote_server_key()
        transport.close()
        return key
    except (OSError, paramiko.SSHException) as exc:
        raise Unreachable(f"host {name}: cannot reach {hostname}:{port}: {exc}", host=name) from exc


def user_known_hosts_path() -> Path:
    return Path.home() / ".ssh" / "known_hosts"


def checked(path: Path) -> Path | None:
    """``path`` if it exists and only this user (or root) could have written it; None if absent. A known_hosts
    that someone else could write (the file, or a folder above it, owned by another user or writable by group or
    others) is refused: whoever wrote a key there is the host panio would talk to (as OpenSSH's StrictModes)."""
    from bench_agent.private import require_trusted

    if not os.path.lexists(path):
        return None
    require_trusted(path, "the known_hosts file")
    return path


def load_into(client) -> None:
    """Load the host keys a connection checks into paramiko's ``client``: the user's ~/.ssh/known_hosts (as its
    system keys: never written) and panio's, each ``checked``."""
    if mine := checked(user_known_hosts_path()):
        client.load_system_host_keys(str(mine))
    if ours := checked(known_hosts_path()):
        client.load_host_keys(str(ours))


def recorded_keys(host: dict) -> list[tuple[Path, object]]:
    """(file, key) for the keys a connection checks: the user's ~/.ssh/known_hosts when it knows the host
    (it takes precedence, as in paramiko's SSHClient), else panio's known_hosts."""
    import paramiko

    _, hostname, port = destination(host)
    for path in (user_known_hosts_path(), known_hosts_path()):
        if checked(path):
            found = paramiko.HostKeys(str(path)).lookup(key_name(hostname, port))
            if found:
                return [(path, key) for key in found.values()]
    return []


def record_host_key(host: dict, key, replace: bool = False) -> Path:
    """Record ``key`` for the host in panio's known_hosts; ``replace`` first drops every key it had there."""
    import paramiko

    _, hostname, port = destination(host)
    name = key_name(hostname, port)
    path = known_hosts_path()
    from bench_agent.private import private_dir

    private_dir(path.parent.resolve())  # a symlinked config folder is followed, then checked
    keys = paramiko.HostKeys()
    if checked(path):  # its keys are kept: never those someone else put there
        keys.load(str(path))
    while replace and keys.lookup(name):
        del keys[name]
    keys.add(name, key.get_name(), key)
    partial = path.with_name(path.name + ".tmp")
    keys.save(str(partial))
    os.chmod(partial, 0o600)  # not the umask's 0664: a group-writable known_hosts is refused
    partial.replace(path)  # a reader never sees half a file
    return path
