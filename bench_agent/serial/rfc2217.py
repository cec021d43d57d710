"""pyserial's RFC 2217 client (ser2net's ``telnet(rfc2217)`` ports), reading in chunks.

pyserial's own reader thread puts every received byte on a queue as its own
item, and ``read`` takes them off one at a time: ~0.1-0.3 MB/s of Python work
per byte, most of a core at a console's full rate. This subclass parses each
received segment once and queues the runs of plain data between telnet
commands whole; ``read``/``in_waiting`` work on bytes as before.

``open`` keeps what the port already holds. pyserial's ``open`` ends with
``reset_input_buffer()`` and ``reset_output_buffer()``: two PURGE_DATA requests
to the server, and a discard of everything its reader thread had queued during
the negotiation. ser2net answers *either* purge by dropping the board's output
it holds (measured: 12-16 KB mid-flood for each, the receive purge also what
waited in the device). On a reconnect after a ser2net restart that threw away
what the board printed during the outage, and cut the stream again just after
the "reconnected" record, with no gap to show for it. A capture never wants
that, and a fresh connection has nothing of its own to purge; an explicit
``reset_input_buffer()``/``reset_output_buffer()`` still purges.

Everything else (option negotiation, port settings, modem lines, writes) is
pyserial's, unchanged.
"""

from __future__ import annotations

import queue
import socket

from serial import rfc2217
from serial.rfc2217 import DO, DONT, IAC, M_IAC_SEEN, M_NEGOTIATE, M_NORMAL, SB, SE, WILL, WONT
from serial.serialutil import PortNotOpenError, SerialException, Timeout

from bench_agent.serial.opening import KeepsInputOnOpen

RECV_BYTES = 65536


class ChunkedRfc2217Serial(KeepsInputOnOpen, rfc2217.Serial):
    def open(self) -> None:
        self._pending, self._eof = bytearray(), False
        super().open()

    @property
    def in_waiting(self) -> int:
        if not self.is_open:
            raise PortNotOpenError()
        self._take(block=False)
        if not self._pending and self._eof:  # as a readable descriptor that returns nothing: gone
            raise SerialException("connection failed (the server closed it)")
        return len(self._pending)

    def read(self, size: int = 1) -> bytes:
        if not self.is_open:
            raise PortNotOpenError()
        timeout = Timeout(self._timeout)
        self._take(block=False)
        while len(self._pending) < size and not self._eof and not timeout.expired():
            if not self._take(block=True, timeout_s=timeout.time_left()):
                break
        if not self._pending and self._eof:
            raise SerialException("connection failed (the server closed it)")
        data = bytes(self._pending[:size])
        del self._pending[:size]
        return data

    def reset_input_buffer(self) -> None:
        if self._opening:  # pyserial's open purges: keep what the board printed (see the module docstring)
            return
        super().reset_input_buffer()
        self._pending.clear()

    def reset_output_buffer(self) -> None:
        if not self._opening:  # ser2net's transmit purge drops board output too (see the module docstring)
            super().reset_output_buffer()

    def _take(self, block: bool, timeout_s: float | None = None) -> bool:
        """Move queued chunks to the pending buffer (waiting up to timeout_s for the first when block)."""
        try:
            item = self._read_buffer.get(block, timeout_s)
            while True:
                if item is None:  # the reader thread's end-of-connection mark
                    self._eof = True
                    return True
                self._pending += item
                item = self._read_buffer.get_nowait()
        except queue.Empty:
            return not block or bool(self._pending)

    def _telnet_read_loop(self) -> None:
        """pyserial's state machine, except that plain data between commands is queued as one chunk."""
        mode, suboption, command = M_NORMAL, None, None
        while self.is_open:
            try:
                data = self._socket.recv(RECV_BYTES)
            except socket.timeout:
                continue
            except OSError:
                data = b""
            if not data:
                self._read_buffer.put(None)
                return
            plain, i = bytearray(), 0
            while i < len(data):
                if mode == M_NORMAL and suboption is None:
                    j = data.find(IAC, i)
                    plain += data[i:j if j >= 0 else len(data)]
                    if j < 0:
                        break
                    mode, i = M_IAC_SEEN, j + 1
                    continue
                byte, i = data[i:i + 1], i + 1
                if mode == M_NORMAL:  # inside a subnegotiation
                    if byte == IAC:
                        mode = M_IAC_SEEN
                    else:
                        suboption += byte
                elif mode == M_IAC_SEEN:
                    mode = M_NORMAL
                    if byte == IAC:  # an escaped 0xff data byte
                        (plain if suboption is None else suboption).extend(IAC)
                    elif byte == SB:
                        suboption = bytearray()
                    elif byte == SE:
                        if suboption is not None:
                            self._telnet_process_subnegotiation(bytes(suboption))
                        suboption = None
                    elif byte in (DO, DONT, WILL, WONT):
                        command, mode = byte, M_NEGOTIATE
                    else:
                        self._telnet_process_command(byte)
                else:  # M_NEGOTIATE: the option after DO/DONT/WILL/WONT
                    self._telnet_negotiate_option(command, byte)
                    mode = M_NORMAL
            if plain:
                self._read_buffer.put(bytes(plain))
