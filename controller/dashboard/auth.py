"""Who may look and who may act: bearer tokens, a session cookie derived from them, and CSRF checks.

Two roles: ``reader`` (every page) and ``operator`` (also cancels jobs).
Tokens come from the environment (``PANIO_DASHBOARD_TOKEN`` for operators,
``PANIO_DASHBOARD_READ_TOKEN`` for readers), never from the command line,
where any local user could read them in the process list. With no token at
all the dashboard only binds to loopback and everyone on this machine is an
operator. Signing in starts a session: a random cookie value the server
keeps in memory (its hash, with the role and an end), so logging out ends it
on the server and a copy of the cookie is then worth nothing (issue 45: the
cookie was an HMAC of the role under its token, and outlived the logout).
A session lasts at most ``SESSION_TTL_S``, a restart ends them all, and at
most ``MAX_SESSIONS`` are kept (the oldest goes first).

A token is at least ``MIN_TOKEN_CHARS`` printable ASCII characters with no
whitespace. A variable that is set to anything else (empty, blank, short) is
refused at start, whatever ``--bind`` says: ``PANIO_DASHBOARD_TOKEN='   '``
made anyone who typed three spaces an operator, and treating it as "no
token" would open the dashboard to everyone on the machine instead.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time

COOKIE = "panio_dashboard"
ROLES = ("reader", "operator")
VARIABLES = {"operator": "PANIO_DASHBOARD_TOKEN", "reader": "PANIO_DASHBOARD_READ_TOKEN"}
MIN_TOKEN_CHARS = 16
SESSION_TTL_S = 7 * 24 * 3600
MAX_SESSIONS = 10_000
MAKE_ONE = "make a token: python3 -c 'import secrets; print(secrets.token_hex(32))'"


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot guard the dashboard, or None when it can."""
    if not token.strip():
        return "is empty or only whitespace"
    if any(not "!" <= c <= "~" for c in token):
        return "holds whitespace, a control character or a character outside printable ASCII"
    if len(token) < MIN_TOKEN_CHARS:
        return f"is {len(token)} characters long; a token needs at least {MIN_TOKEN_CHARS}"
    return None


class Auth:
    def __init__(self, operator_token: str | None, reader_token: str | None) -> None:
        from bench_agent.errors import NotConfigured

        self.tokens = {r: t for r, t in (("operator", operator_token), ("reader", reader_token)) if t is not None}
        for role, token in self.tokens.items():
            if why := token_problem(token):
                raise NotConfigured(f"{VARIABLES[role]} {why}: the dashboard does not start with a token "
                                    "anyone could guess", hint=f"{MAKE_ONE}, or unset it", variable=VARIABLES[role])
        self.csrf_key = secrets.token_bytes(32)  # per process: a form from a previous run must be reloaded
        self.sessions: dict[str, tuple[str, float]] = {}  # sha256 of the cookie -> (role, monotonic end)

    @classmethod
    def from_env(cls) -> "Auth":
        """The tokens of the environment; a variable that is set must hold a usable token (``token_problem``)."""
        return cls(os.environ.get(VARIABLES["operator"]), os.environ.get(VARIABLES["reader"]))

    @property
    def open(self) -> bool:
        return not self.tokens

    def role_for_token(self, token: str) -> str | None:
        token = token.strip()  # a pasted token keeps its newline
        if token_problem(token):
            return None  # never compared: a blank or short guess matches no role, whatever the tokens are
        for role, expected in self.tokens.items():
            if hmac.compare_digest(token.encode(), expected.encode()):
                return role
        return None

    def session(self, role: str) -> str:
        """A new session's cookie value."""
        now = time.monotonic()
        while self.sessions and (len(self.sessions) >= MAX_SESSIONS or next(iter(self.sessions.values()))[1] <= now):
            del self.sessions[next(iter(self.sessions))]  # oldest first: every session lives as long
        cookie = secrets.token_urlsafe(32)
        self.sessions[_digest(cookie)] = (role, now + SESSION_TTL_S)
        return cookie

    def end(self, cookie: str | None) -> None:
        """Log out: the session of ``cookie`` is over, whoever holds a copy."""
        if cookie:
            self.sessions.pop(_digest(cookie), None)

    def role(self, cookie: str | None, authorization: str | None) -> str | None:
        """The caller's role, or None: no token, a wrong one, or a session from another token."""
        if self.open:
            return "operator"
        if authorization and authorization.lower().startswith("bearer "):
            return self.role_for_token(authorization[7:].strip())
        found = self.sessions.get(_digest(cookie)) if cookie else None
        if found and found[1] > time.monotonic():
            return found[0]
        return None

    def csrf(self, cookie: str | None) -> str:
        return _mac(self.csrf_key, cookie or "open")

    def csrf_ok(self, cookie: str | None, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(_bytes(presented), _bytes(self.csrf(cookie)))

    def sign(self, text: str) -> str:
        return _mac(self.csrf_key, "message:" + text)

    def signed(self, text: str, sig: str) -> bool:
        return hmac.compare_digest(_bytes(sig), _bytes(self.sign(text)))


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, _bytes(text), hashlib.sha256).hexdigest()


def _digest(cookie: str) -> str:
    """What the session table keys on: a lookup by hash reveals nothing of the cookies it holds."""
    return hashlib.sha256(_bytes(cookie)).hexdigest()


def _bytes(text: str) -> bytes:
    # compare_digest refuses str outside ASCII ("²" in a field was a 500); a lone surrogate still encodes
    return text.encode("utf-8", "surrogatepass")


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
