"""Issue 43: the controller's processes ride out their own services away (real PostgreSQL, real Redis).

The results database is made unreachable for real (its own database: ``ALLOW_CONNECTIONS false`` and its
backends terminated): `panio schedule serve` stays up, says so once, and fires again once it is back, also when
it was started while the database was away; the dashboard's pages say "results database unreachable since ..."
(503, not 500) and its API answers 503 with that reason, then both serve again by themselves.
"""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from conftest import PANIO
from dashhelp import Client, DashboardProc
from jobhelp import fixture_lab, job_file, stop, wait_for
from outagehelp import AwayDatabase

QUICK = "name = 'quick'\n[[steps]]\nrun = 'ping ${target}'\nexpect_output = '${target} \\(local\\)'\n"
TOKEN = "t" * 32


@pytest.fixture
def away_db():
    db = AwayDatabase()
    yield db
    db.drop()


def _jobs(panio) -> int:
    return len(panio("job", "list", "--json", "--limit", "1000").json())


def _serve(panio, log):
    return subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def test_scheduler_and_dashboard_ride_out_the_results_database_away(panio, tmp_path, away_db):
    fixture_lab(panio)
    panio.env.update(PANIO_RESULTS_URL=away_db.url, PANIO_DASHBOARD_TOKEN=TOKEN)
    job_file(tmp_path, QUICK, "quick.toml")
    suite = job_file(tmp_path, "targets = ['pico']\njobs = ['quick.toml']\n", "suite.toml")
    panio("schedule", "add", "often", "--suite", suite, "--every", "1s")
    log = tmp_path / "serve.log"
    serve = _serve(panio, log)
    dash = DashboardProc(panio.env, tmp_path / "dash.log")
    web = Client(dash.url)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    try:
        wait_for(lambda: "schedule often: jobs" in log.read_text(), timeout_s=60)
        assert web.get("/", **bearer)[0] == 200

        away_db.away()
        wait_for(lambda: "results database unreachable since" in log.read_text() or serve.poll() is not None,
                 timeout_s=60)
        status, headers, body = web.get("/jobs", **bearer)
        assert status == 503 and "results database unreachable since" in body, (status, body[:500])
        assert headers.get("retry-after")
        status, _, body = web.get("/api/v1/jobs", **bearer)
        answer = json.loads(body)
        assert status == 503 and answer["error"] == "unreachable", (status, body)
        assert answer["message"].startswith("results database unreachable since"), answer
        # a one-shot command says which service is away (4), not "internal error" (70)
        assert "results database unreachable" in panio.fails("schedule", "list", code=4).err
        # away for longer than the scheduler's waits grow to (and its tick): it is still there, said once
        wait_for(lambda: log.read_text().count("results database unreachable since") == 1 and
                 "waiting for it" in log.read_text() and serve.poll() is None and
                 web.get("/", **bearer)[0] == 503 and _waited(log) >= 4, timeout_s=60)
        assert serve.poll() is None, log.read_text()

        away_db.back()
        wait_for(lambda: "results database back after" in log.read_text(), timeout_s=60)
        fired = _jobs(panio)
        wait_for(lambda: _jobs(panio) > fired, timeout_s=60)  # it fires again by itself
        wait_for(lambda: web.get("/jobs", **bearer)[0] == 200, timeout_s=30)
        assert "results database back after" in (tmp_path / "dash.log").read_text()
        assert serve.poll() is None
        assert "Traceback" not in log.read_text() and "Traceback" not in (tmp_path / "dash.log").read_text()

        # started while the database is away: it waits for it, then fires
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=60) == 0, log.read_text()
        away_db.away()
        log2 = tmp_path / "serve2.log"
        serve = _serve(panio, log2)
        wait_for(lambda: "results database unreachable since" in log2.read_text() or serve.poll() is not None,
                 timeout_s=60)
        assert serve.poll() is None, log2.read_text()
        away_db.back()
        wait_for(lambda: "schedule often: jobs" in log2.read_text() or serve.poll() is not None, timeout_s=90)
        assert serve.poll() is None and "Traceback" not in log2.read_text(), log2.read_text()
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=30)
        finally:
            stop(serve)
            dash.stop()


