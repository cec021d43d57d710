"""shellyplug: switch a Shelly smart plug over its local HTTP API.

Both API generations, detected from ``GET /shelly`` (Gen2+ answers with a
``gen`` field, Gen1 does not):

    Gen1   GET /relay/0?turn=on|off|toggle, GET /status     HTTP basic auth when restricted
    Gen2+  GET /rpc/Switch.Set|Switch.GetStatus|Switch.Toggle   HTTP digest auth (SHA-256)

Prints the plug's state after the command (``on`` or ``off``) and exits 0.
An unreachable plug is ``unreachable`` (4); a missing or wrong password is
``auth_failed`` (11).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
TYPE_CHECKING = False  # a power hook need not import typing (docs/scale.md: a process a power operation)
from urllib.parse import urlencode

from bench_agent.errors import AuthFailed, DeviceError, Unreachable, UsageError

if TYPE_CHECKING:
    from typing import Any

PROG = "shellyplug"
PASSWORD_ENV = "SHELLYPLUG_PASSWORD"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", hint=f"see `{self.prog} --help`")


class ShellyPlug:
    """One plug at ``host:port``; ``gen`` is detected on first use."""

    def __init__(self, host: str, port: int = 80, *, user: str = "admin", password: str | None = None,
                 timeout_s: float = 5.0, switch_id: int = 0) -> None:
        self.host, self.port, self.user, self.password = host, port, user, password
        self.timeout_s, self.switch_id = timeout_s, switch_id
        self._gen: int | None = None

    @property
    def where(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def gen(self) -> int:
        if self._gen is None:
            info = self._get("/shelly", auth=False)
            self._gen = int(info.get("gen", 1)) if isinstance(info, dict) else 1
        return self._gen

    def state(self) -> bool:
        if self.gen >= 2:
            return bool(self._rpc("Switch.GetStatus", id=self.switch_id)["output"])
        return bool(self._get(f"/relay/{self.switch_id}")["ison"])

    def set(self, on: bool) -> bool:
        if self.gen >= 2:
            self._rpc("Switch.Set", id=self.switch_id, on="true" if on else "false")
            return on
        return bool(self._get(f"/relay/{self.switch_id}?turn={'on' if on else 'off'}")["ison"])

    def toggle(self) -> bool:
        if self.gen >= 2:
            return not self._rpc("Switch.Toggle", id=self.switch_id)["was_on"]
        return bool(self._get(f"/relay/{self.switch_id}?turn=toggle")["ison"])

    def cycle(self, off_s: float) -> bool:
        self.set(False)
        time.sleep(off_s)
        return self.set(True)

    def _rpc(self, method: str, **params: Any) -> dict:
        return self._get(f"/rpc/{method}?{urlencode(params)}")

    def _get(self, path: str, *, auth: bool = True) -> Any:
        status, headers, body = self._request(path, {})
        if status == 401 and auth:
            status, headers, body = self._request(path, self._auth_header(path, headers))
            if status == 401:
                raise AuthFailed(f"plug {self.where} rejected the password for user {self.user!r}",
                                 hint=f"check -p PASSWORD or ${PASSWORD_ENV}", plug=self.where)
        if status != 200:
            raise DeviceError(f"plug {self.where} answered HTTP {status} to {path}: {body[:200]!r}",
                              plug=self.where, http_status=status)
        try:
            return json.loads(body)
        except ValueError:
            raise DeviceError(f"plug {self.where} sent non-JSON for {path}: {body[:200]!r}", plug=self.where) from None

    def _auth_header(self, path: str, headers: dict[str, str]) -> dict[str, str]:
        if not self.password:
            raise AuthFailed(f"plug {self.where} needs a password", hint=f"pass -p PASSWORD or set ${PASSWORD_ENV}",
                             plug=self.where)
        challenge = headers.get("www-authenticate", "")
        if challenge.lower().startswith("digest"):
            return {"Authorization": digest_authorization(challenge, self.user, self.password, "GET", path)}
        import base64

        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def _request(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
        """One GET (``bench_agent.helpers.plainhttp``: HTTP on a plain socket, what that buys is said there):
        status, headers (names in lower case), body; its failures as panio's errors."""
        from bench_agent.helpers import plainhttp

        try:
            return plainhttp.get(self.host, self.port, path, headers, self.timeout_s)
        except TimeoutError:
            raise Unreachable(f"plug {self.where} did not answer within {self.timeout_s:g} s",
                              hint="the outcome is unknown: check with `shellyplug ... state`", plug=self.where) from None
        except OSError as exc:
            raise Unreachable(f"plug {self.where} unreachable: {exc}", plug=self.where) from None
        except ValueError as exc:
            raise Unreachable(f"plug {self.where} sent no HTTP answer: {exc}", plug=self.where) from None


