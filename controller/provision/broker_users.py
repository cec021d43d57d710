"""Each control host's own Redis user, ``panio-host-NAME``: made and kept by ``panio setup --host NAME``.

With keys per host (``PANIO_BROKER_PER_HOST=1`` on the controller: each host's Celery keys under
``PREFIX h.NAME:celery:``) a host's worker connects as its own user, which may touch only that host's Celery keys
and channels, its own reports stream and its own targets' lease keys (docs/security.md, "One identity per
host"). The rules are the redis role's (``ansible/roles/redis/templates/panio-host-user.acl.j2``), written once.

The host's password is random, made on its first setup and kept in ``STATE_DIR/setup/redis-hosts.json`` (0600):
the controller's, and the host's ``worker.env``, nowhere else. That file is the role's variables
(``panio_redis_hosts``): ``ansible-playbook ansible/controller.yml -e @FILE`` writes every host's user into Redis's
ACL file. With an administrator's URL (``--broker-admin``, ``PANIO_BROKER_ADMIN``: the role's ``panio-admin``)
setup also installs the user in the running Redis at once (``ACL SETUSER``, then ``ACL SAVE``), and loads panio's
Redis function library (``load_functions``: the only Lua broker users may run, by FCALL).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

USERS_FILE = "redis-hosts.json"


def user_name(host: str) -> str:
    return f"panio-host-{host}"


def identity(folder: Path, host: str, targets: list[str]) -> dict:
    """``host``'s entry (``password``, ``targets``) in ``folder``'s users file, made with a new random password
    the first time; its targets follow the lab's. The file is written 0600, whole or not at all."""
    path = Path(folder) / USERS_FILE
    data = json.loads(path.read_text()) if path.exists() else {}
    hosts = data.setdefault("panio_redis_hosts", {})
    entry = {"password": secrets.token_urlsafe(24), **hosts.get(host, {}), "targets": sorted(targets)}
    if hosts.get(host) != entry:
        hosts[host] = entry
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    return entry


def worker_url(url: str, host: str, password: str) -> str:
    """``url`` (the broker as the workers reach it) with ``host``'s own user and password."""
    parts = urlsplit(url)
    where = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user_name(host)}:{quote(password, safe='')}@{where}"))


def rules(host: str, targets: list[str], prefix: str, db: int) -> str:
    """``host``'s ACL rules as the redis role writes them (its template and defaults)."""
    import jinja2
    import yaml

    from controller.provision.wheelhouse import source_root

    role = source_root() / "ansible" / "roles" / "redis"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, loader=jinja2.FileSystemLoader(role / "templates"))
    values = {"panio_redis_prefix": prefix, "panio_redis_db": db,
              "panio_redis_host_commands": defaults["panio_redis_host_commands"], "name": host, "targets": targets}
    return " ".join(env.get_template("panio-host-user.acl.j2").render(values).split())


def install(admin_url: str, host: str, entry: dict, prefix: str, db: int) -> None:
    """Make (or remake) ``host``'s user in the running Redis at ``admin_url``, then save the ACL file."""
    import redis

    with _admin(admin_url, host, f"install Redis user {user_name(host)}") as client:
        try:
            client.execute_command("ACL", "SETUSER", user_name(host), "reset", "on", f">{entry['password']}",
                                   *rules(host, entry["targets"], prefix, db).split())
            client.execute_command("ACL", "SAVE")
        except redis.exceptions.ResponseError as exc:  # a user without ACL SETUSER, a Redis without an ACL file
            raise _refused(admin_url, host, exc) from None
        _load(client, admin_url, host)


def load_functions(admin_url: str, host: str | None = None) -> None:
    """Load (or replace) panio's Redis function library through ``admin_url`` (the role's ``panio-admin``); Redis
    keeps it in its AOF."""
    with _admin(admin_url, host, "load panio's Redis functions") as client:
        _load(client, admin_url, host)


@contextlib.contextmanager
def _admin(admin_url: str, host: str | None, what: str):
    """A client of the Redis administrator at ``admin_url``; a refused login is ``_refused`` (to do ``what``), a
    broker out of reach ``Unreachable``."""
    import redis

    from bench_agent.errors import Unreachable
    from bench_agent.leases.base import redact

    client = redis.Redis.from_url(admin_url, socket_timeout=10, socket_connect_timeout=10)
    try:
        yield client
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        if isinstance(exc, redis.exceptions.AuthenticationError):
            raise _refused(admin_url, host, exc, what) from None
        raise Unreachable(f"the broker at {redact(admin_url)} is unreachable: {exc}", host=host) from None
    finally:
        client.close()


def _load(client, admin_url: str, host: str | None) -> None:
    import redis

    from bench_agent import redis_functions
    from bench_agent.errors import NotConfigured

    try:
        redis_functions.load(client)
    except (NotConfigured, redis.exceptions.ResponseError) as exc:  # an admin user from before the functions
        raise _refused(admin_url, host, exc, "load panio's Redis functions") from None


def _refused(admin_url: str, host: str | None, exc: Exception, what: str | None = None):
    from bench_agent.errors import NotConfigured
    from bench_agent.leases.base import redact

    what = what or f"install Redis user {user_name(host)}"
    return NotConfigured(f"could not {what} through {redact(admin_url)}: {getattr(exc, 'message', exc)}",
                         hint="--broker-admin takes the redis role's panio-admin user (panio_redis_admin_password; "
                              "re-run the redis role if it predates panio's Redis functions); docs/security.md",
                         host=host)
