"""panio's own TFTP server: read-only, pure Python, for hosts where dnsmasq cannot run.

RFC 1350 read requests with the blksize (RFC 2348), tsize and timeout
(RFC 2349) and windowsize (RFC 7440) options. Each transfer gets its own
UDP socket and thread, as the RFC's transfer identifiers require. Writes are
refused; a path that resolves outside the root (``..``, a symlink out) is
"not found", never served. The root itself must be a directory that is not a
system folder nor a home directory, symlinks resolved (``values.served_root``):
a root of ``/`` served ``/etc/shadow`` to anyone on the link.

Speed: lock-step TFTP costs a round trip per block, and each round trip here
is a wake-up of this process (iPXE never asks for more than 1432-byte blocks
and has no windowsize). So blocks go out under a sliding window even when the
client did not negotiate one: ``SEND_AHEAD`` blocks ahead of its cumulative
ACKs, in order. A client that reads its socket in order accepts each as the
next block (busybox, U-Boot, GRUB), and iPXE places blocks by number anyway.
A lost block (a timeout, or three duplicate ACKs) sends again from the oldest
unacknowledged block with half the window, which then grows back by one per
ACK. ``send_ahead=1`` is plain lock-step.

It logs in dnsmasq's words (``sent PATH to IP``, ``file PATH not found``), so
``netboot status`` reads one format whichever server ran. It needs no root
when bound to a port above 1023: with QEMU's user networking, the guest's
``tftp://10.0.2.2:PORT/...`` reaches it on the host's loopback.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Callable

from bench_agent.netboot.values import BadValue, served_root

RRQ, WRQ, DATA, ACK, ERROR, OACK = 1, 2, 3, 4, 5, 6
NOT_FOUND, ACCESS_VIOLATION, ILLEGAL_OP, BAD_OPTION = 1, 2, 4, 8
DEFAULT_BLKSIZE, MAX_BLKSIZE = 512, 65464
DEFAULT_TIMEOUT_S, RETRIES = 1.0, 5
MAX_WINDOW = 64
# Blocks sent ahead of the client's ACKs when it did not negotiate windowsize: iPXE's e1000 driver keeps
# 8 receive buffers posted (INTEL_RX_FILL); 32 in flight stalled it in measurements (docs/performance.md)
SEND_AHEAD = 8
LOST = -1  # _wait_ack: the client keeps acknowledging the block before the oldest in flight


def _error(code: int, text: str) -> bytes:
    return struct.pack("!HH", ERROR, code) + text.encode() + b"\0"


def parse_request(packet: bytes) -> tuple[int, str, dict[str, str]]:
    """(opcode, filename, options) of a read or write request; ValueError when malformed."""
    opcode = struct.unpack("!H", packet[:2])[0]
    words = packet[2:].split(b"\0")
    if opcode not in (RRQ, WRQ) or len(words) < 3:
        raise ValueError("not a request")
    name, pairs = words[0].decode("utf-8", "replace"), words[2:-1]
    options = {pairs[i].decode().lower(): pairs[i + 1].decode() for i in range(0, len(pairs) - 1, 2)}
    return opcode, name, options


class TftpServer:
    """Serve ``root`` read-only on ``(host, port)`` until ``close``; ``BadValue`` for a root it must not serve."""

    def __init__(self, root: str, host: str = "127.0.0.1", port: int = 69,
                 log: Callable[[str], None] = lambda line: None, send_ahead: int = SEND_AHEAD) -> None:
        self.root = Path(served_root(root))
        if not self.root.is_dir():
            raise BadValue(f"the TFTP root {root} does not exist")
        self.send_ahead = send_ahead
        self.log = log
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="tftp", daemon=True)

    def start(self) -> TftpServer:
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)  # a close from another thread does not wake recvfrom; polling does
        while not self._closed.is_set():
            try:
                packet, peer = self.sock.recvfrom(2048)
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._transfer, args=(packet, peer), daemon=True).start()

    def resolve(self, name: str) -> Path | None:
        """The file ``name`` asks for inside the root, or None when it is missing or outside the root."""
        path = (self.root / name.lstrip("/")).resolve()
        if path != self.root and self.root not in path.parents:
            return None
        return path if path.is_file() else None

    def _transfer(self, packet: bytes, peer: tuple[str, int]) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((self.host, 0))
            sock.connect(peer)
            self._answer(sock, packet, peer[0])
        except OSError as exc:
            self.log(f"failed sending to {peer[0]}: {exc}")
        finally:
            sock.close()

    def _answer(self, sock: socket.socket, packet: bytes, client: str) -> None:
        try:
            opcode, name, options = parse_request(packet)
        except (ValueError, struct.error, UnicodeDecodeError):
            sock.send(_error(ILLEGAL_OP, "illegal TFTP operation"))
            return
        if opcode == WRQ:
            self.log(f"write request for {name} from {client} refused")
            sock.send(_error(ACCESS_VIOLATION, "panio serves read-only"))
            return
        path = self.resolve(name)
        if path is None:
            self.log(f"file {self.root / name.lstrip('/')} not found")
            sock.send(_error(NOT_FOUND, "file not found"))
            return
        with open(path, "rb") as f:
            data = f.read()
        if _Sender(sock, data, options, self.send_ahead).run():
            self.log(f"sent {path} to {client}")
        else:
            self.log(f"failed sending {path} to {client}")


class _Sender:
    """One read transfer: an optional OACK, then DATA blocks under a sliding window of ``window`` blocks.

    ``window`` is ``send_ahead`` (1 is RFC 1350's lock-step) unless the client negotiated
    ``windowsize`` (RFC 7440). ACKs are cumulative. A single duplicate ACK is never answered with a
    resend (the sorcerer's apprentice); three in a row (once per window), or no ACK moving the
    window for ``timeout_s``, send again from the oldest unacknowledged block with half the window.
    """

    def __init__(self, sock: socket.socket, data: bytes, options: dict[str, str], send_ahead: int = 1) -> None:
        self.sock, self.data = sock, memoryview(data)
        self.accepted: dict[str, str] = {}
        self.blksize, self.timeout_s, self.window = DEFAULT_BLKSIZE, DEFAULT_TIMEOUT_S, max(1, send_ahead)
        self.resent = 0  # how many times the window went back (a lost block or ACK)
        if "blksize" in options and options["blksize"].isdigit():
            self.blksize = max(8, min(int(options["blksize"]), MAX_BLKSIZE))
            self.accepted["blksize"] = str(self.blksize)
        if "tsize" in options:
            self.accepted["tsize"] = str(len(data))
        if options.get("timeout", "").isdigit() and 1 <= int(options["timeout"]) <= 255:
            self.timeout_s = float(options["timeout"])
            self.accepted["timeout"] = options["timeout"]
        if options.get("windowsize", "").isdigit() and int(options["windowsize"]) >= 1:
            self.window = min(int(options["windowsize"]), MAX_WINDOW)
            self.accepted["windowsize"] = str(self.window)

    def run(self) -> bool:
        if self.accepted:
            oack = struct.pack("!H", OACK) + b"".join(k.encode() + b"\0" + v.encode() + b"\0"
                                                      for k, v in self.accepted.items())
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
        last = len(self.data) // self.blksize + 1  # a final short (maybe empty) block ends the transfer
        base = nxt = 1  # the oldest unacknowledged block, the next one to send (absolute numbers)
        window, tries, recover = self.window, 0, 0
        while base <= last:
            # iPXE places a block by its 16-bit number relative to its first gap: never have blocks in
            # flight on both sides of a 65536 boundary
            while nxt < base + window and nxt <= last and nxt >> 16 == base >> 16:
                self._send_block(nxt)
                nxt += 1
            acked = self._wait_ack(time.monotonic() + self.timeout_s, base, nxt, fast=base >= recover)
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
            window = min(self.window, window + 1)
        return True

    def _send_block(self, n: int) -> None:
        off = (n - 1) * self.blksize
        self.sock.sendmsg([struct.pack("!HH", DATA, n & 0xFFFF), self.data[off:off + self.blksize]])

    def _wait_ack(self, deadline: float, base: int, nxt: int, fast: bool = False) -> int | bool | None:
        """The newest block in [base, nxt) the ACKs acknowledge (0 for the OACK): the first ACK that moves the
        window, then every ACK already queued (one wake-up per burst, not per block). None when none arrives
        before ``deadline``; LOST when ``fast`` and the client acknowledged block ``base - 1`` three more
        times (it lost ``base``: iPXE acknowledges every block with its first gap); False on an ERROR or a
        refused port."""
        newest, dups = None, 0
        while True:
            try:
                if newest is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self.sock.settimeout(left)
                    reply = self.sock.recv(4 + MAX_BLKSIZE)
                else:
                    self.sock.settimeout(0)  # non-blocking: only what is already queued
                    reply = self.sock.recv(4 + MAX_BLKSIZE)
            except (socket.timeout, BlockingIOError):
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
            # the 16-bit number names the newest block in flight with those low bits
            absolute = (nxt - 1) - ((nxt - 1 - number) & 0xFFFF)
            if base <= absolute < nxt and (newest is None or absolute > newest):
                newest = absolute
            elif absolute == base - 1 and newest is None and base > 1:
                dups += 1
                if fast and dups >= 3:
                    return LOST


def main() -> None:  # pragma: no cover - a convenience for trying it by hand
    import argparse

    p = argparse.ArgumentParser(description="serve a folder read-only over TFTP")
    p.add_argument("root")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6969)
    p.add_argument("--send-ahead", type=int, default=SEND_AHEAD)
    a = p.parse_args()
    server = TftpServer(a.root, a.host, a.port, log=print, send_ahead=a.send_ahead).start()
    print(f"serving {os.path.abspath(a.root)} on {server.host}:{server.port}")
    threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover
    main()
