"""One interface inside a supervisor: its port, reader thread, log writer and live tail.

The reader thread owns reading: bytes go to disk first (one record per read of
whatever the port holds, up to 64 KiB), then to an in-memory tail that waits
match against, then waiters are woken. A lost device is recorded as a gap when
it goes; the reader reopens it with backoff and records the reconnection too
(a ser2net restart reads as "device lost" then "reconnected after N s").
"""

from __future__ import annotations

import os
import select
import threading
import time
TYPE_CHECKING = False  # a capture need not import typing (docs/scale.md: every supervisor pays for it)
if TYPE_CHECKING:
    from typing import Any

import serial

from bench_agent.errors import Busy, DeviceError, PanioError, Unreachable
from bench_agent.serial import device
from bench_agent.serial.logstore import DATA, GAP, SENT, LogWriter
from bench_agent.serial.query import bytes_between

RING_BYTES = 4 << 20
BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 2.0)
SEND_LOCK_WAIT_S = 10.0


class Channel:
    def __init__(self, cfg: dict[str, Any], writer: LogWriter, epoch: int, port: serial.SerialBase) -> None:
        self.cfg, self.name, self.writer, self.epoch = cfg, cfg["name"], writer, epoch
        self.port: serial.SerialBase | None = port
        self.state, self.last_error, self.disconnects = "open", None, 0
        self._lost_ns = 0
        self.cond = threading.Condition()
        self.ring, self.ring_start = bytearray(), writer.cursor
        self.rx_last_ns: int | None = None
        self.tx_bytes, self.tx_last_ns = 0, None
        self.transaction = threading.Lock()
        self.pending = None  # a transact whose answer the reader thread looks for (matcher.Pending)
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name=f"reader-{self.name}", daemon=True)

    # -- reading ----------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - e.g. the disk filled: say so in status and waits, don't vanish
            with self.cond:
                self.state, self.last_error = "fault", f"capture stopped: {type(exc).__name__}: {exc}"
                self._hand_back()
                self.cond.notify_all()
            raise

    def _loop(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            if self.port is None:
                attempt = self._reopen(attempt)
                continue
            try:
                data = self._read()
            except (serial.SerialException, OSError) as exc:
                self._lost(exc)
                continue
            if data:
                self._received(data, time.time_ns())

    def _read(self) -> bytes:
        """What the port holds, up to device.READ_MAX: one record per read, however the port delivers."""
        port = self.port
        fd = device.fileno(port)
        if fd is not None:
            ready, _, _ = select.select([fd, self._wake_r], [], [], 1.0)
            return device.read_now(port) if fd in ready else b""
        first = port.read(1)  # rfc2217: blocks up to the port's read timeout
        return first + device.read_now(port, device.READ_MAX - 1) if first else b""

    def _received(self, data: bytes, now_ns: int) -> None:
        with self.cond:
            self.writer.append(DATA, self.epoch, data, now_ns)  # on disk before anyone hears of it
            self.ring += data
            self.rx_last_ns = now_ns
            # a transact's answer goes out first: the bookkeeping below is not the client's to wait for
            if self.pending is not None and self._offer(self.pending):
                self.pending = None
            if len(self.ring) > RING_BYTES:
                drop = len(self.ring) - RING_BYTES // 2
                del self.ring[:drop]
                self.ring_start += drop
            self.cond.notify_all()

    def _lost(self, exc: Exception) -> None:
        with self.cond:
            self.state, self.last_error = "disconnected", str(exc)
            self.disconnects += 1
            self._lost_ns = time.time_ns()
            self.writer.note(GAP, self.epoch, self._lost_ns, reason=f"device lost: {exc}")
            self._hand_back()
            self.cond.notify_all()
        self._close_port()

    def _reopen(self, attempt: int) -> int:
        if self._stop.wait(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]):
            return attempt
        try:
            port = device.open_port(self.cfg)
        except PanioError as err:
            self.last_error = err.message
            return attempt + 1
        with self.cond:
            now = time.time_ns()
            down_ms = (now - self._lost_ns) // 1_000_000
            # a gap record too: whatever the board printed while it was away is not in the log
            self.writer.note(GAP, self.epoch, now,
                             reason=f"reconnected to {self.cfg['device']} after {down_ms / 1000:.1f} s",
                             reconnected=True, down_ms=down_ms, attempts=attempt + 1)
            self.port, self.state, self.last_error = port, "open", None
            self.cond.notify_all()
        return 0

    def _close_port(self) -> None:
        port, self.port = self.port, None
        if port is not None:
            try:
                port.close()
            except (serial.SerialException, OSError):
                pass

    def stop(self) -> None:
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join(5)
        self._close_port()
        with self.cond:
            self.state = "stopped"
            self._hand_back()
            self.cond.notify_all()

    # -- a transact answered by the reader thread ------------------------------------------------

    def await_answer(self, pending, timeout_s: float) -> bool:
        """Let the reader thread answer ``pending`` (a ``matcher.Pending``) as its bytes arrive, for at most
        ``timeout_s``. True: its reply was sent (all but ``pending.rest``); False: the caller waits itself."""
        with self.cond:
            if self.state != "open" or self.pending is not None:
                return False
            if self._offer(pending):  # the answer came while the request was being sent
                return pending.answered
            self.pending = pending
        if not pending.done.acquire(timeout=max(0.0, timeout_s)):
            with self.cond:
                if self.pending is pending:
                    self.pending = None
                    return False
            pending.done.acquire()  # answered as the deadline passed
        return pending.answered

    def _offer(self, pending) -> bool:
        try:
            return pending.offer(self)
        except Exception:  # noqa: BLE001 - whatever went wrong, capture goes on: the request's thread answers
            return pending.hand_back()

    def _hand_back(self) -> None:
        if self.pending is not None:
            self.pending.hand_back()
            self.pending = None

    # -- the live tail --------------------------------------------------------------------------

    @property
    def cursor(self) -> int:
        return self.writer.cursor

    def read_from(self, pos: int, limit: int) -> tuple[bytes, int]:
        """Up to ``limit`` received bytes from cursor ``pos``: from memory, else from disk (caller holds no lock)."""
        while True:
            with self.cond:
                end = min(self.writer.cursor, pos + limit)
                if pos >= self.ring_start:
                    return bytes(self.ring[pos - self.ring_start:end - self.ring_start]), pos
                ring_start = self.ring_start
            data, at = bytes_between(self.writer.path, pos, min(end, ring_start))
            if data:
                return data, at
            pos = ring_start  # evicted from disk as well: go on with what memory holds

    # -- writing --------------------------------------------------------------------------------

    def require_port(self) -> serial.SerialBase:
        port = self.port
        if port is None:
            raise Unreachable(f"interface {self.name!r} is disconnected ({self.last_error})", interface=self.name)
        return port

    def send(self, data: bytes, pace_ms: int = 0) -> int:
        if not self._write_lock.acquire(timeout=SEND_LOCK_WAIT_S):
            raise Busy(f"interface {self.name!r} is busy writing", interface=self.name)
        try:
            port = self.require_port()
            if not pace_ms:
                # A tty takes a command line at once: written and recorded under ``cond``, so the reader thread
                # records the board's answer after the line that asked for it, never before.
                with self.cond:
                    rest = self._device(device.write_now, port, data)
                    if not rest:
                        return self._sent(data)
                self._device(device.write, port, rest)  # a full tty, a socket: may wait, never holding ``cond``
            else:
                self._device(_paced, port, data, pace_ms)
            with self.cond:
                return self._sent(data)
        finally:
            self._write_lock.release()

    def _device(self, func, *args):
        """``func(*args)``, a write to the port: its failure is the device's (``DeviceError``)."""
        try:
            return func(*args)
        except (serial.SerialException, OSError) as exc:
            raise DeviceError(f"write to {self.cfg['device']} failed: {exc}", interface=self.name) from exc

    def _sent(self, data: bytes) -> int:
        """Record ``data`` as sent (``cond`` held)."""
        self.tx_last_ns = time.time_ns()
        self.writer.append(SENT, self.epoch, data, self.tx_last_ns)
        self.tx_bytes += len(data)
        return len(data)

    def status(self) -> dict[str, Any]:
        with self.cond:
            return {"state": self.state, "cursor": self.writer.cursor, "next_seq": self.writer.seq + (1 if self.writer.col else 0),
                    "rx_last": _iso(self.rx_last_ns), "tx_bytes": self.tx_bytes, "tx_last": _iso(self.tx_last_ns),
                    "disconnects": self.disconnects, "last_error": self.last_error}


def _paced(port: serial.SerialBase, data: bytes, pace_ms: int) -> None:
    """One byte at a time, ``pace_ms`` after each: a polled UART without flow control."""
    for i in range(len(data)):
        port.write(data[i:i + 1])
        port.flush()
        time.sleep(pace_ms / 1000)


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="milliseconds")
