"""One TFTP read transfer and the request it answers: packets, option negotiation, the sliding-window sender.

A request is checked whole before anything is sent: a malformed packet, an
unknown mode, a file name over ``MAX_NAME_BYTES`` or an option outside its
RFC's range (blksize 8..65464, RFC 2348; timeout 1..255 s and tsize a number,
RFC 2349; windowsize 1..65535, RFC 7440) is answered with an ERROR packet
(``Refusal``), never with silence. Options panio does not know are left out
of the OACK, as RFC 2347 allows.

The file is streamed: each block is read from the open file when it is sent
(``os.pread``), and sent again the same way, so a transfer holds one block in
memory, whatever the file's size.

Speed: lock-step TFTP costs a round trip per block, and each round trip here
is a wake-up of this process (iPXE never asks for more than 1432-byte blocks
and has no windowsize). So blocks go out under a sliding window even when the
client did not negotiate one: ``SEND_AHEAD`` blocks ahead of its cumulative
ACKs, in order. A client that reads its socket in order accepts each as the
next block (busybox, U-Boot, GRUB), and iPXE places blocks by number anyway.
A lost block (a timeout, or three duplicate ACKs) sends again from the oldest
unacknowledged block with half the window, which then grows back by one per
ACK. ``send_ahead=1`` is plain lock-step.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

RRQ, WRQ, DATA, ACK, ERROR, OACK = 1, 2, 3, 4, 5, 6
UNDEFINED, NOT_FOUND, ACCESS_VIOLATION, ILLEGAL_OP, BAD_OPTION = 0, 1, 2, 4, 8
MODES = ("octet", "netascii")  # netascii is sent as it is on disk, as most servers do; "mail" is obsolete
MAX_NAME_BYTES = 255  # a boot file name; a longer one is refused, not looked up
MIN_BLKSIZE, DEFAULT_BLKSIZE, MAX_BLKSIZE = 8, 512, 65464  # RFC 2348
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1, 255  # RFC 2349
MAX_WINDOWSIZE = 65535  # RFC 7440's range; panio keeps at most MAX_WINDOW blocks in flight
MAX_WINDOW = 64
DEFAULT_TIMEOUT_S, RETRIES = 1.0, 5
# Blocks sent ahead of the client's ACKs when it did not negotiate windowsize: iPXE's e1000 driver keeps
# 8 receive buffers posted (INTEL_RX_FILL); 32 in flight stalled it in measurements (docs/performance.md)
SEND_AHEAD = 8
SLICE_S = 0.2  # a waiting transfer looks at its cancel flag this often
LOST = -1  # _wait_ack: the client keeps acknowledging the block before the oldest in flight


def error_packet(code: int, text: str) -> bytes:
    return struct.pack("!HH", ERROR, code) + text.encode() + b"\0"


class Refusal(Exception):
    """A request answered with an ERROR packet instead of a transfer."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code, self.text = code, text

    def packet(self) -> bytes:
        return error_packet(self.code, self.text)


@dataclass
class Request:
    opcode: int
    name: str
    mode: str
    options: dict[str, str]


def parse_request(packet: bytes) -> Request:
    """A read or write request; ``Refusal`` when it is malformed or names a file too long to be one."""
    words = packet[2:].split(b"\0")
    opcode = struct.unpack("!H", packet[:2])[0] if len(packet) >= 2 else 0
    if opcode not in (RRQ, WRQ) or len(words) < 3 or words[-1] != b"":
        raise Refusal(ILLEGAL_OP, "illegal TFTP operation")
    if len(words[0]) > MAX_NAME_BYTES:
        raise Refusal(UNDEFINED, f"file name longer than {MAX_NAME_BYTES} bytes")
    try:
        name, mode = words[0].decode(), words[1].decode().lower()
        pairs = [w.decode().lower() for w in words[2:-1]]
    except UnicodeDecodeError:
        raise Refusal(ILLEGAL_OP, "illegal TFTP operation: not UTF-8") from None
    if mode not in MODES:
        raise Refusal(ILLEGAL_OP, "transfer mode must be octet or netascii")
    if len(pairs) % 2:
        raise Refusal(BAD_OPTION, f"option {pairs[-1][:32]!r} has no value")
    return Request(opcode, name, mode, dict(zip(pairs[::2], pairs[1::2])))


@dataclass
class Terms:
    """What a transfer was agreed on: block size, timeout, window, and the OACK's options (none: no OACK)."""

    blksize: int = DEFAULT_BLKSIZE
    timeout_s: float = DEFAULT_TIMEOUT_S
    window: int = SEND_AHEAD
    accepted: dict[str, str] = field(default_factory=dict)


def negotiate(options: dict[str, str], size: int, send_ahead: int = SEND_AHEAD) -> Terms:
    """The terms for ``options``; ``Refusal`` (error 8, RFC 2347) for a value outside its RFC's range."""
    terms = Terms(window=max(1, send_ahead))
    if "blksize" in options:
        terms.blksize = _number(options, "blksize", MIN_BLKSIZE, MAX_BLKSIZE)
        terms.accepted["blksize"] = str(terms.blksize)
    if "tsize" in options:
        _number(options, "tsize", 0)
        terms.accepted["tsize"] = str(size)
    if "timeout" in options:
        terms.timeout_s = float(_number(options, "timeout", MIN_TIMEOUT_S, MAX_TIMEOUT_S))
        terms.accepted["timeout"] = options["timeout"]
    if "windowsize" in options:
        terms.window = min(_number(options, "windowsize", 1, MAX_WINDOWSIZE), MAX_WINDOW)
        terms.accepted["windowsize"] = str(terms.window)
    return terms


