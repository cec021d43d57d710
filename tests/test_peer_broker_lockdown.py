"""Issue 22, item 3: the broker locked down, against a real redis-server with ACL users and TLS on loopback.

The server runs the configuration ansible/roles/redis writes (its templates and defaults rendered here):
TLS only, the default user off, a controller user and a worker user limited to panio's keys and channels
and to data commands. A worker and the controller's commands work through it; a client without
credentials, with a wrong password or without TLS is refused; the worker's user cannot administer Redis
or touch keys outside panio's prefix; `panio doctor` warns about a broker that lets anyone in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from brokerhelp import HOSTS, PASSWORDS, QUICK, ROLE, LockedRedis, tls_files
from jobhelp import job_file, wait_for
from peerhelp import REDIS, SHARED_REDIS, Workers, answers, free_port, use_lab
from sshd import Sshd

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    redis = LockedRedis(tmp_path_factory.mktemp("locked"))
    yield redis
    redis.stop()


@pytest.fixture(scope="module")
def workers(broker, tmp_path_factory):
    w = Workers(tmp_path_factory.mktemp("lockdown"),
                broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"]),
                worker_broker=broker.url("panio-worker", PASSWORDS["panio_redis_worker_password"]),
                PANIO_REDIS_PREFIX="panio:")  # the prefix the users may use (the role's default)
    yield w
    w.stop_all()


def test_a_worker_and_the_controller_work_through_acl_and_tls(panio, workers, tmp_path):
    use_lab(panio, workers)
    panio("host", "add", "h1", "--ssh", "ops@h1.invalid")
    panio("target", "add", "t1", "--host", "h1")
    panio("action", "add", "hi", "-t", "t1", "--command", f"touch {tmp_path / 'hi'}")
    worker = workers.start("h1")
    r = panio("job", "run", job_file(tmp_path, QUICK), "--target", "t1")
    assert "complete, passed" in r.out and (tmp_path / "hi").exists()
    panio("host", "set", "h1", "--transport", "celery")  # a runtime command through the host's worker
    assert panio("ping", "t1", "--count", "2", "--json").json()["host"] == "h1"
    assert panio("lease", "list", "--json").json() == []
    assert "NOPERM" not in worker.log.read_text() and "NoPermission" not in worker.log.read_text()
    doctor = panio("doctor", "--json").json()["broker"]
    assert {r["item"]: r["status"] for r in doctor} == {"auth": "ok", "tls": "ok", "signing": "ok"}


def test_no_credentials_a_wrong_password_or_plain_text_get_nothing(broker):
    import redis

    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(broker.url(None)).ping()  # TLS, but nobody: the default user is off
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(broker.url("panio-worker", "guess")).ping()
    assert not answers(broker.port)  # plain text to the TLS port: no answer at all
    with pytest.raises(redis.exceptions.ConnectionError):  # a server whose certificate the client does not trust
        redis.Redis.from_url(broker.url("panio-worker", PASSWORDS["panio_redis_worker_password"])
                             .replace(str(broker.tls["ca"]), "/etc/ssl/certs/ca-certificates.crt")).ping()


def test_the_workers_user_checks_leases_from_memory_over_tls(broker, monkeypatch, tmp_path):
    """The role's users may track the lease keys (CLIENT TRACKING, ``__redis__:invalidate``), and a grant by
    the controller's user reaches the worker's next check through TLS (``bench_agent.leases.cache``)."""
    from bench_agent.leases.redis_store import RedisLeaseStore

    monkeypatch.setenv("PANIO_RESULTS_URL", f"sqlite:///{tmp_path / 'results.db'}")
    store = RedisLeaseStore(broker.url("panio-worker", PASSWORDS["panio_redis_worker_password"]), "panio:")
    controller = RedisLeaseStore(broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"]),
                                 "panio:")
    assert store.holder("tls-t") is None and store.holder("tls-t") is None
    assert store.cache.client_id is not None, "the worker's user may not track the lease keys"
    for _ in range(5):
        assert store.holder("tls-t") is None
    assert store.cache.hits >= 5
    lease = controller.try_acquire("tls-t", {"holder": "ctl"}, ttl_s=30, durable_fence=False)
    assert store.holder("tls-t")["token"] == lease.token
    lease.release()
    assert store.holder("tls-t") is None


def test_the_workers_user_cannot_administer_redis_or_leave_panios_keys(broker):
    import redis

    r = redis.Redis.from_url(broker.url("panio-worker", PASSWORDS["panio_redis_worker_password"]))
    assert r.ping()
    r.set("panio:probe", "1")  # its own key space works
    for refused in (lambda: r.flushall(), lambda: r.config_get("*"), lambda: r.keys("*"), lambda: r.acl_list(),
                    lambda: r.set("other:key", "x"), lambda: r.get("other:key"), lambda: r.publish("other", "x"),
                    lambda: r.execute_command("SHUTDOWN"), lambda: r.execute_command("MONITOR"),
                    lambda: r.execute_command("CLIENT", "KILL", "ID", "1"), lambda: r.execute_command("CLIENT", "LIST")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()
    with pytest.raises(redis.exceptions.NoPermissionError, match="'eval' command"):  # no Lua of its own at all
        r.eval("return redis.call('set', KEYS[1], 'x')", 1, "elsewhere")


def test_the_workers_user_cannot_flush_load_or_delete_redis_functions(broker):
    """Issue 45: FUNCTION FLUSH, DELETE, LOAD and RESTORE are data commands (``@write``), not ``@dangerous``:
    the role names them apart, so a broker user cannot wipe or plant what another user's FCALL would run."""
    import redis

    r = redis.Redis.from_url(broker.url("panio-worker", PASSWORDS["panio_redis_worker_password"]))
    lib = "#!lua name=panio_probe\nredis.register_function('probe', function() return 1 end)"
    for argv in (("FUNCTION", "FLUSH"), ("FUNCTION", "FLUSH", "SYNC"), ("FUNCTION", "DELETE", "panio_probe"),
                 ("FUNCTION", "LOAD", lib), ("FUNCTION", "RESTORE", b"x"), ("FUNCTION", "DUMP")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.execute_command(*argv)
    with pytest.raises(redis.exceptions.ResponseError, match="Function not found"):  # FCALL: panio's functions only
        r.execute_command("FCALL", "probe", "0")
    assert r.ping() and r.set("panio:probe", "2")  # its data commands still work


def test_doctor_warns_about_a_broker_anyone_can_use(panio):
    panio("init")
    panio.env.update({"PANIO_BROKER": SHARED_REDIS})
    rows = {r["item"]: r for r in panio("doctor", "--json").json()["broker"]}
    assert rows["auth"]["status"] == "warning" and "no credentials" in rows["auth"]["detail"]
    assert rows["signing"]["status"] == "warning"
    r = panio("doctor")  # warnings do not fail the doctor
    assert "WARNING  broker   auth" in r.out
    panio.env["PANIO_BROKER"] = "redis://:secret@ctl.lab.invalid:6379/0"
    rows = {r["item"]: r for r in panio("doctor", "--json", timeout=60).json()["broker"]}
    assert rows["tls"]["status"] == "warning" and rows["auth"]["status"] == "unchecked"


def test_task_events_reach_a_monitor_through_the_acl(workers, monkeypatch):
    """What Flower reads: a worker started with --events publishes its task events, the controller's user
    subscribes to them."""
    import threading

    import keyhelp
    from bench_agent.jobs.worker import OP_TASK, make_app, op_message, queue_name

    workers.start("h2", "--events")
    for name, value in keyhelp.controller_env().items():
        monkeypatch.setenv(name, value)
    app = make_app(workers.env["PANIO_BROKER"], workers.env["PANIO_REDIS_PREFIX"])
    got: list[dict] = []

    def monitor() -> None:
        def seen(event: dict) -> None:
            if event["type"] == "task-succeeded":
                got.append(event)
                receiver.should_stop = True

        with app.connection_for_read() as conn:
            receiver = app.events.Receiver(conn, handlers={"*": seen})
            receiver.capture(limit=None, timeout=60)

    watching = threading.Thread(target=monitor, daemon=True)
    watching.start()

    def a_ping_is_seen() -> bool:
        # the monitor subscribes in its own time (seconds on a loaded machine): an event published before
        # that is gone, so ping until one is seen
        reply = app.send_task(OP_TASK, args=op_message("system.ping", {"payload": 7}, 30, "h2"),
                              queue=queue_name("h2")).get(timeout=30)
        assert reply == {"ok": True, "result": {"pong": 7}}
        watching.join(timeout=2)
        return bool(got)

    wait_for(a_ping_is_seen, timeout_s=90, every_s=0)
    assert got and got[0]["hostname"].startswith("h2."), got


# --- the role itself, run by ansible-playbook over a real OpenSSH server -------------------------------

BIN = Path(sys.executable).parent
ANSIBLE_PLAYBOOK = shutil.which("ansible-playbook", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
PLAYBOOK = "- name: panio's Redis role\n  hosts: controller\n  gather_facts: true\n  roles:\n    - role: redis\n"


def _load_functions(port: int, tls: dict) -> None:
    """The role's library file loaded as its task does (``redis-cli --user panio-controller -x FUNCTION LOAD``)."""
    env = {**os.environ, "REDISCLI_AUTH": PASSWORDS["panio_redis_controller_password"]}
    out = subprocess.run(["redis-cli", "--user", "panio-controller", "--no-auth-warning", "-h", "127.0.0.1", "--tls",
                          "--cacert", str(tls["ca"]), "-p", str(port), "-x", "FUNCTION", "LOAD", "REPLACE"],
                         input=(ROLE / "files" / "panio_v1.lua").read_text(), env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "panio_v1", out.stdout + out.stderr


@pytest.fixture
def provisioned(tmp_path):
    """ansible/roles/redis applied to this machine by ansible-playbook through sshd on loopback, into a scratch
    directory (its own redis.conf, ACL file and TLS port; the system's Redis and /etc/redis untouched), then
    that redis-server started the way the role left it."""
    scratch, port = tmp_path / "redis", free_port()
    scratch.mkdir()
    main_conf = scratch / "redis.conf"  # Debian's redis.conf, as far as the role cares: panio's is included last
    main_conf.write_text(f"dir {scratch}\nsave \"\"\nlogfile {scratch / 'redis.log'}\n")
    tls = tls_files(scratch / "tls")
    sshd = Sshd(tmp_path / "sshd", tmp_path / "ops")  # the operator's key and home (not the panio fixture's)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {sshd.host_pub}")
    variables = {**PASSWORDS, "panio_redis_bind": "127.0.0.1", "panio_redis_tls_port": port, "panio_redis_hosts": HOSTS,
                 "panio_redis_acl_file": str(scratch / "users.acl"), "panio_redis_conf": str(scratch / "panio.conf"),
                 "panio_redis_main_conf": str(main_conf), "panio_redis_tls_cert": str(tls["cert"]),
                 "panio_redis_tls_key": str(tls["key"]), "panio_redis_tls_ca": str(tls["ca"])}
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    (tmp_path / "inventory.ini").write_text(
        f"[controller]\nctl ansible_host=127.0.0.1 ansible_port={sshd.port} ansible_user={sshd.user} "
        f"ansible_ssh_private_key_file={tmp_path / 'ops' / '.ssh' / 'id_ed25519'} ansible_become_method=su "
        f"ansible_python_interpreter=/usr/bin/python3 "
        f"ansible_ssh_common_args='-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes'\n")
    (tmp_path / "redis.yml").write_text(PLAYBOOK)
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROLE.parent), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "atmp"),
           "ANSIBLE_REMOTE_TEMP": str(tmp_path / "rtmp"), "ANSIBLE_NOCOLOR": "1", "HOME": str(tmp_path / "ops"),
           # no SSH master left behind (its socket path would also be too long under pytest's tmp_path)
           "ANSIBLE_SSH_ARGS": "-o ControlMaster=no", "ANSIBLE_PIPELINING": "1"}
    argv = [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.ini"), "-e", f"@{tmp_path / 'vars.json'}",
            str(tmp_path / "redis.yml")]
    server, system = None, Path("/etc/redis/redis.conf")
    before = system.read_bytes() if system.exists() else None
    try:
        first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        assert (system.read_bytes() if system.exists() else None) == before, "the role touched the system's Redis"
        assert first.returncode == 0, first.stdout + first.stderr
        again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout  # a second run changes nothing
        assert main_conf.read_text().splitlines()[-1] == f"include {scratch / 'panio.conf'}"
        assert (scratch / "users.acl").stat().st_mode & 0o777 == 0o600
        server = subprocess.Popen([REDIS, str(main_conf)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for(lambda: "Ready to accept connections" in _read(scratch / "redis.log") or server.poll() is not None,
                 timeout_s=30)
        assert server.poll() is None, _read(scratch / "redis.log")
        _load_functions(port, tls)  # what the role's "Load panio's Redis functions" does under systemd only
        yield _Provisioned(port, tls, first.stdout)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        sshd.stop()


class _Provisioned(LockedRedis):
    """The server the role configured (``LockedRedis``'s URLs, its port and CA)."""

    def __init__(self, port: int, tls: dict, log: str) -> None:
        self.port, self.tls, self.log = port, tls, log


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


@pytest.mark.skipif(ANSIBLE_PLAYBOOK is None, reason="ansible-playbook not installed (pip install -e '.[test]')")
def test_the_ansible_role_run_end_to_end_gives_a_broker_for_workers_and_the_controller_only(provisioned, panio,
                                                                                            tmp_path):
    import redis

    assert "failed=0" in provisioned.log and "unreachable=0" in provisioned.log
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(provisioned.url(None)).ping()  # no credentials: the default user is off
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(provisioned.url("panio-controller", "not-the-password")).ping()
    assert not answers(provisioned.port)  # plain text to the TLS port gets nothing
    workers = Workers(tmp_path / "w", provisioned.url("panio-controller", PASSWORDS["panio_redis_controller_password"]),
                      worker_broker=provisioned.url("panio-worker", PASSWORDS["panio_redis_worker_password"]),
                      PANIO_REDIS_PREFIX="panio:")
    (tmp_path / "w").mkdir()
    try:
        use_lab(panio, workers)
        panio("host", "add", "h1", "--ssh", "ops@h1.invalid")
        panio("target", "add", "t1", "--host", "h1")
        panio("action", "add", "hi", "-t", "t1", "--command", f"touch {tmp_path / 'hi'}")
        worker = workers.start("h1")  # the worker's user: it takes the job, leases the target, reports
        r = panio("job", "run", job_file(tmp_path, QUICK), "--target", "t1")  # the controller's user queues it
        assert "complete, passed" in r.out and (tmp_path / "hi").exists()
        assert "NOPERM" not in worker.log.read_text() and "NoPermission" not in worker.log.read_text()
    finally:
        workers.stop_all()
    # a control host's own user, as the role wrote it: its own lease keys, not the lab's queues
    host = redis.Redis.from_url(provisioned.url("panio-host-hx", HOSTS["hx"]["password"]))
    assert host.hgetall("panio:lease:t1") == {} and host.xadd("panio:reports:hx", {"body": "{}"})
    with pytest.raises(redis.exceptions.NoPermissionError):
        host.lrange("panio:celery:host.h1", 0, -1)
