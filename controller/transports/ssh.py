"""SSHTransport: operations on a control host over one kept SSH channel (paramiko).

One connection per host per process, one long-lived agent per connection
(``python -m bench_agent.agent`` on the host), one JSON line per request and
per response over that channel: a round trip costs a fraction of a
millisecond, where exec-ing a command per operation costs a shell start-up.
An interactive operation (``serial connect``) gets a session channel of its
own on the same connection (see ``controller.transports.ssh_console``); what
the two share (protocol version, liveness) is in ``ssh_link``.

Host keys are verified against panio's known_hosts and the user's
(``controller.transports.known_hosts``); an unknown key is refused until
``panio host trust NAME`` records it, a changed key until
``panio host trust NAME --replace`` replaces it.

Waiting for a reply: up to the operation's own deadline (the request's
``deadline_s``) plus ``REPLY_MARGIN_S``; an operation with no deadline of its
own waits as long as the link lives. Liveness: anything the host sends is a
sign of life; while nothing comes, a ``keepalive@openssh.com`` request probes
the link every ``PROBE_EVERY_S``, and any answer counts (OpenSSH as shipped
answers it with a *failure*). A link that answers nothing for
``SILENT_LIMIT_S`` is declared dead, closed, and the call fails as
``unreachable``, with its outcome unknown.
"""

from __future__ import annotations

import shlex
import socket
import threading
import time
from typing import Any, Callable

from bench_agent.errors import AuthFailed, PanioError, Refused, Timeout, Unreachable, unwrap
from bench_agent.jsonlines import dump_line, load_line
from controller.transports import known_hosts
from controller.transports.known_hosts import CONNECT_TIMEOUT_S, destination, fingerprint
from controller.transports.ssh_link import PROBE_EVERY_S, PROTOCOL, SILENT_LIMIT_S, Liveness

REPLY_MARGIN_S = 10.0  # an operation's own deadline, plus this for the trip and its start-up


