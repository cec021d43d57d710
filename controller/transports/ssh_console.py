"""An interactive operation over SSH: this terminal bridged to a session channel of its own.

The host runs ``python -m bench_agent.agent --interactive`` on a new session
channel of the kept connection, without a pty: its stdout carries only the
operation's bytes (what the board says), its stderr the agent's hello and,
at the end, its reply line (``bench_agent.agent``). So no marker is ever
searched for in the board's bytes, and the board's bytes pass untouched.

Here the terminal goes raw, so every key (Ctrl-C included) reaches the board,
and is restored however the call ends. Ctrl-] ends the input: the channel's
write side is closed, the host's side sees the end of its input, prints what
the board still says until it is quiet, and replies. A board that never goes
quiet is cut off after ``QUIT_GRACE_S``. Not a terminal (a pipe): stdin is
copied until its end, as ``serial connect`` does on this machine.

The link's liveness is watched as for any call (``ssh_link.Liveness``): a link
silent for ``SILENT_LIMIT_S`` ends the console as ``unreachable``.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from typing import Any

from bench_agent.errors import from_json
from controller.transports.ssh_link import PROTOCOL, SILENT_LIMIT_S

QUIT = b"\x1d"  # Ctrl-], as telnet, tio and serial connect on this machine
QUIT_GRACE_S = 3.0
HELLO_TIMEOUT_S = 20.0


def run_console(ssh, chan, request: dict[str, Any]) -> Any:
    chan.exec_command(ssh.agent_command("--interactive"))
    console = _Console(ssh, chan)
    console.expect_hello()
    line = json.dumps({"v": PROTOCOL, "id": 1, "op": request["op"], "args": request.get("args", {})}) + "\n"
    chan.sendall(line.encode())
    stdin = sys.stdin.fileno()
    if not os.isatty(stdin):
        console.pump(stdin)
        return console.result(request)
    import termios
    import tty

    saved = termios.tcgetattr(stdin)
    try:
        tty.setraw(stdin)
        console.say(f"panio: connecting to {_what(request)} on host {ssh.name}; Ctrl-] quits")
        console.pump(stdin, keys=True)
    finally:
        termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        sys.stderr.write("\r\npanio: disconnected\n")
        sys.stderr.flush()
    return console.result(request)


def _what(request: dict[str, Any]) -> str:
    iface = request.get("args", {}).get("iface") or {}
    return f"{iface['device']} ({iface.get('name')})" if "device" in iface else request["op"]


class _Console:
    def __init__(self, ssh, chan) -> None:
        self.ssh, self.chan = ssh, chan
        self.raw = False
        self.hello: dict | None = None
        self.reply: dict | None = None
        self.quit_at: float | None = None
        self._input_open = True
        self._err = b""
        self._out = b""  # keys not yet sent
        self._eof_sent = False
        self._said: list[str] = []

    def say(self, text: str) -> None:
        self.raw = True
        sys.stderr.write(text + "\r\n")
        sys.stderr.flush()

    def expect_hello(self) -> None:
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        while self.hello is None:
            if self.chan.exit_status_ready() and not self._pending() or time.monotonic() > deadline:
                raise self.ssh.lost("the interactive agent did not start: " + (" ".join(self._said) or "no message"))
            select.select([self.chan], [], [], 0.5)
            self._drain()
        if self.hello.get("panio_agent") != PROTOCOL:
            raise self.ssh.lost(f"the interactive agent speaks protocol {self.hello.get('panio_agent')!r}")

    def pump(self, stdin: int, keys: bool = False) -> None:
        """Keys to the channel, the channel to the screen, until the reply (or the quit's grace runs out).

        Keys are sent only as the channel's window allows, and stdin is read only once they are gone, so a
        board that talks while a long paste goes out is still read: neither side can block the other."""
        while self.reply is None:
            if self.chan.exit_status_ready() and not self._pending():
                return
            reading = self._input_open and not self._out
            ready, _, _ = select.select([self.chan] + ([stdin] if reading else []), [], [],
                                        0.02 if self._out else 0.5)
            self._drain()
            if stdin in ready:
                self._input(os.read(stdin, 4096), keys)
            self._send()
            if self.quit_at is not None and time.monotonic() - self.quit_at > QUIT_GRACE_S:
                return
            silent = self.ssh.liveness.silent_s()
            if silent > SILENT_LIMIT_S:
                raise self.ssh.lost(f"silent for {silent:.0f} s")

    def _input(self, data: bytes, keys: bool) -> None:
        if keys and QUIT in data:
            data = data[:data.index(QUIT)]
            self.quit_at = time.monotonic()
        elif not data and keys:
            self.quit_at = time.monotonic()  # the terminal hung up: leave as for Ctrl-]
        self._out += data
        if not data or self.quit_at is not None:
            self._input_open = False

    def _send(self) -> None:
        while self._out and self.chan.send_ready():
            self._out = self._out[self.chan.send(self._out[:32768]):]
        if not self._input_open and not self._out and not self._eof_sent:
            self.chan.shutdown_write()  # the end of the host side's input
            self._eof_sent = True

    def _pending(self) -> bool:
        return self.chan.recv_ready() or self.chan.recv_stderr_ready()

    def _drain(self) -> None:
        while self.chan.recv_ready():
            data = self.chan.recv(65536)
            self.ssh.liveness.heard()
            if self.quit_at is None:  # after Ctrl-], the board's last words are not for the screen
                os.write(sys.stdout.fileno(), data)
        while self.chan.recv_stderr_ready():
            self._err += self.chan.recv_stderr(65536)
            self.ssh.liveness.heard()
        while b"\n" in self._err:
            line, self._err = self._err.split(b"\n", 1)
            self._line(line.decode("utf-8", "replace"))

    def _line(self, text: str) -> None:
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "panio_agent" in obj:
            self.hello = obj
        elif isinstance(obj, dict) and obj.get("id") == 1 and "ok" in obj:
            self.reply = obj
        else:  # the host side's own words (a warning): shown, and kept for an error message
            self._said.append(text.strip())
            sys.stderr.write(text + ("\r\n" if self.raw else "\n"))
            sys.stderr.flush()

    def result(self, request: dict[str, Any]) -> Any:
        if self.reply is not None:
            if self.reply.get("ok"):
                return self.reply.get("result")
            raise from_json(self.reply.get("error") or {})
        if self.quit_at is not None:
            # closing the channel ends the operation on the host: its next write to us fails
            args = request.get("args", {})
            return {"target": args.get("target"), "interface": (args.get("iface") or {}).get("name"), "closed": True}
        raise self.ssh.lost("the interactive agent ended without a reply: " + (" ".join(self._said) or "no message"))
