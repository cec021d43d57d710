"""panio's own TFTP server: read-only, pure Python, for hosts where dnsmasq cannot run.

RFC 1350 read requests with the blksize (RFC 2348), tsize and timeout
(RFC 2349) and windowsize (RFC 7440) options; one transfer is
``tftp_transfer.Sender``. Writes are refused; a path that resolves outside the
root (``..``, a symlink out) is "not found", never served. The root itself
must be a directory that is not a system folder nor a home directory,
symlinks resolved (``values.served_root``): a root of ``/`` served
``/etc/shadow`` to anyone on the link.

Read requests are unauthenticated and their source can be forged, so what
one costs is bounded (issue 22: 150 unanswered requests for a 4 MB file took
the server to 593 MB and 152 threads):

- a request is checked whole in the receiving thread, and a bad one (a bad
  option, an over-long name, a missing file, a write) is answered with an
  ERROR packet from there, at no further cost;
- at most ``MAX_TRANSFERS`` transfers run at once, one thread each, of which
  one client address holds at most ``MAX_PER_CLIENT`` (running or waiting);
  a request beyond that gets ERROR 0 "server busy";
- when all are running, up to ``MAX_WAITING`` requests wait (the oldest gives
  its place to a newer one), and a transfer that has heard nothing from its
  client for ``IDLE_PREEMPT_S`` gives its place to a waiting one: a flood of
  requests nobody acknowledges cannot keep a real board waiting for long;
- files are streamed block by block, never read whole (``tftp_transfer``).

It logs in dnsmasq's words (``sent PATH to IP``, ``file PATH not found``), so
``netboot status`` reads one format whichever server ran, at most
``LOG_PER_S`` lines a second. It needs no root when bound to a port above
1023: with QEMU's user networking, the guest's ``tftp://10.0.2.2:PORT/...``
reaches it on the host's loopback.
"""

from __future__ import annotations

import collections
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Callable

from bench_agent.netboot.tftp_transfer import (ACCESS_VIOLATION, NOT_FOUND, SEND_AHEAD, UNDEFINED, WRQ, Refusal,
                                               Sender, Transfer, negotiate, parse_request)
from bench_agent.netboot.values import BadValue, served_root

__all__ = ["SEND_AHEAD", "TftpServer"]

MAX_TRANSFERS = 32  # threads that send at once, for every client together
MAX_PER_CLIENT = 8  # transfers (running or waiting) of one client address
MAX_WAITING = 32  # requests waiting for a free transfer
WAIT_S = 10.0  # a waiting request older than this is dropped: its client has given up or asked again
IDLE_PREEMPT_S = 2.0  # a transfer that heard nothing for this long gives its place to a waiting request
TICK_S = 0.2  # the receiving thread looks at waiting requests at least this often
MAX_REQUEST_BYTES = 2048  # a request with every option panio knows is well under this
LOG_PER_S = 20


