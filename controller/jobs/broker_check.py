"""What `panio doctor` says about the broker: does it let strangers in, does it speak plain text, are we signing.

Whoever can publish to the broker reaches every worker (docs/security.md). A
broker that answers a client with no credentials, a plain-text ``redis://``
beyond this machine, or a controller with no signing keys each get a warning
row; none fails the doctor's exit status (the lab may be a laptop).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

WARNING, OK = "warning", "ok"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
EXPIRY_WARNING_DAYS = 30


def _row(item: str, status: str, detail: str) -> dict[str, str]:
    return {"channel": "broker", "item": item, "status": status, "detail": detail}


def anonymous_url(url: str) -> str:
    """``url`` without its user and password (TLS options kept): what a stranger on the network would try."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def answers_anonymously(url: str, timeout_s: float = 3.0) -> bool | None:
    """True if the broker at ``url`` runs PING for a client with no credentials; None if it cannot be reached."""
    import redis

    client = redis.Redis.from_url(anonymous_url(url), socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    try:
        return bool(client.ping())
    except redis.exceptions.AuthenticationError:
        return False
    except redis.exceptions.ResponseError as exc:  # NOAUTH, or an ACL that refuses the default user
        return False if "NOAUTH" in str(exc) or "NOPERM" in str(exc) else None
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return None
    finally:
        client.close()


def rows(url: str) -> list[dict[str, Any]]:
    from bench_agent.errors import NotConfigured, Refused
    from bench_agent.jobs import signing

    out = []
    anonymous = answers_anonymously(url)
    if anonymous is None:
        out.append(_row("auth", "unchecked", "the broker does not answer (is it running? TLS options in the URL?)"))
    elif anonymous:
        out.append(_row("auth", WARNING, "the broker answers a client with no credentials: anyone who reaches it "
                                         "can publish; give it ACL users (docs/security.md, \"The broker\")"))
    else:
        out.append(_row("auth", OK, "a client without credentials is refused"))
    parts = urlsplit(url)
    if parts.scheme == "rediss":
        out.append(_row("tls", OK, "rediss:// (TLS)"))
    elif (parts.hostname or "") in LOOPBACK:
        out.append(_row("tls", OK, "plain text, on loopback only"))
    else:
        out.append(_row("tls", WARNING, f"plain-text redis:// to {parts.hostname}: passwords and messages cross "
                                        "the network readable; use rediss:// (docs/security.md)"))
    try:
        keys = signing.configured()
    except NotConfigured as err:
        out.append(_row("signing", WARNING, err.message))
    except Refused as err:  # a key or certificate someone else could have written: nothing signs or verifies
        out.append(_row("signing", WARNING, f"{err.message} ({err.hint})"))
    else:
        out.append(_signing(keys) if keys else
                   _row("signing", WARNING, "no message-signing keys: jobs cannot be queued (`panio keys init`)"))
    return out


def _signing(keys) -> dict[str, str]:
    """A certificate here that expires soon stops the processes that load it: say so a month ahead."""
    from controller import keys as keyfiles

    listed = keyfiles.listing(keys)
    soon = [c for c in [listed["cert"], *listed["trusted"]] if c and c["days_left"] < EXPIRY_WARNING_DAYS]
    if soon:
        return _row("signing", WARNING, "certificates expire soon: " + ", ".join(
            f"{c['file']} ({c['days_left']} days)" for c in soon) + " (rotation: docs/security.md, \"Keys\")")
    return _row("signing", OK, f"messages signed with {keys.key}")
