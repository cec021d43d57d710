"""SSHTransport: operations on a control host over one kept SSH channel (paramiko).

One connection per host per process, one long-lived agent per connection
(``python -m bench_agent.agent`` on the host), one JSON line per request and
per response over that channel: a round trip costs a fraction of a
millisecond, where exec-ing a command per operation costs a shell start-up.

Host keys are verified against panio's known_hosts (``~/.config/panio/known_hosts``)
and the user's ``~/.ssh/known_hosts``; an unknown key is refused until
``panio host trust NAME`` records it, a changed key is refused outright.

Liveness: while a request waits, the transport probes the link with an SSH
keepalive every ``PROBE_EVERY_S``; a link that answers nothing (data or probe)
for ``SILENT_LIMIT_S`` is declared dead, closed, and the call fails as
``unreachable``, with its outcome unknown.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

from bench_agent.errors import AuthFailed, PanioError, Refused, Unreachable, unwrap
from controller.paths import config_dir

PROTOCOL = 1
PROBE_EVERY_S = 3.0
SILENT_LIMIT_S = 10.0
CONNECT_TIMEOUT_S = 10.0


def known_hosts_path() -> Path:
    return config_dir() / "known_hosts"


def destination(host: dict) -> tuple[str | None, str, int]:
    user, _, hostname = host["ssh"].rpartition("@")
    return (user or None), hostname, int(host.get("port", 22))


def key_name(hostname: str, port: int) -> str:
    return hostname if port == 22 else f"[{hostname}]:{port}"


def fingerprint(key) -> str:
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


class SSHTransport:
    def __init__(self, name: str, host: dict) -> None:
        self.name, self.host = name, host
        self._lock = threading.Lock()
        self._client = None
        self._chan = None
        self._buf = b""
        self._next_id = 0
        self._alive_at = 0.0

    # --- connecting ----------------------------------------------------

    def _connect(self) -> None:
        import paramiko

        user, hostname, port = destination(self.host)
        client = paramiko.SSHClient()
        client.load_system_host_keys()
        if known_hosts_path().exists():
            client.load_host_keys(str(known_hosts_path()))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(hostname, port=port, username=user, timeout=CONNECT_TIMEOUT_S,
                           banner_timeout=CONNECT_TIMEOUT_S, auth_timeout=CONNECT_TIMEOUT_S)
        except paramiko.BadHostKeyException as exc:
            raise Refused(f"host {self.name}: the host key of {hostname}:{port} CHANGED (now {fingerprint(exc.key)})",
                          hint="if the host was really reinstalled, remove its line from "
                               f"{known_hosts_path()} and run `panio host trust {self.name}`", host=self.name) from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise Refused(f"host {self.name}: unknown host key for {hostname}:{port}",
                              hint=f"check it, then record it with `panio host trust {self.name}`",
                              host=self.name) from None
            if isinstance(exc, paramiko.AuthenticationException):
                raise AuthFailed(f"host {self.name}: {hostname}:{port} refused our keys: {exc}",
                                 hint="add your public key to the host's authorized_keys", host=self.name) from None
            raise Unreachable(f"host {self.name}: SSH to {hostname}:{port} failed: {exc}", host=self.name) from None
        except (OSError, socket.timeout) as exc:
            raise Unreachable(f"host {self.name}: cannot reach {hostname}:{port}: {exc}", host=self.name) from None
        client.get_transport().set_keepalive(int(PROBE_EVERY_S))
        self._client = client
        self._start_agent()

    def _start_agent(self) -> None:
        import shlex

        python = self.host.get("python", "python3")
        chan = self._client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
        chan.exec_command(f"{shlex.quote(python)} -m bench_agent.agent")
        self._chan, self._buf, self._alive_at = chan, b"", time.monotonic()
        hello = self._read_line(time.monotonic() + CONNECT_TIMEOUT_S * 2)
        if hello.get("panio_agent") != PROTOCOL:
            self.close()
            raise Unreachable(f"host {self.name}: the bench agent speaks protocol {hello.get('panio_agent')!r}, "
                              f"not {PROTOCOL}", hint="install the same panio version on the host", host=self.name)

    # --- one request ---------------------------------------------------

    def call(self, request: dict[str, Any]) -> Any:
        with self._lock:
            if self._chan is None or self._chan.closed or not self._client.get_transport().is_active():
                self.close()
                self._connect()
            self._next_id += 1
            line = json.dumps({"v": PROTOCOL, "id": self._next_id, **request}) + "\n"
            try:
                self._chan.sendall(line.encode())
                reply = self._read_line(None)
            except Unreachable:
                self.close()
                raise
            except (OSError, EOFError) as exc:
                self.close()
                raise self._lost(str(exc)) from None
        return unwrap(reply)

    def _lost(self, why: str) -> PanioError:
        return Unreachable(f"host {self.name}: link lost ({why}); the outcome of the operation is unknown",
                           host=self.name, outcome="unknown")

    def _read_line(self, deadline: float | None) -> dict:
        self._chan.settimeout(0.5)
        self._alive_at = time.monotonic()
        probe: threading.Thread | None = None
        while b"\n" not in self._buf:
            try:
                data = self._chan.recv(65536)
                if not data:
                    raise self._lost("the agent exited: " + self._stderr())
                self._buf += data
                self._alive_at = time.monotonic()
                continue
            except socket.timeout:
                pass
            now = time.monotonic()
            if now - self._alive_at > SILENT_LIMIT_S or (deadline is not None and now > deadline):
                raise self._lost(f"silent for {now - self._alive_at:.0f} s")
            if (probe is None or not probe.is_alive()) and now - self._alive_at >= PROBE_EVERY_S:
                probe = threading.Thread(target=self._probe, daemon=True)
                probe.start()
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def _probe(self) -> None:
        transport = self._client.get_transport() if self._client else None
        if transport is not None and transport.global_request("keepalive@openssh.com", wait=True) is not None:
            self._alive_at = time.monotonic()

    def _stderr(self) -> str:
        try:
            if self._chan.recv_stderr_ready():
                return self._chan.recv_stderr(4096).decode("utf-8", "replace").strip()[-300:]
        except OSError:
            pass
        return "no message"

    def close(self) -> None:
        client, self._client, self._chan = self._client, None, None
        if client is not None:
            threading.Thread(target=client.close, daemon=True).start()  # never block on a dead link


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
        raise Unreachable(f"host {name}: cannot reach {hostname}:{port}: {exc}", host=name) from None


def record_host_key(name: str, host: dict, key) -> Path:
    import paramiko

    _, hostname, port = destination(host)
    path = known_hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = paramiko.HostKeys()
    if path.exists():
        keys.load(str(path))
    keys.add(key_name(hostname, port), key.get_name(), key)
    keys.save(str(path))
    return path
