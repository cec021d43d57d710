"""A control host's reports to the controller: what its runner would write into the results database, signed.

A worker without a results-database URL (``panio worker`` without ``PANIO_RESULTS_URL``) appends each write as
one entry to a Redis Stream of its own, ``PREFIX reports:HOST``; the controller's recorder
(``controller.jobs.recorder``) verifies and applies them (docs/security.md, "Hosts report, the controller
records"). An entry has two fields:

* ``body``: JSON text ``{"v": 1, "host", "job", "seq", "kind", "fence", "at", "data"}``;
* ``sig``: base64 of the body's RSA-PSS (SHA-256) signature with the host's own signing key (the key
  ``panio keys init --name HOST`` made; the controller trusts its certificate).

``seq`` grows with every report of a worker process and across its restarts (microseconds since the epoch,
never below the last one plus one): the recorder applies a job's report only if its ``seq`` is above the last
it recorded for that job, so a report sent twice (a recorder that died before its ``XACK``) or captured and
replayed changes nothing.

Only this module knows the format; the host's side is ``bench_agent.results.reporting``.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path
from typing import Any

VERSION = 1
KINDS = ("taken", "started", "step_start", "steps", "artifact", "finish", "fence", "beat", "health", "health_postpone",
         "check", "notify")
MAX_BODY = 32 * 1024 * 1024  # a report with a screenshot or a serial log; a larger entry is refused unread


def stream(prefix: str, host: str) -> str:
    """The Redis Stream of ``host``'s reports."""
    return f"{prefix}reports:{host}"


def cancel_key(prefix: str, job_id: int) -> str:
    """Set (by the controller) when someone asked to cancel job ``job_id``: what a reporting host reads."""
    return f"{prefix}cancel:{job_id}"


def check_key(prefix: str, host: str, seq: int) -> str:
    """Set (by the recorder) to the id of the health-check job it made for ``host``'s ``check`` report ``seq``: what
    the host's runner waits for before the check's first report (only the controller gives job ids)."""
    return f"{prefix}check:{host}:{seq}"


def health_key(prefix: str, target: str) -> str:
    """The target's health record as the recorder last recorded it (JSON): what a reporting host's gate reads."""
    return f"{prefix}health:{target}"


class Signer:
    """Signs report bodies with one private key (PEM, unencrypted: what ``panio keys init`` writes)."""

    def __init__(self, key_path: Path) -> None:
        from cryptography.hazmat.primitives import serialization

        self._key = serialization.load_pem_private_key(Path(key_path).read_bytes(), password=None)

    def sign(self, body: bytes) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        return base64.b64encode(self._key.sign(body, _pss(padding), hashes.SHA256())).decode()


def _pss(padding):
    from cryptography.hazmat.primitives import hashes

    return padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.MAX_LENGTH)


def verify(cert, body: bytes, sig: str) -> bool:
    """Whether ``sig`` (base64) is ``cert``'s key's signature of ``body``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    try:
        cert.public_key().verify(base64.b64decode(sig, validate=True), body, _pss(padding), hashes.SHA256())
        return True
    except (InvalidSignature, ValueError, TypeError):
        return False


class Sequence:
    """Sequence numbers that only grow, within a process and across its restarts (the clock's microseconds)."""

    def __init__(self) -> None:
        self._last = 0
        self.lock = threading.Lock()  # held while a number is taken *and* its entry appended: the stream's order

    def next(self) -> int:
        self._last = max(self._last + 1, time.time_ns() // 1000)
        return self._last


def body(host: str, job: int | None, seq: int, kind: str, fence: int | None, data: dict[str, Any]) -> bytes:
    return json.dumps({"v": VERSION, "host": host, "job": job, "seq": seq, "kind": kind, "fence": fence,
                       "at": time.time(), "data": data}, separators=(",", ":")).encode()


class Malformed(ValueError):
    """An entry that is not a report: no body, no signature, not JSON, a field of the wrong type."""


def parse(fields: dict) -> tuple[bytes, str, dict[str, Any]]:
    """(body, signature, report) of a stream entry's fields (bytes keys and values, as redis-py returns them)."""
    raw, sig = fields.get(b"body"), fields.get(b"sig")
    if not isinstance(raw, bytes) or len(raw) > MAX_BODY:
        raise Malformed("no body, or one over 32 MiB")
    try:
        report = json.loads(raw)
    except ValueError:
        raise Malformed("its body is not JSON") from None
    if not isinstance(report, dict) or report.get("v") != VERSION or report.get("kind") not in KINDS:
        raise Malformed("its body is no report of this version (v, kind)")
    if not isinstance(report.get("host"), str) or not isinstance(report.get("seq"), int) \
            or not isinstance(report.get("data"), dict):
        raise Malformed("its host, seq or data is missing or of the wrong type")
    for name in ("job", "fence"):
        if report.get(name) is not None and (not isinstance(report[name], int) or isinstance(report[name], bool)):
            raise Malformed(f"its {name} is not a number")
    return raw, (sig.decode("ascii", "replace") if isinstance(sig, bytes) else ""), report
