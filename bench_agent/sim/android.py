"""A simulated Android device that speaks the real ADB transport protocol over TCP (what `adb connect` reaches).

    python -m bench_agent.sim.android --dir DIR [--name tablet0] [--port 0] [--size 1080x1920] [--boot-s 1]

The wire is adb's own (system/core/adb/protocol.txt): 24-byte messages
(command, arg0, arg1, data length, data checksum, magic = command ^ 0xffffffff)
and their payload. The device answers the host's CNXN with its own banner
(no ``shell_v2`` feature, so the client speaks the legacy ``shell:`` service),
opens streams on OPEN (OKAY, then WRTE packets, each waiting for the host's
OKAY), and closes them with CLSE. Debian's `adb` (29) connects to it as to a
phone on Wi-Fi debugging.

Services: ``shell:`` (an interactive shell: echoes the line, answers, prints a
prompt), ``shell:CMD`` and ``exec:CMD`` (one command), ``reboot:``. Commands:
echo, uname, getprop, setprop, id, true, false, sleep, logcat (streams the input events), wm size, input
(text/keyevent/tap/swipe, recorded as JSON lines in ``events.jsonl`` of the
state dir and drawn on the screen), screencap -p (a PNG of the screen, text
large enough for OCR), reboot, exit. Faults for tests: ``setprop
debug.panio.screencap text`` makes screencap answer text, not an image;
``--unauthorized`` answers CNXN with AUTH, so `adb devices` says
``unauthorized``. A reboot drops the connection and refuses new ones for
``--boot-s`` seconds, then listens on the same port again.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import shlex
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

CNXN, OPEN, OKAY, CLSE, WRTE, AUTH = (int.from_bytes(c, "little") for c in (b"CNXN", b"OPEN", b"OKAY", b"CLSE",
                                                                               b"WRTE", b"AUTH"))
VERSION = 0x01000000  # the version before "skip checksum": both sides send real checksums
MAX_PAYLOAD = 256 * 1024
HEADER = struct.Struct("<6I")
PROMPT = b"panio_sim:/ $ "
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"


def checksum(data: bytes) -> int:
    return sum(data) & 0xFFFFFFFF


def pack(command: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    return HEADER.pack(command, arg0, arg1, len(data), checksum(data), command ^ 0xFFFFFFFF) + data


class Device:
    """The device's state, shared by its connections: screen, properties, recorded events, boot count."""

    def __init__(self, state_dir: Path, width: int, height: int, serial: str) -> None:
        self.state_dir, self.width, self.height, self.serial = state_dir, width, height, serial
        self.lock = threading.Lock()
        self.boots = 1
        self.typed = ""
        self.last = "ready"
        self.props = {"ro.product.model": "PanioSim", "ro.product.name": "panio_sim", "ro.serialno": serial,
                      "ro.build.version.release": "13", "ro.build.version.sdk": "33", "sys.boot_completed": "1"}
        self._png: bytes | None = None
        self.events = state_dir / "events.jsonl"

    def record(self, event: dict[str, Any], shown: str) -> None:
        with self.lock:
            with self.events.open("a") as f:
                f.write(json.dumps(event) + "\n")
            self.last, self._png = shown, None
            if event["type"] == "text":
                self.typed = (self.typed + event["text"])[-40:]

    def screen_png(self) -> bytes:
        with self.lock:
            if self._png is None:
                self._png = self._render()
            return self._png

    def _render(self) -> bytes:
        from PIL import Image, ImageDraw, ImageFont

        img = Image.new("RGB", (self.width, self.height), (250, 250, 250))
        draw = ImageDraw.Draw(img)
        px = max(16, self.width // 20)
        font = ImageFont.truetype(FONT, px)
        fit = max(8, int(self.width / (px * 0.62)) - 6)  # the characters a line holds after its label
        lines = ["ANDROID SIM READY", f"BOOT {self.boots}", f"SIZE {self.width}X{self.height}",
                 f"TEXT {self.typed[-fit:]}", f"LAST {self.last[-fit:]}"]
        for i, line in enumerate(lines):
            draw.text((px, px + i * px * 2), line, fill=(0, 0, 0), font=font)
        out = io.BytesIO()
        img.save(out, "PNG", compress_level=1)
        return out.getvalue()


class Stream:
    """One open stream: the device's id, the host's, and a worker that writes the service's output."""

    def __init__(self, conn: Connection, local: int, remote: int) -> None:
        self.conn, self.local, self.remote = conn, local, remote
        self.acked = threading.Event()
        self.acked.set()
        self.closed = threading.Event()
        self.input: queue.Queue[bytes | None] = queue.Queue()

    def write(self, data: bytes) -> None:
        for i in range(0, len(data), self.conn.max_payload):
            while not self.acked.wait(0.2):  # the host's OKAY for the last packet, before the next one
                if self.closed.is_set():
                    raise ConnectionError("stream closed")
            if self.closed.is_set():
                raise ConnectionError("stream closed")
            self.acked.clear()
            self.conn.send(WRTE, self.local, self.remote, data[i:i + self.conn.max_payload])

    def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            self.input.put(None)
            self.conn.send(CLSE, self.local, self.remote)


class Connection:
    """One host connection: a reader loop dispatching messages, a thread per stream."""

    def __init__(self, sim: SimAndroid, sock: socket.socket) -> None:
        self.sim, self.sock = sim, sock
        self.max_payload = 4096
        self.streams: dict[int, Stream] = {}
        self.next_id = 1
        self.send_lock = threading.Lock()

    def send(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        with self.send_lock:
            try:
                self.sock.sendall(pack(command, arg0, arg1, data))
            except OSError:
                pass  # the host went away: the reader loop ends the connection

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            part = self.sock.recv(n - len(buf))
            if not part:
                raise ConnectionError("host closed")
            buf += part
        return buf

    def run(self) -> None:
        try:
            while True:
                command, arg0, arg1, length, _check, magic = HEADER.unpack(self._recv(HEADER.size))
                if magic != command ^ 0xFFFFFFFF:
                    raise ConnectionError("bad magic")
                self._dispatch(command, arg0, arg1, self._recv(length) if length else b"")
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            for s in list(self.streams.values()):
                s.closed.set()
                s.input.put(None)
            self.sock.close()

    def _dispatch(self, command: int, arg0: int, arg1: int, data: bytes) -> None:
        if command == CNXN:
            self.max_payload = max(4096, min(arg1, MAX_PAYLOAD))
            if self.sim.unauthorized:
                self.send(AUTH, 1, 0, os.urandom(20))  # a TOKEN the host can never get accepted
                return
            self.send(CNXN, VERSION, MAX_PAYLOAD, self.sim.banner())
        elif command == AUTH:
            if arg0 == 2:  # a signature we never accept: ask again; the host then offers its key and waits
                self.send(AUTH, 1, 0, os.urandom(20))
        elif command == OPEN:
            self._open(arg0, data.rstrip(b"\0").decode("utf-8", "replace"))
        elif command == OKAY:
            stream = self.streams.get(arg1)
            if stream is not None:
                stream.acked.set()
        elif command == WRTE:
            stream = self.streams.get(arg1)
            if stream is not None:
                self.send(OKAY, stream.local, stream.remote)
                stream.input.put(data)
        elif command == CLSE:
            stream = self.streams.pop(arg1, None)
            if stream is not None:
                stream.closed.set()
                stream.input.put(None)

    def _open(self, remote: int, service: str) -> None:
        local, self.next_id = self.next_id, self.next_id + 1
        kind, _, rest = service.partition(":")
        if kind not in ("shell", "exec", "reboot"):
            self.send(CLSE, 0, remote)  # refused: the host says "closed"
            return
        stream = self.streams[local] = Stream(self, local, remote)
        self.send(OKAY, local, remote)
        threading.Thread(target=self._serve, args=(stream, kind, rest), daemon=True).start()

    def _serve(self, stream: Stream, kind: str, rest: str) -> None:
        try:
            if kind == "reboot":
                stream.close()
                self.sim.reboot()
            elif kind == "shell" and not rest.strip():
                self._interactive(stream)
            else:
                stream.write(self.sim.run(rest, stream)[0])
        except ConnectionError:
            pass
        finally:
            if self.streams.pop(stream.local, None) is not None:
                stream.close()

    def _interactive(self, stream: Stream) -> None:
        stream.write(PROMPT)
        pending = b""
        while (data := stream.input.get()) is not None:
            pending += data
            while b"\n" in pending or b"\r" in pending:
                cut = min(i for i in (pending.find(b"\n"), pending.find(b"\r")) if i >= 0)
                line, pending = pending[:cut], pending[cut + 1:]
                if not line and pending[:1] == b"\n":
                    continue
                stream.write(line + b"\r\n")  # a pty echoes what it is sent
                out, done = self.sim.run(line.decode("utf-8", "replace"), stream)
                stream.write(out.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
                if done:
                    return
                stream.write(PROMPT)


class SimAndroid:
    """The device and its listener on 127.0.0.1 (a reboot closes every connection and the port for a while)."""

    def __init__(self, state_dir: Path, port: int = 0, width: int = 1080, height: int = 1920,
                 boot_s: float = 1.0, unauthorized: bool = False) -> None:
        self.boot_s, self.unauthorized = boot_s, unauthorized
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        state_dir.mkdir(parents=True, exist_ok=True)
        self.device = Device(state_dir, width, height, f"127.0.0.1:{self.port}")
        self.connections: list[Connection] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def banner(self) -> bytes:
        p = self.device.props
        return (f"device::ro.product.name={p['ro.product.name']};ro.product.model={p['ro.product.model']};"
                f"ro.product.device=panio_sim;features=").encode() + b"\0"

    def serve_forever(self) -> None:
        while not self.stopped.is_set():
            try:
                sock, _ = self.listener.accept()
            except OSError:
                if self.stopped.is_set():
                    return
                time.sleep(0.05)  # rebooting: the listener is being replaced
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, sock)
            with self.lock:
                self.connections.append(conn)
            threading.Thread(target=conn.run, daemon=True).start()

    def reboot(self) -> None:
        """Drop every connection, refuse new ones for ``boot_s``, come back on the same port."""
        with self.lock:
            listener, conns, self.connections = self.listener, self.connections, []
        self.device.record({"type": "reboot"}, "reboot")
        for conn in conns:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        _close_listener(listener)
        time.sleep(self.boot_s)
        with self.device.lock:
            self.device.boots += 1
            self.device._png = None
        self.listener = socket.create_server(("127.0.0.1", self.port))

    def run(self, line: str, stream: Stream) -> tuple[bytes, bool]:
        """The output of one shell command line, and whether the session ends."""
        try:
            words = shlex.split(line)
        except ValueError as exc:
            return f"/system/bin/sh: syntax error: {exc}\n".encode(), False
        if not words:
            return b"", False
        return Shell(self, stream).run(words)


class Shell:
    """The commands of the simulated device's shell (see the module docstring)."""

    def __init__(self, sim: SimAndroid, stream: Stream) -> None:
        self.sim, self.dev, self.stream = sim, sim.device, stream

    def run(self, words: list[str]) -> tuple[bytes, bool]:
        name, args = words[0], words[1:]
        if name == "exit":
            return b"", True
        if name == "reboot":
            threading.Thread(target=self.sim.reboot, daemon=True).start()
            return b"", True
        handler = getattr(self, "cmd_" + name, None)
        if handler is None:
            return f"/system/bin/sh: {name}: inaccessible or not found\n".encode(), False
        return handler(args), False

    def cmd_echo(self, args: list[str]) -> bytes:
        return (" ".join(args) + "\n").encode()

    def cmd_true(self, args: list[str]) -> bytes:
        return b""

    def cmd_false(self, args: list[str]) -> bytes:
        return b""

    def cmd_id(self, args: list[str]) -> bytes:
        return b"uid=2000(shell) gid=2000(shell) groups=2000(shell) context=u:r:shell:s0\n"

    def cmd_uname(self, args: list[str]) -> bytes:
        if "-a" in args:
            return b"Linux localhost 5.10.0-panio-sim #1 SMP PREEMPT aarch64 Toybox\n"
        return b"Linux\n"

    def cmd_getprop(self, args: list[str]) -> bytes:
        props = self.dev.props
        if args:
            return (props.get(args[0], "") + "\n").encode()
        return "".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())).encode()

    def cmd_setprop(self, args: list[str]) -> bytes:
        if len(args) != 2:
            return b"usage: setprop NAME VALUE\n"
        self.dev.props[args[0]] = args[1]
        return b""

    def cmd_sleep(self, args: list[str]) -> bytes:
        deadline = time.monotonic() + float(args[0] if args else 1)
        while time.monotonic() < deadline and not self.stream.closed.is_set():
            time.sleep(0.02)
        return b""

    def cmd_logcat(self, args: list[str]) -> bytes:
        """The boot's log lines, then each input event as it is recorded, until the host closes the stream."""
        stamp = time.strftime("%m-%d %H:%M:%S.000")
        self.stream.write(f"{stamp}  1000  1000 I panio_sim: boot {self.dev.boots} completed\n".encode())
        seen = len(self.dev.events.read_text().splitlines()) if self.dev.events.exists() else 0
        while not self.stream.closed.wait(0.05):
            lines = self.dev.events.read_text().splitlines() if self.dev.events.exists() else []
            for line in lines[seen:]:
                self.stream.write(f"{time.strftime('%m-%d %H:%M:%S.000')}  1000  1000 I InputDispatcher: "
                                  f"{line}\n".encode())
            seen = len(lines)
        return b""

    def cmd_wm(self, args: list[str]) -> bytes:
        if args[:1] == ["size"]:
            return f"Physical size: {self.dev.width}x{self.dev.height}\n".encode()
        return b"usage: wm size\n"

    def cmd_screencap(self, args: list[str]) -> bytes:
        if self.dev.props.get("debug.panio.screencap") == "text":
            return b"screencap: SurfaceFlinger is not responding\n"
        return self.dev.screen_png()

    def cmd_input(self, args: list[str]) -> bytes:
        if args[:1] in (["touchscreen"], ["keyboard"]):
            args = args[1:]
        verb, rest = (args[0], args[1:]) if args else ("", [])
        try:
            if verb == "text" and len(rest) == 1:
                text = rest[0].replace("%s", " ")
                self.dev.record({"type": "text", "text": text}, f"text {text}")
            elif verb == "keyevent" and rest:
                for key in rest:
                    self.dev.record({"type": "keyevent", "key": key}, f"key {key}")
            elif verb == "tap" and len(rest) == 2:
                x, y = int(rest[0]), int(rest[1])
                self.dev.record({"type": "tap", "x": x, "y": y}, f"tap {x} {y}")
            elif verb == "swipe" and len(rest) in (4, 5):
                n = [int(v) for v in rest]
                self.dev.record({"type": "swipe", "x1": n[0], "y1": n[1], "x2": n[2], "y2": n[3],
                                 "ms": n[4] if len(n) == 5 else None}, "swipe")
            else:
                return b"Error: Unknown command or bad arguments: input " + " ".join(args).encode() + b"\n"
        except ValueError:
            return b"Error: Invalid arguments for command: " + verb.encode() + b"\n"
        return b""


def _close_listener(listener: socket.socket) -> None:
    try:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept (close alone does not)
    except OSError:
        pass
    listener.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench_agent.sim.android")
    ap.add_argument("--dir", type=Path, required=True, help="the bench's directory")
    ap.add_argument("--name", default="tablet0", help="the device's name: DIR/NAME/ holds its state, "
                    "DIR/NAME.json says it is ready")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--size", default="1080x1920")
    ap.add_argument("--boot-s", type=float, default=1.0)
    ap.add_argument("--unauthorized", action="store_true")
    args = ap.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    sim = SimAndroid(args.dir / args.name, args.port, width, height, args.boot_s, args.unauthorized)
    import signal

    signal.signal(signal.SIGTERM, lambda *_: (sim.stopped.set(), _close_listener(sim.listener)))
    ready = {"name": args.name, "kind": "android", "pid": os.getpid(), "port": sim.port,
             "serial": sim.device.serial, "size": f"{width}x{height}", "state_dir": str(args.dir / args.name)}
    tmp = args.dir / f"{args.name}.json.tmp"
    tmp.write_text(json.dumps(ready))
    os.replace(tmp, args.dir / f"{args.name}.json")
    sim.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