def _number(options: dict[str, str], key: str, low: int, high: int | None = None) -> int:
    text = options[key]
    if not (text.isascii() and text.isdigit() and len(text) <= 19 and low <= int(text) <= (high or int(text))):
        bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise Refusal(BAD_OPTION, f"{key} must be a whole number {bounds}, not {text[:32]!r}")
    return int(text)


@dataclass
class Transfer:
    """One running transfer, as the server's admission sees it: who, since when it last heard, a stop flag."""

    peer: tuple[str, int]
    path: str
    request: Request
    heard: float = field(default_factory=time.monotonic)  # the last ACK, or the start
    cancel: threading.Event = field(default_factory=threading.Event)


class Sender:
    """One read transfer: an optional OACK, then DATA blocks read from ``fd`` under a sliding window.

    The window is ``terms.window`` (``send_ahead``, or the client's ``windowsize``; 1 is RFC 1350's
    lock-step). ACKs are cumulative. A single duplicate ACK is never answered with a resend (the
    sorcerer's apprentice); three in a row (once per window), or no ACK moving the window for
    ``timeout_s``, send again from the oldest unacknowledged block with half the window. A set
    ``transfer.cancel`` ends it within ``SLICE_S``.
    """

    def __init__(self, sock: socket.socket, fd: int, size: int, terms: Terms, transfer: Transfer) -> None:
        self.sock, self.fd, self.size, self.terms, self.transfer = sock, fd, size, terms, transfer
        self.blksize, self.timeout_s, self.window = terms.blksize, terms.timeout_s, terms.window
        self.resent = 0  # how many times the window went back (a lost block or ACK)

    def run(self) -> bool:
        if self.terms.accepted:
            oack = struct.pack("!H", OACK) + b"".join(k.encode() + b"\0" + v.encode() + b"\0"
                                                      for k, v in self.terms.accepted.items())
            if not self._oack(oack):
                return False
        return self._blocks()

    def _oack(self, oack: bytes) -> bool:
        """Send the OACK until ACK 0 arrives."""
        for _ in range(RETRIES):
            self.sock.send(oack)
            acked = self._wait_ack(time.monotonic() + self.timeout_s, 0, 1)
            if acked is not None:
                return acked is not False
        return False

    def _blocks(self) -> bool:
        last = self.size // self.blksize + 1  # a final short (maybe empty) block ends the transfer
        base = nxt = high = 1  # the oldest unacknowledged block, the next one to send, one past the newest sent
        window, tries, recover = self.window, 0, 0
        while base <= last:
            # iPXE places a block by its 16-bit number relative to its first gap: never have blocks in
            # flight on both sides of a 65536 boundary
            while nxt < base + window and nxt <= last and nxt >> 16 == base >> 16:
                self._send_block(nxt)
                nxt += 1
            high = max(high, nxt)
            # after a go-back, an ACK may name a block sent before it (up to high - 1): it moves the window
            # too; ignoring it stalled iPXE, which had those blocks and kept acknowledging the newest one
            acked = self._wait_ack(time.monotonic() + self.timeout_s, base, high, fast=base >= recover)
            if acked is False:
                return False
            if acked is None or acked == LOST:  # go back to the oldest unacknowledged block, send less ahead
                tries += acked is None
                if tries >= RETRIES:
                    return False
                self.resent += 1
                window, nxt, recover = max(1, window // 2), base, nxt
                continue
            base, tries = acked + 1, 0
            nxt = max(nxt, base)
            window = min(self.window, window + 1)
        return True

    def _send_block(self, n: int) -> None:
        off = (n - 1) * self.blksize
        data = os.pread(self.fd, max(0, min(self.blksize, self.size - off)), off)  # the size it had at the start
        self.sock.sendmsg([struct.pack("!HH", DATA, n & 0xFFFF), data])

    def _wait_ack(self, deadline: float, base: int, nxt: int, fast: bool = False) -> int | bool | None:
        """The newest block in [base, nxt) the ACKs acknowledge (0 for the OACK): the first ACK that moves the
        window, then every ACK already queued (one wake-up per burst, not per block). None when none arrives
        before ``deadline``; LOST when ``fast`` and the client acknowledged block ``base - 1`` three more
        times (it lost ``base``: iPXE acknowledges every block with its first gap); False on an ERROR, a
        refused port or a cancel."""
        newest, dups = None, 0
        while True:
            try:
                if newest is None:
                    left = deadline - time.monotonic()
                    if self.transfer.cancel.is_set():
                        return False
                    if left <= 0:
                        return None
                    self.sock.settimeout(min(left, SLICE_S))
                else:
                    self.sock.settimeout(0)  # non-blocking: only what is already queued
                reply = self.sock.recv(1024)  # an ACK is 4 bytes; an ERROR's text is not needed whole
            except (socket.timeout, BlockingIOError):
                if newest is None:
                    continue
                return newest
            except ConnectionRefusedError:
                return False
            if len(reply) < 4:
                continue
            opcode, number = struct.unpack("!HH", reply[:4])
            if opcode == ERROR:
                return False
            if opcode != ACK:
                continue
            self.transfer.heard = time.monotonic()
            # the 16-bit number names the newest block in flight with those low bits
            absolute = (nxt - 1) - ((nxt - 1 - number) & 0xFFFF)
            if base <= absolute < nxt and (newest is None or absolute > newest):
                newest = absolute
            elif absolute == base - 1 and newest is None and base > 1:
                dups += 1
                if fast and dups >= 3:
                    return LOST
