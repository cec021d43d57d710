"""Signed messages on the broker: Celery's ``auth`` serializer, with panio's keys.

Every message panio puts on the broker — jobs, operations, their results and
Celery's remote-control commands — is signed with the sender's private key
(RSA-PSS over SHA-256), and a receiver decodes only messages whose signer's
certificate is in its *certificate store* (a folder of PEM files). A message
that is not signed, or is signed by a key whose certificate is not there, is
refused before it is decoded (and logged, ``bench_agent.jobs.intake``).

Where the keys are: ``PANIO_SIGNING_KEY``, ``PANIO_SIGNING_CERT`` and
``PANIO_CERT_STORE``, else ``STATE_DIR/keys/signing.key``, ``signing.crt`` and
``trusted/``. Each must be this user's (or root's), writable by no one else, in
folders no one else can write (``check_trusted``), else nothing is signed or
verified. ``panio keys init`` makes a pair (``controller.keys``); ``panio
setup`` makes one on each control host and exchanges the certificates: the
controller trusts every worker (their results), a worker trusts the
controller and itself. A reconciler never signs a job: it sends again only the
message the controller signed, kept with the job (``bench_agent.jobs.sealed``).
Rotation and distribution: docs/security.md.

A signature does not say *when* or *where*: a captured ``panio.op`` could be
sent again, or to another host. So each one carries a stamp inside its signed
body (``op_stamp``: the host it is for, when it was sent, how long its sender
waits, a nonce), and only that host's worker runs it, only within that window
and only once (``check_fresh``; the nonces it has seen are kept on
the host, where no broker user can erase them: ``bench_agent.jobs.replay``). A
job runs once by the results database's claim and the host's own record of the
jobs it started (``bench_agent.jobs.started``); its message says when it was
sealed, and a host refuses one sealed over 30 days ago.

Without keys nothing is sent or served: a process that would use the broker
fails as not configured, unless it is told to run unsigned on purpose
(``panio worker --insecure-unsigned``; ``PANIO_INSECURE_UNSIGNED=1`` for the
controller's commands), which it says loudly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_agent.errors import NotConfigured

KEY_ENV, CERT_ENV, STORE_ENV = "PANIO_SIGNING_KEY", "PANIO_SIGNING_CERT", "PANIO_CERT_STORE"
INSECURE_ENV = "PANIO_INSECURE_UNSIGNED"
KEY_NAME, CERT_NAME, STORE_NAME = "signing.key", "signing.crt", "trusted"
DIGEST = "sha256"
HINT = "create them with `panio keys init` (docs/security.md, \"Keys\")"


@dataclass(frozen=True)
class Keys:
    key: Path
    cert: Path
    store: Path


def keys_dir() -> Path:
    from bench_agent.paths import state_dir

    return state_dir() / "keys"


def default_keys() -> Keys:
    """Where this process's keys are: the environment's paths, else the state directory's."""
    d = keys_dir()
    return Keys(Path(os.environ.get(KEY_ENV) or d / KEY_NAME), Path(os.environ.get(CERT_ENV) or d / CERT_NAME),
                Path(os.environ.get(STORE_ENV) or d / STORE_NAME))


def configured(check: bool = True) -> Keys | None:
    """This process's keys; None when none is configured. Half a set (a key without its store) is an error.
    ``check``: refuse keys someone else could have written (``check_trusted``); without it only where they are,
    for a caller that checks them when it loads them (``controller.backends.celery_app``)."""
    keys = default_keys()
    named = any(os.environ.get(e) for e in (KEY_ENV, CERT_ENV, STORE_ENV))
    missing = [str(p) for p in (keys.key, keys.cert) if not p.is_file()]
    if not keys.store.is_dir() or not any(keys.store.iterdir()):
        missing.append(f"{keys.store}/ (trusted certificates)")
    if len(missing) == 3 and not named:
        return None
    if missing:
        raise NotConfigured(f"the message-signing keys are incomplete: missing {', '.join(missing)}", hint=HINT,
                            missing=missing)
    if check:
        check_trusted(keys)
    return keys