def _waited(log) -> float:
    """The seconds since the scheduler said the database went away (0 before it said so)."""
    return _waited_in(log.read_text())


LONG = ("lease_ttl_s = 2\n[[steps]]\nname = 'first'\nrun = 'ping ${target} --count 1'\n"
        "[[steps]]\nname = 'long'\nrun = 'ping ${target} --count 60 --interval 0.1'\n"
        "[[steps]]\nname = 'after'\nrun = 'ping ${target} --count 1'\n")


def test_a_worker_rides_out_the_results_database_away_mid_job(panio, tmp_path, away_db):
    """The database away while a job runs, for longer than a runner may stay silent: the job is not 'worker
    lost'; its runner keeps its lease, waits, records its steps and its verdict once the database is back."""
    import os

    from peerhelp import REDIS, PrivateRedis, Workers, use_lab

    if not os.path.exists(REDIS):
        pytest.skip("redis-server not installed (scripts/system-deps.sh)")
    redis = PrivateRedis(tmp_path)
    redis.start()
    workers = Workers(tmp_path, redis.url, PANIO_RESULTS_URL=away_db.url)
    try:
        use_lab(panio, workers)
        panio("host", "add", "h1", "--ssh", "ops@h1.invalid")
        panio("target", "add", "t1", "--host", "h1")
        workers.start("h1")
        job_id = panio("job", "submit", job_file(tmp_path, LONG, "long.toml"), "--target", "t1",
                       "--json").json()["job_id"]
        store = workers.store()
        wait_for(lambda: [s for s in store.job(job_id)["steps"] if s["name"] == "long" and s["status"] == "running"],
                 timeout_s=60)
        away_db.away()
        # away past the step's end (6 s) and three times a silent runner's bound (lease_ttl_s 2: 4 s)
        wait_for(lambda: "results database unreachable since" in workers.logs() and _waited_in(workers.logs()) >= 13,
                 timeout_s=60)
        away_db.back()
        done = wait_for(lambda: (j := _job(store, job_id)) and j["state"] == "done" and j, timeout_s=60)
        assert (done["health"], done["result"]) == ("complete", "passed"), done["reason"]
        assert [s["status"] for s in done["steps"]] == ["pass", "pass", "pass"]
        assert "results database back after" in workers.logs()
        assert all(p.poll() is None for p in workers.procs)
    finally:
        workers.stop_all()
        redis.stop()


def _job(store, job_id: int) -> dict | None:
    try:
        return store.job(job_id)
    except Exception:  # noqa: BLE001 - the test's own reads while the database comes back
        return None


def _waited_in(text: str) -> float:
    import re
    import time

    m = re.search(r"unreachable since (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text)
    return time.time() - time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) if m else 0.0


MANY = "".join(f"[[steps]]\nname = 's{i}'\nrun = 'ping ${{target}} --count 4 --interval 0.1'\n" for i in range(24))


def test_a_job_keeps_its_lease_across_a_redis_restart_that_kept_its_data(panio, tmp_path):
    """Redis restarted with AOF while a job runs (down longer than a Redis call retries): the job's lease is in
    Redis again after the restart, so the job goes on and passes; before, a step boundary inside the restart
    ended it 'lease lost'."""
    import os

    from peerhelp import REDIS, PrivateRedis, Workers, use_lab

    if not os.path.exists(REDIS):
        pytest.skip("redis-server not installed (scripts/system-deps.sh)")
    redis = PrivateRedis(tmp_path, aof=True)
    redis.start()
    workers = Workers(tmp_path, redis.url)
    try:
        use_lab(panio, workers)
        panio("host", "add", "h1", "--ssh", "ops@h1.invalid")
        panio("target", "add", "t1", "--host", "h1")
        workers.start("h1")
        job_id = panio("job", "submit", job_file(tmp_path, MANY, "many.toml"), "--target", "t1",
                       "--json").json()["job_id"]
        store = workers.store()
        wait_for(lambda: [s for s in store.job(job_id)["steps"] if s["name"] == "s2" and s["status"] == "pass"],
                 timeout_s=60)
        redis.restart(down_s=5.0)  # step boundaries fall inside it (each step: 0.3 s)
        done = wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=120)
        assert (done["health"], done["result"]) == ("complete", "passed"), done["reason"]
        assert "lease lost" not in workers.logs()
        assert "lease store: Redis" in workers.logs() and "back after" in workers.logs()
    finally:
        workers.stop_all()
        redis.stop()