class TftpServer:
    """Serve ``root`` read-only on ``(host, port)`` until ``close``; ``BadValue`` for a root it must not serve."""

    def __init__(self, root: str, host: str = "127.0.0.1", port: int = 69,
                 log: Callable[[str], None] = lambda line: None, send_ahead: int = SEND_AHEAD,
                 max_transfers: int = MAX_TRANSFERS, max_per_client: int = MAX_PER_CLIENT) -> None:
        self.root = Path(served_root(root))
        if not self.root.is_dir():
            raise BadValue(f"the TFTP root {root} does not exist")
        self.send_ahead, self.max_transfers, self.max_per_client = send_ahead, max_transfers, max_per_client
        self._log, self._logged = log, collections.deque(maxlen=LOG_PER_S)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()
        self._lock = threading.Lock()
        self._running: list[Transfer] = []
        self._waiting: collections.deque[Transfer] = collections.deque()
        self._workers = 0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="tftp", daemon=True)

    def start(self) -> TftpServer:
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._waiting.clear()
            for t in self._running:
                t.cancel.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.sock.close()

    def log(self, line: str) -> None:
        """At most ``LOG_PER_S`` lines a second: a flood must not fill the disk through the log."""
        now = time.monotonic()
        if len(self._logged) == self._logged.maxlen and now - self._logged[0] < 1.0:
            return
        self._logged.append(now)
        self._log(line)

    # -- receiving and admitting requests ------------------------------------------------------

    def _serve(self) -> None:
        self.sock.settimeout(TICK_S)  # a close from another thread does not wake recvfrom; polling does
        ticked = time.monotonic()
        while not self._closed.is_set():
            try:
                packet, peer = self.sock.recvfrom(MAX_REQUEST_BYTES + 1)
                self._request(packet, peer)
            except socket.timeout:
                pass
            except OSError:
                return
            if time.monotonic() - ticked >= TICK_S:
                ticked = time.monotonic()
                self._preempt_idle()

    def _request(self, packet: bytes, peer: tuple[str, int]) -> None:
        try:
            if len(packet) > MAX_REQUEST_BYTES:
                raise Refusal(UNDEFINED, f"request longer than {MAX_REQUEST_BYTES} bytes")
            request = parse_request(packet)
            if request.opcode == WRQ:
                self.log(f"write request for {request.name[:64]} from {peer[0]} refused")
                raise Refusal(ACCESS_VIOLATION, "panio serves read-only")
            path = self.resolve(request.name)
            if path is None:
                self.log(f"file {self.root / request.name.lstrip('/')} not found")
                raise Refusal(NOT_FOUND, "file not found")
            negotiate(request.options, 0, self.send_ahead)  # a bad option is answered now, not by a transfer
            self._admit(Transfer(peer, str(path), request))
        except Refusal as refusal:
            self._reply(peer, refusal)

    def resolve(self, name: str) -> Path | None:
        """The regular file ``name`` asks for inside the root, or None when it is missing or outside the root."""
        try:
            path = (self.root / name.lstrip("/")).resolve()
            if path != self.root and self.root not in path.parents:
                return None
            return path if path.is_file() else None
        except (OSError, ValueError):  # a name too long for the file system, a NUL byte
            return None

    def _admit(self, transfer: Transfer) -> None:
        """Run ``transfer`` now, or let it wait, or refuse it: within the bounds of the module docstring."""
        ip, dropped = transfer.peer[0], None
        with self._lock:
            queued = [*self._running, *self._waiting]
            if any(t.peer == transfer.peer and t.request.name == transfer.request.name for t in queued):
                return  # the client asked again before its first block arrived: that transfer answers it
            if sum(t.peer[0] == ip for t in queued) >= self.max_per_client:
                refusal = Refusal(UNDEFINED, f"server busy: {ip} already has {self.max_per_client} transfers")
            elif self._workers < self.max_transfers:
                self._workers += 1
                self._running.append(transfer)
                threading.Thread(target=self._worker, args=(transfer,), name="tftp-transfer", daemon=True).start()
                return
            else:
                if len(self._waiting) >= MAX_WAITING:
                    dropped = self._waiting.popleft()
                self._waiting.append(transfer)
                self._preempt_idle_locked()
                refusal = None
        if dropped is not None:
            self._reply(dropped.peer, Refusal(UNDEFINED, "server busy: too many transfers, try again"))
        if refusal is not None:
            self.log(f"busy: refused {transfer.request.name[:64]} to {ip}")
            self._reply(transfer.peer, refusal)

    def _preempt_idle(self) -> None:
        with self._lock:
            self._preempt_idle_locked()

    def _preempt_idle_locked(self) -> None:
        """Stop as many idle transfers as requests wait (beyond those already stopping), the longest idle first."""
        now = time.monotonic()
        stopping = sum(t.cancel.is_set() for t in self._running)
        idle = sorted((t for t in self._running if not t.cancel.is_set() and now - t.heard >= IDLE_PREEMPT_S),
                      key=lambda t: t.heard)
        for t in idle[:max(0, len(self._waiting) - stopping)]:
            t.cancel.set()

    def _next_locked(self) -> Transfer | None:
        now = time.monotonic()
        while self._waiting:
            transfer = self._waiting.popleft()
            if now - transfer.heard < WAIT_S:
                transfer.heard = now
                self._running.append(transfer)
                return transfer
        return None

    def _reply(self, peer: tuple[str, int], refusal: Refusal) -> None:
        """An ERROR packet from a port of its own, as a transfer would answer (RFC 1350's transfer identifiers)."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind((self.host, 0))
                sock.sendto(refusal.packet(), peer)
            except OSError:
                pass

    # -- running transfers ---------------------------------------------------------------------

    def _worker(self, transfer: Transfer | None) -> None:
        """Run ``transfer``, then the waiting ones, until none waits: at most ``max_transfers`` of these run."""
        while transfer is not None:
            try:
                self._transfer(transfer)
            except Exception as exc:  # noqa: BLE001 - logged, not raised: one transfer's fault must not keep its slot
                self.log(f"failed sending {transfer.path} to {transfer.peer[0]}: {type(exc).__name__}: {exc}")
            with self._lock:
                self._running.remove(transfer)
                transfer = None if self._closed.is_set() else self._next_locked()
                if transfer is None:
                    self._workers -= 1

    def _transfer(self, transfer: Transfer) -> None:
        client, path = transfer.peer[0], transfer.path
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.bind((self.host, 0))
                sock.connect(transfer.peer)
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO swapped in never blocks
                try:
                    info = os.fstat(fd)
                    if not stat.S_ISREG(info.st_mode):
                        sock.send(Refusal(NOT_FOUND, "file not found").packet())
                        return
                    terms = negotiate(transfer.request.options, info.st_size, self.send_ahead)
                    sent = Sender(sock, fd, info.st_size, terms, transfer).run()
                finally:
                    os.close(fd)
        except OSError as exc:
            self.log(f"failed sending {path} to {client}: {exc.strerror}")
            return
        if sent:
            self.log(f"sent {path} to {client}")
        elif transfer.cancel.is_set() and not self._closed.is_set():
            self.log(f"stopped sending {path} to {client}: it went silent and a request was waiting")
        else:
            self.log(f"failed sending {path} to {client}")


def main() -> None:  # pragma: no cover - a convenience for trying it by hand
    import argparse

    p = argparse.ArgumentParser(description="serve a folder read-only over TFTP")
    p.add_argument("root")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6969)
    p.add_argument("--send-ahead", type=int, default=SEND_AHEAD)
    a = p.parse_args()
    server = TftpServer(a.root, a.host, a.port, log=print, send_ahead=a.send_ahead).start()
    print(f"serving {os.path.abspath(a.root)} on {server.host}:{server.port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover
    main()
