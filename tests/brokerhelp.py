"""A real redis-server as ansible/roles/redis configures it (ACL users, TLS on loopback), for the broker's tests."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import subprocess
from pathlib import Path

from jobhelp import wait_for
from peerhelp import REDIS, free_port

ROLE = Path(__file__).resolve().parent.parent / "ansible" / "roles" / "redis"
PASSWORDS = {"panio_redis_controller_password": "controller-secret-0123456789",
             "panio_redis_worker_password": "worker-secret-0123456789"}
HOSTS = {"hx": {"password": "host-x-secret-0123456789", "targets": ["t1"]}}  # a control host's own user (issue 38)
QUICK = "[[steps]]\nrun = 'ping ${target} --count 2'\nexpect_output = 'seq=2'\n[[steps]]\nrun = 'action run ${target} hi'\n"


def tls_files(folder: Path) -> dict[str, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    folder.mkdir(parents=True, exist_ok=True)

    def cert(subject, issuer, key, signer, ca: bool):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            b = b.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key, key = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2))
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "panio test CA")])
    server = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    out = {"ca": folder / "ca.pem", "cert": folder / "server.pem", "key": folder / "server.key"}
    out["ca"].write_bytes(cert(ca_name, ca_name, ca_key, ca_key, True).public_bytes(serialization.Encoding.PEM))
    out["cert"].write_bytes(cert(server, ca_name, key, ca_key, False).public_bytes(serialization.Encoding.PEM))
    out["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()))
    out["key"].chmod(0o600)
    return out


def render(template: str, variables: dict) -> str:
    """One of the role's templates, as Ansible renders it (its ``hash`` filter included)."""
    import jinja2
    import yaml

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             loader=jinja2.FileSystemLoader(ROLE / "templates"))  # as Ansible's template module
    env.filters["hash"] = lambda text, kind: hashlib.new(kind, text.encode()).hexdigest()
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values = {**defaults, **variables}
    for _ in range(3):  # defaults refer to each other ({{ panio_redis_prefix }})
        values = {k: env.from_string(v).render(values) if isinstance(v, str) else v for k, v in values.items()}
    return env.from_string((ROLE / "templates" / template).read_text()).render(values)


class LockedRedis:
    """``functions``: load panio's Redis function library as setup does (False: a Redis that lacks it)."""

    def __init__(self, root: Path, functions: bool = True, **role_vars) -> None:
        self.root, self.port = root, free_port()
        self.tls = tls_files(root / "tls")
        variables = {**PASSWORDS, "panio_redis_bind": "127.0.0.1", "panio_redis_acl_file": str(root / "users.acl"),
                     "panio_redis_tls_cert": str(self.tls["cert"]), "panio_redis_tls_key": str(self.tls["key"]),
                     "panio_redis_tls_ca": str(self.tls["ca"]), "panio_redis_tls_port": self.port, **role_vars}
        (root / "users.acl").write_text(render("panio-users.acl.j2", variables))
        (root / "panio.conf").write_text(render("panio.conf.j2", variables))
        self.proc = subprocess.Popen([REDIS, str(root / "panio.conf"), "--dir", str(root), "--save", ""],
                                     stdout=open(root / "redis.log", "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: "Ready to accept connections" in (root / "redis.log").read_text() or self.proc.poll(),
                 timeout_s=10)
        assert self.proc.poll() is None, (root / "redis.log").read_text()
        if functions:  # as `panio setup --broker-admin` or the controller's first use would
            self.load_functions()

    def client(self, user: str | None, password: str | None = None, **kw):
        import redis

        return redis.Redis.from_url(self.url(user, password), **kw)

    def load_functions(self) -> None:
        from bench_agent import redis_functions

        client = self.client("panio-controller", PASSWORDS["panio_redis_controller_password"])
        try:
            redis_functions.load(client)
        finally:
            client.close()

    def url(self, user: str | None, password: str | None = None) -> str:
        who = f"{user}:{password}@" if user else ""
        return (f"rediss://{who}127.0.0.1:{self.port}/0?ssl_cert_reqs=required&ssl_ca_certs={self.tls['ca']}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
