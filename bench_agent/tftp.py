"""panio's own TFTP server: read-only, pure Python, for hosts where dnsmasq cannot run.

RFC 1350 read requests with the blksize (RFC 2348), tsize and timeout
(RFC 2349) options, which iPXE and U-Boot ask for. Each transfer gets its own
UDP socket and thread, as the RFC's transfer identifiers require. Writes are
refused; a path that resolves outside the root (``..``, a symlink out) is
"not found", never served.

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
from pathlib import Path
from typing import Callable

RRQ, WRQ, DATA, ACK, ERROR, OACK = 1, 2, 3, 4, 5, 6
NOT_FOUND, ACCESS_VIOLATION, ILLEGAL_OP, BAD_OPTION = 1, 2, 4, 8
DEFAULT_BLKSIZE, MAX_BLKSIZE = 512, 65464
DEFAULT_TIMEOUT_S, RETRIES = 1.0, 5


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
    """Serve ``root`` read-only on ``(host, port)`` until ``close``."""

    def __init__(self, root: str, host: str = "127.0.0.1", port: int = 69,
                 log: Callable[[str], None] = lambda line: None) -> None:
        self.root = Path(root).resolve()
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
        if _Sender(sock, data, options).run():
            self.log(f"sent {path} to {client}")
        else:
            self.log(f"failed sending {path} to {client}")


class _Sender:
    """One lock-step read transfer: an optional OACK, then DATA blocks each acknowledged."""

    def __init__(self, sock: socket.socket, data: bytes, options: dict[str, str]) -> None:
        self.sock, self.data = sock, data
        self.accepted: dict[str, str] = {}
        self.blksize, self.timeout_s = DEFAULT_BLKSIZE, DEFAULT_TIMEOUT_S
        if "blksize" in options and options["blksize"].isdigit():
            self.blksize = max(8, min(int(options["blksize"]), MAX_BLKSIZE))
            self.accepted["blksize"] = str(self.blksize)
        if "tsize" in options:
            self.accepted["tsize"] = str(len(data))
        if options.get("timeout", "").isdigit() and 1 <= int(options["timeout"]) <= 255:
            self.timeout_s = float(options["timeout"])
            self.accepted["timeout"] = options["timeout"]
        sock.settimeout(self.timeout_s)

    def run(self) -> bool:
        if self.accepted:
            oack = struct.pack("!H", OACK) + b"".join(k.encode() + b"\0" + v.encode() + b"\0"
                                                      for k, v in self.accepted.items())
            if not self._exchange(oack, 0):
                return False
        blocks = len(self.data) // self.blksize + 1  # a final short (maybe empty) block ends the transfer
        for n in range(1, blocks + 1):
            chunk = self.data[(n - 1) * self.blksize:n * self.blksize]
            if not self._exchange(struct.pack("!HH", DATA, n & 0xFFFF) + chunk, n & 0xFFFF):
                return False
        return True

    def _exchange(self, packet: bytes, block: int) -> bool:
        """Send ``packet`` until ACK ``block`` arrives (retransmitting on timeout); False on error or give-up."""
        for _ in range(RETRIES):
            self.sock.send(packet)
            while True:
                try:
                    reply = self.sock.recv(4 + MAX_BLKSIZE)
                except socket.timeout:
                    break
                except ConnectionRefusedError:
                    return False
                if len(reply) < 4:
                    continue
                opcode, number = struct.unpack("!HH", reply[:4])
                if opcode == ERROR:
                    return False
                if opcode == ACK and number == block:
                    return True
                # a duplicate ACK of an earlier block: keep waiting (no resend: avoids the sorcerer's apprentice)
        return False


def main() -> None:  # pragma: no cover - a convenience for trying it by hand
    import argparse

    p = argparse.ArgumentParser(description="serve a folder read-only over TFTP")
    p.add_argument("root")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6969)
    a = p.parse_args()
    server = TftpServer(a.root, a.host, a.port, log=print).start()
    print(f"serving {os.path.abspath(a.root)} on {server.host}:{server.port}")
    threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover
    main()
