"""Message-signing keys: make a pair, trust a certificate, list what is trusted (``panio keys``).

A pair is an RSA private key and a self-signed X.509 certificate for it (no
certificate authority: a store trusts certificates one by one). Celery names
a signer by its certificate's issuer and serial number, so every pair gets a
new random serial and two generations of one machine's key can be trusted at
once while a rotation rolls out (docs/security.md, "Keys").

Files are written atomically with mode 0600 in a folder of mode 0700; where
they live is ``bench_agent.jobs.signing.default_keys`` (the ``PANIO_SIGNING_*``
variables, else ``STATE_DIR/keys``).
"""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path
from typing import Any

from bench_agent.errors import AlreadyExists, ConfigInvalid, NotConfigured
from bench_agent.jobs.signing import Keys, default_keys

KEY_BITS = 2048  # Celery signs with RSA only; 3072 bits cost 11.5 ms a signature here, 2048 bits 4.7 ms
DEFAULT_DAYS, MAX_DAYS = 1825, 36500  # a certificate's life: five years unless `keys init --days` says
SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _folder(path: Path) -> None:
    """A folder of keys panio makes: 0700 with every missing parent (the state directory too), whatever the umask,
    and checked (``bench_agent.private``): under umask 000 the parents were made 0777, and another user could have
    swapped in a ``trusted/`` of theirs. A folder that exists is left as it is (one the operator chose), if no one
    else could write to it (``bench_agent.private.require_trusted``: a key or a certificate put there would be
    refused anyway)."""
    from bench_agent.private import private_dir, require_trusted

    if not path.exists():
        private_dir(path)
    require_trusted(path, "the message-signing keys' folder", directory=True)  # as a worker checks it at start


def _write(path: Path, data: bytes) -> None:
    _folder(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def create(name: str, keys: Keys | None = None, days: int = DEFAULT_DAYS, force: bool = False) -> dict[str, Any]:
    """A new key pair named ``name`` at ``keys`` (default: this process's paths); its certificate is trusted by
    this machine's store too (its own results and resends). Refuses to replace a key unless ``force``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    keys = keys or default_keys()
    if keys.key.exists() and not force:
        raise AlreadyExists(f"a signing key exists at {keys.key}", hint="keep it, or make a new one with --force "
                            "(rotation: docs/security.md)", file=str(keys.key))
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "panio")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days)).sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    for folder in (keys.key.parent, keys.cert.parent, keys.store):
        _folder(folder)
    _write(keys.key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    _write(keys.cert, pem)
    trusted = trust(keys.cert, keys.store)
    return {**describe(keys.cert), "key": str(keys.key), "cert": str(keys.cert), "trusted_as": trusted["file"]}


def _load(path: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigInvalid(f"{path} is not a PEM certificate: {exc}", file=str(path)) from None
    if not isinstance(cert.public_key(), rsa.RSAPublicKey):
        raise ConfigInvalid(f"{path}: Celery's message signing takes RSA certificates only", file=str(path))
    return cert


def describe(path: Path) -> dict[str, Any]:
    """Who a certificate names, its serial, SHA-256 fingerprint and expiry."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    cert = _load(path)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    left_s = (cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    return {"name": names[0].value if names else "?", "serial": format(cert.serial_number, "x"),
            "fingerprint": cert.fingerprint(hashes.SHA256()).hex(":"), "expires": cert.not_valid_after_utc.isoformat(),
            "expired": left_s <= 0, "days_left": int(left_s // 86400), "file": str(path)}


def trust(cert_path: Path, store: Path | None = None, name: str | None = None) -> dict[str, Any]:
    """Copy a certificate into the store, as ``NAME-SERIAL.crt`` (an expired one is refused: Celery would not
    load a store holding it)."""
    store = store or default_keys().store
    info = describe(Path(cert_path))
    if info["expired"]:
        raise ConfigInvalid(f"{cert_path} expired on {info['expires']}", hint="make a new pair where it came from")
    dest = store / f"{SAFE.sub('_', name or info['name'])}-{info['serial'][:16]}.crt"
    data = Path(cert_path).read_bytes()
    for other in store.glob("*") if store.is_dir() else []:  # Celery refuses a store holding one cert twice
        if other != dest and other.read_bytes() == data:
            other.unlink()
    _write(dest, data)
    return {**info, "file": str(dest)}


def untrust(what: str, store: Path | None = None) -> list[str]:
    """Remove the certificates named ``what`` (a file name, or every ``what-*.crt``) from the store."""
    store = store or default_keys().store
    gone = [p for p in sorted(store.glob("*")) if p.name == what or re.fullmatch(re.escape(what) + r"-[0-9a-f]+\.crt",
                                                                                   p.name)]
    if not gone:
        raise NotConfigured(f"no trusted certificate {what!r} in {store}", hint="see `panio keys list`")
    for p in gone:
        p.unlink()
    return [str(p) for p in gone]


def listing(keys: Keys | None = None) -> dict[str, Any]:
    """This machine's own certificate and the ones its store trusts."""
    keys = keys or default_keys()
    own = describe(keys.cert) if keys.cert.is_file() else None
    trusted = [describe(p) for p in sorted(keys.store.glob("*"))] if keys.store.is_dir() else []
    return {"key": str(keys.key), "key_present": keys.key.is_file(), "cert": own, "store": str(keys.store),
            "trusted": trusted}
