"""A simulated Shelly smart plug: a real HTTP server on loopback speaking the Shelly APIs.

``SimPlug(gen=2)`` speaks the Gen2+ RPC API (``/rpc/Switch.Set``,
``Switch.GetStatus``, ``Switch.Toggle``, ``Shelly.GetDeviceInfo``, and JSON-RPC
by ``POST /rpc``), with HTTP digest auth (SHA-256, user ``admin``, realm = the
device id) when it has a password. ``SimPlug(gen=1)`` speaks the Gen1 API
(``/relay/0?turn=on|off|toggle``, ``/relay/0``, ``/status``) with basic auth
when it has a password. ``/shelly`` is always open, as on the real devices.

Switching the relay calls ``on_switch(output)``, which is how a simulated
board loses and regains power.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class SimPlug:
    def __init__(self, *, gen: int = 2, password: str | None = None, output: bool = True, port: int = 0,
                 on_switch: Callable[[bool], None] | None = None, host: str = "127.0.0.1") -> None:
        if gen not in (1, 2):
            raise ValueError(f"gen must be 1 or 2, not {gen}")
        self.gen, self.password, self.on_switch = gen, password, on_switch
        self.mac = secrets.token_hex(6).upper()
        self.device_id = f"shellyplusplugs-{self.mac.lower()}"
        self._output = output
        self._lock = threading.Lock()
        self._nonces: set[str] = set()
        self.requests: list[str] = []
        server = _IPv6Server if ":" in host else ThreadingHTTPServer  # host "::1": the plug on IPv6 loopback
        self._server = server((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def output(self) -> bool:
        return self._output

    def start(self) -> SimPlug:
        self._thread = threading.Thread(target=self._server.serve_forever, name="sim-plug", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def switch(self, on: bool) -> bool:
        """Set the relay; returns what it was."""
        with self._lock:
            was, self._output = self._output, on
        if was != on and self.on_switch is not None:
            self.on_switch(on)
        return was

    # --- the two APIs -------------------------------------------------------

    def info(self) -> dict[str, Any]:
        if self.gen == 1:
            return {"type": "SHPLG-S", "mac": self.mac, "auth": bool(self.password),
                    "fw": "20230913-113610/v1.14.0-gcb84623", "discoverable": False, "num_outputs": 1}
        return {"name": None, "id": self.device_id, "mac": self.mac, "slot": 0, "model": "SNPL-00112EU", "gen": 2,
                "fw_id": "20231107-164738/1.0.8-g8c7bb8d", "ver": "1.0.8", "app": "PlugS",
                "auth_en": bool(self.password), "auth_domain": self.device_id if self.password else None}

    def rpc(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if method == "Shelly.GetDeviceInfo":
            return 200, self.info()
        if method not in ("Switch.Set", "Switch.GetStatus", "Switch.Toggle"):
            return 404, {"code": 404, "message": f"No handler for {method}"}
        if str(params.get("id", "")) != "0":
            return 500, {"code": -105, "message": f"Argument 'id', value {params.get('id')} not found!"}
        if method == "Switch.GetStatus":
            return 200, self._switch_status()
        if method == "Switch.Toggle":
            return 200, {"was_on": self.switch(not self._output)}
        on = params.get("on")
        if isinstance(on, str):
            on = {"true": True, "false": False}.get(on.lower(), on)
        if not isinstance(on, bool):
            return 500, {"code": -103, "message": "Invalid argument 'on': expected boolean!"}
        return 200, {"was_on": self.switch(on)}

    def gen1(self, path: str, query: dict[str, str]) -> tuple[int, Any]:
        if path == "/status":
            return 200, {"relays": [self._relay_status()], "meters": [{"power": 3.2 if self._output else 0.0}],
                         "mac": self.mac, "has_update": False}
        if path == "/relay/0":
            turn = query.get("turn")
            if turn in ("on", "off"):
                self.switch(turn == "on")
            elif turn == "toggle":
                self.switch(not self._output)
            elif turn is not None:
                return 400, "Bad turn!"
            return 200, self._relay_status()
        return 404, "Not Found"

    def _switch_status(self) -> dict[str, Any]:
        return {"id": 0, "source": "http", "output": self._output, "apower": 3.2 if self._output else 0.0,
                "voltage": 230.1, "current": 0.014 if self._output else 0.0,
                "temperature": {"tC": 31.4, "tF": 88.5}}

    def _relay_status(self) -> dict[str, Any]:
        return {"ison": self._output, "has_timer": False, "timer_started": 0, "timer_duration": 0,
                "timer_remaining": 0, "overpower": False, "source": "http"}

    # --- auth --------------------------------------------------------------

    def challenge(self) -> str:
        nonce = secrets.token_hex(8)
        with self._lock:
            self._nonces.add(nonce)
        if self.gen == 1:
            return 'Basic realm="Shelly"'
        return f'Digest qop="auth", realm="{self.device_id}", nonce="{nonce}", algorithm=SHA-256'

    def authorized(self, method: str, header: str | None) -> bool:
        if not self.password:
            return True
        if not header:
            return False
        if self.gen == 1:
            expected = "Basic " + base64.b64encode(f"admin:{self.password}".encode()).decode()
            return hmac.compare_digest(header, expected)
        return self._digest_ok(method, header)

    def _digest_ok(self, method: str, header: str) -> bool:
        if not header.startswith("Digest "):
            return False
        f = {k: a or b for k, a, b in re.findall(r'(\w+)=(?:"([^"]*)"|([^\s,]*))', header[7:])}
        if f.get("username") != "admin" or f.get("realm") != self.device_id or f.get("nonce") not in self._nonces:
            return False

        def sha(text: str) -> str:
            return hashlib.sha256(text.encode()).hexdigest()

        ha1 = sha(f"admin:{self.device_id}:{self.password}")
        ha2 = sha(f"{method}:{f.get('uri', '')}")
        want = sha(f"{ha1}:{f['nonce']}:{f.get('nc', '')}:{f.get('cnonce', '')}:{f.get('qop', '')}:{ha2}")
        return hmac.compare_digest(want, f.get("response", ""))


def _handler_for(plug: SimPlug) -> type[BaseHTTPRequestHandler]:
    class ShellyHandler(BaseHTTPRequestHandler):
        server_version = "ShellyHTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            plug.requests.append(self.path)
            if url.path == "/shelly":
                return self._send(200, plug.info())
            if not plug.authorized("GET", self.headers.get("Authorization")):
                return self._unauthorized()
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if plug.gen == 1:
                return self._send(*plug.gen1(url.path, query))
            if url.path.startswith("/rpc/"):
                return self._send(*plug.rpc(url.path[5:], query))
            self._send(404, "Not Found")

        def do_POST(self) -> None:
            plug.requests.append(f"POST {self.path}")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if plug.gen == 1 or self.path != "/rpc":
                return self._send(404, "Not Found")
            if not plug.authorized("POST", self.headers.get("Authorization")):
                return self._unauthorized()
            try:
                req = json.loads(body)
                status, result = plug.rpc(req["method"], req.get("params") or {})
            except (ValueError, KeyError, TypeError):
                return self._send(400, {"code": -32700, "message": "bad JSON-RPC request"})
            key = "result" if status == 200 else "error"
            self._send(200, {"id": req.get("id"), "src": plug.device_id, key: result})

        def _unauthorized(self) -> None:
            self._send(401, {"code": 401, "message": "unauthorized"} if plug.gen == 2 else "401 Unauthorized",
                       {"WWW-Authenticate": plug.challenge()})

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = (json.dumps(body) if not isinstance(body, str) else body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(body, str) else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    return ShellyHandler
