"""Issue 38, item 2: `panio setup --host` makes the host's own broker user and installs it (a real redis-server).

With keys per host (``PANIO_BROKER_PER_HOST=1``), setup gives the host's worker a Redis user of its own
(``panio-host-NAME``, a random password kept 0600 on the controller and in the host's worker.env only) and,
with the redis role's ``panio-admin`` (``--broker-admin``), installs it in the running Redis at once: its own
targets' leases and reports, nothing of another host's. The rules are the role's: what setup installs is the line
``ansible-playbook ansible/controller.yml -e @STATE/setup/redis-hosts.json`` writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from peerhelp import REDIS
from brokerhelp import PASSWORDS, LockedRedis, render

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed")
ADMIN = "admin-secret-0123456789"


@pytest.fixture
def broker(tmp_path):
    redis = LockedRedis(tmp_path / "redis", panio_redis_admin_password=ADMIN)
    yield redis
    redis.stop()


@pytest.fixture
def lab(panio, broker):
    panio("init")
    for host, target in (("ha", "ta"), ("hb", "tb")):
        panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
        panio("target", "add", target, "--host", host)
    panio.env.update({"PANIO_BROKER_PER_HOST": "1", "PANIO_REDIS_PREFIX": "panio:",
                      "PANIO_BROKER": broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"])})
    return panio


def users_file(panio) -> Path:
    return Path(panio.env["PANIO_STATE_DIR"]) / "setup" / "redis-hosts.json"


def test_setup_gives_the_worker_its_own_user_kept_on_the_controller_only(lab, broker):
    worker_url = broker.url("panio-worker", "not-used")  # the broker as the host reaches it: the user is replaced
    inventory = json.loads(lab("setup", "--host", "ha", "--broker", worker_url, "--inventory", "--json").out)
    play = inventory["all"]["vars"]
    kept = json.loads(users_file(lab).read_text())["panio_redis_hosts"]
    assert oct(users_file(lab).stat().st_mode & 0o777) == "0o600"
    assert kept["ha"]["targets"] == ["ta"] and len(kept["ha"]["password"]) >= 16
    assert play["panio_broker_url"].startswith(f"rediss://panio-host-ha:{kept['ha']['password']}@127.0.0.1:")
    assert play["panio_broker_per_host"] is True and "not-used" not in json.dumps(inventory)
    again = json.loads(lab("setup", "--host", "ha", "--broker", worker_url, "--inventory", "--json").out)
    assert again["all"]["vars"]["panio_broker_url"] == play["panio_broker_url"]  # made once, kept
    import redis

    with pytest.raises(redis.exceptions.AuthenticationError):  # --inventory only prints: nothing installed yet
        redis.Redis.from_url(broker.url("panio-host-ha", kept["ha"]["password"])).ping()


def test_the_admin_user_installs_the_hosts_user_as_the_role_writes_it(lab, broker, monkeypatch):
    import redis

    from controller.provision import broker_users

    lab("setup", "--host", "ha", "--broker", broker.url("x", "y"), "--inventory", "--json")
    entry = json.loads(users_file(lab).read_text())["panio_redis_hosts"]["ha"]
    broker_users.install(broker.url("panio-admin", ADMIN), "ha", entry, "panio:", 0)
    a = redis.Redis.from_url(broker.url("panio-host-ha", entry["password"]))
    assert a.hgetall("panio:lease:ta") == {} and a.xadd("panio:reports:ha", {"body": "{}"})
    for refused in (lambda: a.hgetall("panio:lease:tb"), lambda: a.xadd("panio:reports:hb", {"body": "{}"}),
                    lambda: a.lpop("panio:h.hb:celery:host.hb"), lambda: a.lpop("panio:celery:host.hb")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()
    assert "user panio-host-ha on" in (broker.root / "users.acl").read_text()  # ACL SAVE: it outlives a restart
    # the job ids the recorder gives its health checks: its own to read, not to write; another host's not at all
    assert a.get("panio:check:ha:1") is None
    for refused in (lambda: a.set("panio:check:ha:1", 7), lambda: a.get("panio:check:hb:1")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()

    # the same rules as the role's file made from setup's record
    role = render("panio-users.acl.j2", {**PASSWORDS, **json.loads(users_file(lab).read_text())})
    line = next(x for x in role.splitlines() if x.startswith("user panio-host-ha "))
    assert line.split(" ", 4)[4] == broker_users.rules("ha", ["ta"], "panio:", 0)

    # a target moved to ha: the next setup installs it in ha's rules
    lab("target", "set", "tb", "--host", "ha")
    lab("setup", "--host", "ha", "--broker", broker.url("x", "y"), "--inventory", "--json")
    entry = json.loads(users_file(lab).read_text())["panio_redis_hosts"]["ha"]
    assert entry["targets"] == ["ta", "tb"]
    broker_users.install(broker.url("panio-admin", ADMIN), "ha", entry, "panio:", 0)
    assert a.hgetall("panio:lease:tb") == {}


def test_a_wrong_admin_password_is_one_clear_error(lab, broker):
    r = lab.fails("setup", "--host", "ha", "--broker", broker.url("x", "y"),
                  "--broker-admin", broker.url("panio-admin", "wrong-password"), code=3)
    assert "could not install Redis user panio-host-ha" in r.err and "wrong-password" not in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 2


def test_a_host_set_up_by_panio_reports_and_never_holds_the_results_url(lab, broker):
    """Issue 38: setup used to copy PANIO_RESULTS_URL (write access to every host's jobs and health) into the host's
    worker environment when the operator's shell had it. Now the host gets its broker user and its own key only."""
    import jinja2

    secret = "postgresql://panio:db-secret-42@ctl.lab/panio"
    lab.env["PANIO_RESULTS_URL"] = secret
    inventory = lab("setup", "--host", "ha", "--broker", broker.url("x", "y"), "--inventory", "--json").out
    assert "db-secret-42" not in inventory and "panio_results_url" not in inventory
    play = json.loads(inventory)["all"]["vars"]
    # the worker's environment file as the role writes it, even from an inventory that names a results URL
    worker = Path(__file__).resolve().parent.parent / "ansible" / "roles" / "worker" / "templates"
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True,
                             loader=jinja2.FileSystemLoader(worker))
    text = env.get_template("worker.env.j2").render({**play, "panio_results_url": secret, "panio_keys_env": {}})
    assert "PANIO_RESULTS_URL" not in text and "db-secret-42" not in text
    assert "PANIO_BROKER=rediss://panio-host-ha:" in text and "PANIO_BROKER_PER_HOST=1" in text
    r = lab.fails("setup", "--host", "ha", "--results-url", "sqlite:///x.db", "--inventory", code=2)  # no such door
    assert "--results-url" in r.err and "Traceback" not in r.err
