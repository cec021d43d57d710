"""The HID daemon of one target: holds the rig (exclusive, like a serial port) and runs commands sent to it.

    python -m bench_agent.hid.daemon --state-dir DIR --target T --config JSON

It opens the target's rig once and serves ``<state>/run/hid-<target>.sock``:
one JSON request per connection, ``{"words": [...], "pace_ms": N}``, answered
with ``{"ok": true, "result": {...}}`` or ``{"ok": false, "error": {...}}``
(an error as panio's JSON). Commands run one at a time. While it runs,
``hid.send`` goes through it and nothing else can open the rig; its
discovery file is ``<state>/daemons/hid-<target>.json`` (``panio daemons``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

MODULE = "bench_agent.hid.daemon"
MAX_REQUEST_BYTES = 1 << 16


def discovery_path(target: str, state: Path) -> Path:
    return state / "daemons" / f"hid-{target}.json"


def socket_path(target: str, state: Path) -> str:
    from bench_agent.serial.files import socket_address

    return socket_address(target, state, kind="hid")


def request(target: str, state: Path, words: list[str], pace_ms: int, timeout_s: float) -> dict[str, Any]:
    """Run one command through the daemon; raises the daemon's error as a ``PanioError``."""
    from bench_agent.errors import NotRunning, Timeout, from_json

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(socket_path(target, state))
        s.sendall(json.dumps({"words": words, "pace_ms": pace_ms}).encode() + b"\n")
        reply = s.makefile("rb").readline()
    except socket.timeout as exc:
        raise Timeout(f"the HID daemon of {target!r} did not answer within {timeout_s:g} s", target=target) from exc
    except OSError as exc:
        raise NotRunning(f"the HID daemon of {target!r} is not answering: {exc}",
                         hint=f"restart it: `panio hid serve {target}`", target=target) from exc
    finally:
        s.close()
    answer = json.loads(reply or b'{"ok": false, "error": {"error": "error", "message": "no reply"}}')
    if not answer.get("ok"):
        raise from_json(answer["error"])
    return answer["result"]


class Server:
    def __init__(self, state: Path, target: str, config: dict[str, Any]) -> None:
        from bench_agent.hid import channel as hid

        self.target, self.backend = target, hid.open_backend(config)
        self.path = socket_path(target, state)
        from bench_agent.private import private_dir

        private_dir(os.path.dirname(self.path))  # no other user may swap the socket for theirs (issue 45)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(10)
                self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        from bench_agent.errors import PanioError, UsageError
        from bench_agent.hid import channel as hid

        try:
            req = json.loads(conn.makefile("rb").readline(MAX_REQUEST_BYTES))
            words, pace_ms = req["words"], int(req.get("pace_ms", hid.DEFAULT_PACE_MS))
            if not isinstance(words, list) or not 1 <= pace_ms <= 1000:
                raise UsageError("bad request to the HID daemon")
            reply = {"ok": True, "result": hid.run_words(hid.Driver(self.backend, pace_ms), [str(w) for w in words])}
        except PanioError as err:
            reply = {"ok": False, "error": err.to_json()}
        except (ValueError, KeyError, OSError) as exc:
            reply = {"ok": False, "error": {"error": "usage", "exit": 2, "message": f"bad request: {exc}"}}
        try:
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
        self.backend.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    from bench_agent.daemons.per_target import serve

    return serve(MODULE, "hid", Server, discovery_path, argv, described=("protocol",))


if __name__ == "__main__":
    raise SystemExit(main())