def check_trusted(keys: Keys) -> None:
    """``Refused`` unless only this user (or root) could have written the keys: the signing key (readable by no
    one else), its certificate, the store and every certificate in it, and the folders they are in. Whoever
    could add a certificate to the store could have their jobs run; a worker that refuses to start says so, one
    that skipped the file would trust an attacker's or, confusingly, no one."""
    from bench_agent.private import require_trusted, require_trusted_files

    require_trusted(keys.key, "the message-signing key", secret=True)
    require_trusted(keys.cert, "the message-signing certificate")
    require_trusted_files(keys.store, "the trusted certificates' folder")


SKEW_S = 60.0  # clocks of the controller and the hosts may differ this much (NTP keeps them far closer)


def op_stamp(wait_s: float, host: str) -> dict[str, Any]:
    """What a ``panio.op`` message says about itself, inside its signature: for ``host``, sent now, waited for
    ``wait_s``."""
    import time
    import uuid

    return {"host": host, "sent_at": time.time(), "wait_s": float(wait_s), "nonce": uuid.uuid4().hex}


def check_fresh(stamp: Any, first_time: Any, host: str) -> None:
    """Refuse an op message without a stamp, for another host than ``host``, sent outside its window, or seen
    before. ``first_time(nonce, ttl_s)`` records a nonce and says whether it was new."""
    import logging
    import time

    from bench_agent.errors import Refused

    why = None
    nonce = stamp.get("nonce") if isinstance(stamp, dict) else None
    if not (isinstance(nonce, str) and 16 <= len(nonce) <= 128 and nonce.isascii() and nonce.isalnum()
            and all(isinstance(stamp.get(k), (int, float)) for k in ("sent_at", "wait_s"))):
        why = "it carries no valid stamp (host, sent_at, wait_s, nonce)"
    elif stamp.get("host") != host:  # each host keeps its own replay guard: a message runs on its host only
        why = f"it was sent to host {str(stamp.get('host'))[:80]!r}, not to this one ({host})"
    else:
        age_s = time.time() - stamp["sent_at"]
        if not -SKEW_S <= age_s <= min(stamp["wait_s"], 86400.0) + SKEW_S:
            why = f"it was sent {age_s:.0f} s ago, outside its window ({stamp['wait_s']:g} s + {SKEW_S:g} s skew)"
        elif not first_time(stamp["nonce"], int(min(stamp["wait_s"], 86400.0) + 2 * SKEW_S) + 1):
            why = "it was seen before (a replay)"
    if why:
        logging.getLogger("panio.signing").warning("refused an operation message: %s", why)
        raise Refused(f"operation message refused: {why}", hint="send it again (panio stamps every message)")


def insecure_from_env() -> bool:
    return os.environ.get(INSECURE_ENV, "").strip().lower() in ("1", "true", "yes")


def required(insecure: bool = False) -> Keys | None:
    """The keys to sign and verify with; without any, ``NotConfigured`` unless ``insecure`` says to go unsigned."""
    keys = configured()
    if keys is None and not insecure:
        raise NotConfigured("no message-signing keys: panio does not use a broker unsigned (whoever can publish "
                            "to it would drive every bench)",
                            hint=f"{HINT}; for a private test broker only: --insecure-unsigned on the worker and "
                                 f"{INSECURE_ENV}=1 for the controller's commands")
    return keys


def apply(app: Any, keys: Keys | None) -> None:
    """Sign what ``app`` sends and accept only what is signed by a trusted certificate (``keys``); with no keys,
    plain JSON, and a loud warning once per process."""
    if keys is None:
        _warn_unsigned()
        return
    app.conf.update(task_serializer="auth", result_serializer="auth", accept_content=["auth"],
                    result_accept_content=["auth"], event_serializer="json", security_key=str(keys.key),
                    security_certificate=str(keys.cert), security_cert_store=str(keys.store),
                    security_digest=DIGEST)
    # Registers the auth serializer with these keys for this process (Celery keeps one registry per process)
    # and stops decoding anything else where a caller does not name what it accepts.
    app.setup_security(allowed_serializers=[], digest=DIGEST)


_WARNED: list[bool] = []


def _warn_unsigned() -> None:
    import logging

    if not _WARNED:
        _WARNED.append(True)
        logging.getLogger("panio.signing").warning(
            "INSECURE: broker messages are NOT signed (--insecure-unsigned / %s=1): anyone who can publish to the "
            "broker can drive every target this process serves", INSECURE_ENV)