def test_the_controllers_units_restart_what_dies(tmp_path):
    """ansible/roles/controller_services: the scheduler, the dashboard and the recorder as systemd units that
    `systemd-analyze verify` accepts, each restarted on failure."""
    import shutil
    from pathlib import Path

    import jinja2
    import yaml

    role = Path(__file__).resolve().parent.parent / "ansible" / "roles" / "controller_services"
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True)
    tasks = yaml.safe_load((role / "tasks" / "main.yml").read_text())
    units = next(t for t in tasks if "ansible.builtin.template" in t)["loop"]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os_panio = venv / "bin" / "panio"
    os_panio.write_text("#!/bin/sh\n")
    os_panio.chmod(0o755)
    values = {"panio_sudo": True, "panio_prefix": str(tmp_path), "panio_venv": str(venv),
              "panio_controller_env": str(tmp_path / "controller.env"), "panio_controller_lab": str(tmp_path / "lab.toml"),
              "panio_dashboard_port": 8080}
    assert {u["name"] for u in units} == set(yaml.safe_load((role / "defaults" / "main.yml").read_text())
                                             ["panio_controller_units"])
    for unit in units:
        command = env.from_string(unit["command"]).render(values)
        text = env.from_string((role / "templates" / "unit.service.j2").read_text()).render(
            {**values, "panio_unit_description": unit["description"], "panio_unit_command": command})
        assert "Restart=on-failure" in text and f"bin/panio {command}\n" in text
        path = tmp_path / f"{unit['name']}.service"
        path.write_text(text)
        if shutil.which("systemd-analyze"):
            verify = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True)
            assert unit["name"] not in verify.stderr, verify.stderr


def _rss_kib(pid: int) -> int:
    from pathlib import Path

    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def test_what_an_outage_allocates_is_given_back(panio, tmp_path, away_db):
    """The results database away and back 20 times while the dashboard is read: its memory (RSS, /proc) does not
    grow with each outage (the night saw +35 MiB/h of steps at each fault)."""
    fixture_lab(panio)
    panio.env.update(PANIO_RESULTS_URL=away_db.url, PANIO_DASHBOARD_TOKEN=TOKEN)
    panio("job", "run", job_file(tmp_path, QUICK, "quick.toml"), "--target", "pico")
    dash = DashboardProc(panio.env, tmp_path / "dash.log")
    web = Client(dash.url)
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    def outage() -> None:
        away_db.away()
        for path in ("/", "/jobs", "/api/v1/jobs", "/jobs/1"):
            assert web.get(path, **bearer)[0] == 503
        away_db.back()
        wait_for(lambda: web.get("/jobs", **bearer)[0] == 200, timeout_s=30)
        for path in ("/", "/api/v1/jobs", "/jobs/1"):
            assert web.get(path, **bearer)[0] == 200

    try:
        for _ in range(5):  # warm: caches, pools, templates
            outage()
        before = _rss_kib(dash.proc.pid)
        for _ in range(20):
            outage()
        grown_kib = _rss_kib(dash.proc.pid) - before
        print(f"dashboard RSS {before} KiB -> +{grown_kib} KiB over 20 outages")
        assert grown_kib < 6 * 1024, f"+{grown_kib} KiB over 20 outages"
        assert (tmp_path / "dash.log").read_text().count("results database unreachable since") == 25
    finally:
        dash.stop()