def digest_authorization(challenge: str, user: str, password: str, method: str, uri: str,
                         cnonce: str | None = None) -> str:
    """The ``Authorization`` value answering a ``WWW-Authenticate: Digest ...`` challenge (RFC 7616)."""
    import hashlib
    import secrets

    fields = {k.lower(): a or b for k, a, b in re.findall(r'(\w+)=(?:"([^"]*)"|([^\s,]*))', challenge)}
    algorithm = fields.get("algorithm", "MD5").upper()
    hash_name = {"MD5": "md5", "SHA-256": "sha256"}.get(algorithm)
    if hash_name is None:
        raise DeviceError(f"plug asks for unsupported digest algorithm {algorithm}")

    def h(text: str) -> str:
        return hashlib.new(hash_name, text.encode()).hexdigest()

    realm, nonce = fields.get("realm", ""), fields.get("nonce", "")
    cnonce, nc = cnonce or secrets.token_hex(8), "00000001"
    ha1, ha2 = h(f"{user}:{realm}:{password}"), h(f"{method}:{uri}")
    response = h(f"{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}")
    return (f'Digest username="{user}", realm="{realm}", nonce="{nonce}", uri="{uri}", algorithm={algorithm}, '
            f'response="{response}", qop=auth, nc={nc}, cnonce="{cnonce}"')


def _host_port(text: str) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT``, an IPv6 address bare (``fd00::41``) or bracketed (``[fd00::41]:8080``)."""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or not host or (rest and not rest.startswith(":")):
            raise UsageError(f"{PROG}: bad address in -d {text!r}", hint="use -d [IPV6] or -d [IPV6]:PORT")
        port = rest[1:] if rest else ""
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not port:
        return host, 80
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"{PROG}: bad port in -d {text!r}", hint="use -d HOST, -d HOST:PORT or -d [IPV6]:PORT")
    return host, int(port)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Switch a Shelly smart plug (Gen1 HTTP API or Gen2+ RPC, detected from "
                "/shelly) and print its state after the command: on or off.",
                epilog="example:\n  shellyplug -d 192.0.2.41 cycle\n  shellyplug -d 192.0.2.41:8080 -p secret state\n\n"
                       "in a power hook:\n  panio power set -t pico --cycle-cmd \"shellyplug -d 192.0.2.41 cycle\" "
                       "--state-cmd \"shellyplug -d 192.0.2.41 state\"\n\nsee also: panio helper, docs/helpers.md",
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-d", "--device", required=True, metavar="HOST[:PORT]",
                   help="the plug's address; IPv6 as [ADDRESS]:PORT or a bare ADDRESS")
    p.add_argument("-u", "--user", default="admin", help="user for an auth-protected plug (default admin)")
    p.add_argument("-p", "--password", help=f"password of an auth-protected plug (else ${PASSWORD_ENV})")
    p.add_argument("--timeout-s", type=float, default=5.0, help="HTTP timeout per request (default 5)")
    p.add_argument("--off-s", type=float, default=2.0, help="how long `cycle` keeps power off (default 2)")
    p.add_argument("--switch", type=int, default=0, metavar="ID", help="switch/relay id on multi-channel devices (default 0)")
    p.add_argument("verb", choices=("on", "off", "cycle", "state", "toggle"), help="what to do")
    return p


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.timeout_s <= 0 or args.off_s < 0:
        raise UsageError(f"{PROG}: --timeout-s must be > 0 and --off-s >= 0")
    host, port = _host_port(args.device)
    plug = ShellyPlug(host, port, user=args.user, password=args.password or os.environ.get(PASSWORD_ENV),
                      timeout_s=args.timeout_s, switch_id=args.switch)
    verbs = {"on": lambda: plug.set(True), "off": lambda: plug.set(False), "state": plug.state,
             "toggle": plug.toggle, "cycle": lambda: plug.cycle(args.off_s)}
    print("on" if verbs[args.verb]() else "off", flush=True)
    return 0


def main() -> None:
    from bench_agent.helpers import console_main

    console_main(PROG, run)
