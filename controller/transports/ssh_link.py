"""What both roads over a kept SSH connection share: the agent's protocol version and the link's liveness.

``ssh.SSHTransport`` sends requests over the agent's channel; ``ssh_console``
bridges an interactive operation on a session channel of its own. Both speak
``PROTOCOL`` to ``bench_agent.agent`` and both declare the link dead when it
answers nothing for ``SILENT_LIMIT_S``, probing it every ``PROBE_EVERY_S``.
"""

from __future__ import annotations

import threading
import time

PROTOCOL = 1
PROBE_EVERY_S = 3.0
SILENT_LIMIT_S = 10.0


class Liveness:
    """When the host was last heard from, and a probe to hear from it while nothing else arrives.

    paramiko's ``global_request(wait=True)`` returns None both when the peer
    refused the request and when the transport died; only the second is
    silence. So the probe counts the request *returning* while the transport is
    still active: an answer, success or failure. A silent peer never answers,
    and the probe's thread waits until the transport is closed.
    """

    def __init__(self, transport) -> None:
        self._transport = transport
        self.heard_at = time.monotonic()
        self._probe: threading.Thread | None = None
        self._probe_lock = threading.Lock()  # paramiko keeps one pending reply per transport: one probe at a time

    def heard(self) -> None:
        self.heard_at = time.monotonic()

    def silent_s(self) -> float:
        """Seconds since the host was last heard from; probes it first when that is PROBE_EVERY_S or more."""
        silent = time.monotonic() - self.heard_at
        with self._probe_lock:
            if silent >= PROBE_EVERY_S and (self._probe is None or not self._probe.is_alive()):
                self._probe = threading.Thread(target=self._ask, name="panio-ssh-probe", daemon=True)
                self._probe.start()
        return silent

    def _ask(self) -> None:
        try:
            self._transport.global_request("keepalive@openssh.com", wait=True)
        except Exception:  # noqa: BLE001 - a request that cannot be sent heard nothing; the reader decides
            return
        if self._transport.is_active():
            self.heard()
