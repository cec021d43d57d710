"""The supervisor's local control protocol: JSON lines over a unix stream socket.

A client sends one request per line, ``{"op": "send", "iface": "console", ...}``,
and reads one reply line: ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": {...PanioError JSON...}}``. A connection may carry
many requests (the benchmark keeps one open); requests on one connection run
in order, connections run in parallel (one thread each).

Ops: hello, status, send, transact, wait, sense, dtr, stop.
"""

from __future__ import annotations

import os
import socket
import struct
import threading

TYPE_CHECKING = False  # a capture need not import typing (docs/scale.md: every supervisor pays for it)
if TYPE_CHECKING:
    from typing import Any, Callable

    Handler = Callable[[dict[str, Any], socket.socket], Any]

from bench_agent.errors import NotRunning, PanioError, Unreachable, reply, unwrap
from bench_agent.jsonlines import dump_line, load_line

RECV_BYTES = 65536


class LineReader:
    """The lines of a stream socket, read with plain ``recv``: a socket's file object adds a layer of Python
    (``SocketIO.readinto``) to every read, and a request or a reply usually comes in one."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf, self.scanned = sock, bytearray(), 0

    def readline(self) -> bytes:
        """The next line with its ``\\n``; at the end of the stream what is left (b"" when nothing)."""
        if not self.buf:  # the usual: one whole line in one read, taken as it came (no copy in and out of buf)
            data = self.sock.recv(RECV_BYTES)
            end = data.find(b"\n")
            if end == len(data) - 1:  # one line, or b"" at the end of the stream
                return data
            self.buf += data
            self.scanned = 0 if end >= 0 else len(data)
        while True:
            end = self.buf.find(b"\n", self.scanned)
            if end >= 0:
                line = bytes(self.buf[:end + 1])
                del self.buf[:end + 1]
                self.scanned = 0
                return line
            self.scanned = len(self.buf)
            data = self.sock.recv(RECV_BYTES)
            if not data:
                line = bytes(self.buf)
                self.buf.clear()
                self.scanned = 0
                return line
            self.buf += data


class Sent:
    """What a handler returns when it has sent the reply on the connection itself, but for ``rest``."""

    __slots__ = ("rest",)

    def __init__(self, rest: bytes) -> None:
        self.rest = rest


class ControlServer:
    """Accepts connections on ``address`` and answers each request with ``handler(request, connection)``: its
    result, or ``Sent`` when the handler wrote the reply line to the connection itself (a transact's reader
    thread does, ``matcher.Pending``)."""

    def __init__(self, address: str, handler: Handler) -> None:
        self.address, self.handler = address, handler
        from bench_agent.private import private_dir

        private_dir(os.path.dirname(address))  # no other user may swap the socket for theirs (issue 45)
        if os.path.lexists(address):
            os.unlink(address)  # left by a supervisor that was killed
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address)
        os.chmod(address, 0o600)
        self.sock.listen(16)
        self._thread = threading.Thread(target=self._accept, name="control", daemon=True)
        self._answering = 0
        self._idle = threading.Condition()

    def start(self) -> None:
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        lines = LineReader(conn)
        with conn:
            while line := lines.readline():
                with self._idle:
                    self._answering += 1
                try:
                    answer = self._answer(line, conn)
                    result = answer.get("result")
                    if type(result) is not Sent:
                        conn.sendall(dump_line(answer))
                    elif result.rest:
                        conn.sendall(result.rest)
                finally:
                    with self._idle:
                        self._answering -= 1
                        self._idle.notify_all()

    def drain(self, timeout_s: float) -> None:
        """Wait, at most ``timeout_s``, for the answers being written: a wait that a stop ended still gets its
        reply (``capture_stopped``) before the process exits."""
        with self._idle:
            self._idle.wait_for(lambda: self._answering == 0, timeout_s)

    def _answer(self, line: bytes, conn: socket.socket) -> dict[str, Any]:
        return reply(self._handle, line, conn)  # a supervisor bug reaches the caller as internal

    def _handle(self, line: bytes, conn: socket.socket) -> Any:
        try:
            return self.handler(load_line(line), conn)
        except OSError as exc:  # the supervisor's own disk: full, read-only, failing — a lab fault, not a bug
            raise disk_error(exc) from exc

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        try:
            os.unlink(self.address)
        except FileNotFoundError:
            pass


class ControlClient:
    """One connection to a supervisor; ``call`` sends a request and returns its result or raises its error.

    The socket blocks, its bound set in the kernel (SO_RCVTIMEO, SO_SNDTIMEO): a Python timeout would ``poll``
    before every send and receive, two more system calls in each round trip (`serial transact`)."""

    def __init__(self, address: str, target: str, timeout_s: float | None = 10.0) -> None:
        self.target = target
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(address)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self.sock.close()
            raise not_running(target) from exc
        self._bound(timeout_s)
        self._lines = LineReader(self.sock)

    def _bound(self, timeout_s: float | None) -> None:
        """Bound each send and receive by ``timeout_s`` (None: no bound), as ``settimeout`` would."""
        us = 0 if timeout_s is None else max(1, round(timeout_s * 1e6))
        bound = struct.pack("@ll", us // 1_000_000, us % 1_000_000)  # a struct timeval
        for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
            self.sock.setsockopt(socket.SOL_SOCKET, option, bound)

    def call(self, request: dict[str, Any], timeout_s: float | None = None) -> Any:
        if timeout_s is not None:
            self._bound(timeout_s)
        try:
            self.sock.sendall(dump_line(request))
            line = self._lines.readline()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise capture_stopped(self.target, f"before it answered ({exc})", outcome="unknown") from exc
        except BlockingIOError as exc:  # the kernel's bound passed: a late answer must not pass for the next one's
            self.sock.close()
            raise Unreachable(f"lost the serial supervisor of {self.target!r}: timed out", target=self.target) from exc
        except OSError as exc:
            raise Unreachable(f"lost the serial supervisor of {self.target!r}: {exc}", target=self.target) from exc
        if not line.endswith(b"\n"):
            raise capture_stopped(self.target, "before it answered (its supervisor closed the connection)",
                                  outcome="unknown")
        return unwrap(load_line(line))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def not_running(target: str) -> NotRunning:
    return NotRunning(f"no serial capture is running for {target!r} (the lab's fault, not the board's)",
                      hint=f"start it with `panio serial watch {target}`; in a job, make the first step "
                           f"`panio serial watch ${{target}}` (harmless when it already runs)", target=target)


def capture_stopped(target: str, when: str, **details: Any) -> NotRunning:
    """panio's own capture of ``target`` stopped (``serial stop``, its supervisor killed): not the device, not the board."""
    return NotRunning(f"panio's serial capture of {target!r} stopped {when} (the lab's fault, not the board's)",
                      hint=f"start it again with `panio serial watch {target}`", target=target, **details)


def disk_error(exc: OSError) -> PanioError:
    """An OSError of the state directory's disk as the error a user can act on."""
    import errno

    from bench_agent.errors import DeviceError
    from bench_agent.paths import state_dir

    where = exc.filename or state_dir()
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DeviceError(f"the capture cannot record: the disk of {where} is full ({exc.strerror})",
                           hint="free space there, or move panio's state with PANIO_STATE_DIR", errno=exc.errno)
    return DeviceError(f"the capture cannot record to {where}: {exc.strerror or exc}",
                       hint="check that disk (read-only? failing?)", errno=exc.errno)