class SSHTransport:
    def __init__(self, name: str, host: dict) -> None:
        self.name, self.host = name, host
        self._lock = threading.Lock()
        self._client = None
        self._chan = None
        self._buf = b""
        self._next_id = 0
        self.liveness: Liveness | None = None

    # --- connecting ----------------------------------------------------

    def _connect(self) -> None:
        import paramiko

        user, hostname, port = destination(self.host)
        client = paramiko.SSHClient()
        known_hosts.load_into(client)  # refused if someone else could have written a known_hosts
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(hostname, port=port, username=user, timeout=CONNECT_TIMEOUT_S,
                           banner_timeout=CONNECT_TIMEOUT_S, auth_timeout=CONNECT_TIMEOUT_S)
        except paramiko.BadHostKeyException as exc:
            raise Refused(f"host {self.name}: the host key of {hostname}:{port} CHANGED (now {fingerprint(exc.key)}, "
                          f"recorded {fingerprint(exc.expected_key)})",
                          hint="a reinstalled host, or someone in the middle: check the key on the host's console, "
                               f"then `panio host trust {self.name} --replace`", host=self.name) from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise Refused(f"host {self.name}: unknown host key for {hostname}:{port}",
                              hint=f"check it, then record it with `panio host trust {self.name}`",
                              host=self.name) from None
            if isinstance(exc, paramiko.AuthenticationException):
                raise AuthFailed(f"host {self.name}: {hostname}:{port} refused our keys: {exc}",
                                 hint="add your public key to the host's authorized_keys", host=self.name) from None
            raise Unreachable(f"host {self.name}: SSH to {hostname}:{port} failed: {exc}", host=self.name) from exc
        except (OSError, socket.timeout) as exc:
            raise Unreachable(f"host {self.name}: cannot reach {hostname}:{port}: {exc}", host=self.name) from exc
        transport = client.get_transport()
        transport.set_keepalive(int(PROBE_EVERY_S))  # keeps NAT and firewalls from dropping an idle link
        self._client, self.liveness = client, Liveness(transport)
        try:
            self._start_agent()
        except (paramiko.SSHException, OSError, EOFError) as exc:  # the session refused, or the link fell
            self.close()
            raise Unreachable(f"host {self.name}: cannot start the bench agent: {exc}", host=self.name) from exc

    def _ensure_connected(self) -> None:
        if self._chan is None or self._chan.closed or not self._client.get_transport().is_active():
            self.close()
            self._connect()

    def agent_command(self, *flags: str) -> str:
        python = self.host.get("python", "python3")
        return " ".join([shlex.quote(python), "-m", "bench_agent.agent", *flags])

    def open_session(self):
        """A new session channel on the kept connection (connecting first if needed)."""
        with self._lock:
            self._ensure_connected()
            return self._client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)

    def _start_agent(self) -> None:
        chan = self._client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
        chan.exec_command(self.agent_command())
        self._chan, self._buf = chan, b""
        hello = self._read_line(time.monotonic() + CONNECT_TIMEOUT_S * 2, lambda: self.lost("no hello from the agent"))
        if hello.get("panio_agent") != PROTOCOL:
            self.close()
            raise Unreachable(f"host {self.name}: the bench agent speaks protocol {hello.get('panio_agent')!r}, "
                              f"not {PROTOCOL}", hint="install the same panio version on the host", host=self.name)
        if not hello.get("lab_keys"):  # an older panio keeps every lab's target state under its bare name
            self.close()
            raise Unreachable(f"host {self.name} runs an older panio that keeps targets' captures and leases "
                              f"by bare target name, not per lab", hint="install the same panio version on the "
                              f"host (`panio setup --host {self.name}`)", host=self.name)

    # --- one request ---------------------------------------------------

    def call(self, request: dict[str, Any]) -> Any:
        deadline_s = request.get("deadline_s")
        with self._lock:
            self._ensure_connected()
            self._next_id += 1
            line = dump_line({"v": PROTOCOL, "id": self._next_id, "op": request["op"], "args": request.get("args", {})})
            deadline = None if deadline_s is None else time.monotonic() + deadline_s + REPLY_MARGIN_S
            try:
                self._chan.sendall(line)
                reply = self._read_line(deadline, lambda: self._overdue(request["op"], deadline_s))
            except (OSError, EOFError) as exc:
                self.close()
                raise self.lost(str(exc)) from exc
            except BaseException:  # a timeout, a lost link, Ctrl-C: a late reply must never answer the next request
                self.close()
                raise
        return unwrap(reply)

    def interactive(self, request: dict[str, Any]) -> Any:
        """Run an interactive operation on a channel of its own, bridged to this terminal (Ctrl-] leaves)."""
        import paramiko

        from controller.transports.ssh_console import run_console

        try:
            chan = self.open_session()
        except paramiko.SSHException as exc:  # e.g. sshd's MaxSessions reached
            raise Unreachable(f"host {self.name}: no session channel for {request['op']}: {exc}",
                              host=self.name) from exc
        try:
            return run_console(self, chan, request)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.close()
            raise self.lost(str(exc)) from exc
        except Unreachable:
            self.close()
            raise
        finally:
            chan.close()

    def lost(self, why: str) -> PanioError:
        return Unreachable(f"host {self.name}: link lost ({why}); the outcome of the operation is unknown",
                           host=self.name, outcome="unknown")

    def _overdue(self, op: str, deadline_s: float) -> PanioError:
        return Timeout(f"host {self.name}: {op} did not answer within its deadline ({deadline_s:g} s) and "
                       f"{REPLY_MARGIN_S:g} s more, though the link lives; the outcome of the operation is unknown",
                       hint="the host's agent may be stuck: check the host", host=self.name, outcome="unknown")

    def _read_line(self, deadline: float | None, overdue: Callable[[], PanioError]) -> dict:
        self._chan.settimeout(0.5)
        self.liveness.heard()
        while b"\n" not in self._buf:
            try:
                data = self._chan.recv(65536)
                if not data:
                    raise self.lost("the agent exited: " + self._stderr())
                self._buf += data
                self.liveness.heard()
                continue
            except socket.timeout:
                pass
            silent = self.liveness.silent_s()
            if silent > SILENT_LIMIT_S:
                raise self.lost(f"silent for {silent:.0f} s")
            if deadline is not None and time.monotonic() > deadline:
                raise overdue()
        line, self._buf = self._buf.split(b"\n", 1)
        return load_line(line)

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
