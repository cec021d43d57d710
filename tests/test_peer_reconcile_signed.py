"""Issue 45, hole 2: writing the results database alone does not make a host run a job.

A real `panio worker` on the real Redis, with message signing on. Rows are written straight into the results
database, as whoever holds its URL could: a queued job for the host's target with no broker message at all, and
rows whose kept message is signed by a key nobody trusts, is not signed, or is the controller's message of another
job. The worker's reconciler finds each one's message "vanished" and refuses it: nothing runs (the target's power
hook, which counts its cycles, is not called), each row ends refused, each refusal is in the worker's log. A job the
controller queued whose broker message really vanished is still sent again, as the controller signed it, and runs
once.
"""

from __future__ import annotations

import os

import pytest

import keyhelp
from jobhelp import job_file, wait_for
from peerhelp import SHARED_REDIS, Workers, drop_keys, worker_lab

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server not installed")


@pytest.fixture
def host(tmp_path):
    workers = Workers(tmp_path / "peers", SHARED_REDIS)
    workers.root.mkdir()
    yield workers
    workers.stop_all()
    drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])


def sealed_by(env: dict[str, str] | None, payload: dict, host: Workers, monkeypatch, tmp_path) -> str:
    """``payload``'s message as a process with ``env``'s keys (None: none, unsigned) would seal it."""
    from bench_agent.jobs import sealed, signing
    from bench_agent.jobs.worker import make_app

    for name in (signing.KEY_ENV, signing.CERT_ENV, signing.STORE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PANIO_STATE_DIR", str(tmp_path / "no-keys"))
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    app = make_app(SHARED_REDIS, host.env["PANIO_REDIS_PREFIX"], insecure=env is None)
    return sealed.seal(app, payload)


def test_a_row_written_into_the_results_database_runs_nothing_and_a_lost_job_still_runs_once(
        panio, host, tmp_path, monkeypatch):
    import redis

    cycles = tmp_path / "cycles"
    worker_lab(panio, host)
    panio("power", "set", "-t", "t1", "--cycle-cmd", f"sh -c 'echo cycled >> {cycles}'")
    body = "[[steps]]\nrun = 'power-cycle ${target}'\n"
    genuine = panio("job", "submit", job_file(tmp_path, body), "--target", "t1", "--json").json()["job_id"]
    # Redis loses the queued message (no worker yet): only the results database still says the job is queued
    r = redis.Redis.from_url(SHARED_REDIS)
    assert r.delete(f"{host.env['PANIO_REDIS_PREFIX']}celery:host.h1") == 1

    store = host.store()
    spec = store.job(genuine)["spec"]
    forged = {why: store.create_job("forged", "t1", "h1", spec)
              for why in ("no message", "untrusted key", "unsigned", "another job's message")}
    intruder = keyhelp.pair("intruder-db")  # a key pair of its own: no host trusts it
    store.keep_messages([
        (forged["untrusted key"],
         sealed_by(intruder, {**spec, "job_id": forged["untrusted key"]}, host, monkeypatch, tmp_path)),
        (forged["unsigned"], sealed_by(None, {**spec, "job_id": forged["unsigned"]}, host, monkeypatch, tmp_path)),
        (forged["another job's message"], store.message(genuine)),  # the controller's own, for job `genuine`
    ])

    worker = host.start("h1")
    done = wait_for(lambda: all(store.job(i)["state"] == "done" for i in (genuine, *forged.values()))
                    and [store.job(i) for i in (genuine, *forged.values())], timeout_s=90, every_s=0.2)
    ran, *refused = done
    assert (ran["health"], ran["result"]) == ("complete", "passed"), ran
    assert cycles.read_text().splitlines() == ["cycled"], "a job ran that the controller did not queue"
    log = worker.log.read_text()
    assert f"job {genuine}: its broker message vanished" in log and "sent again" in log
    for job, why in zip(refused, forged):
        assert (job["health"], job["error"]["error"], job["steps"]) == ("incomplete", "refused", []), (why, job)
        assert f"job {job['id']}: refused to send it again" in log, why
    for job_id, text in ((forged["no message"], "no message signed by the controller"),
                         (forged["untrusted key"], "Unknown certificate"),
                         (forged["unsigned"], "not signed"),
                         (forged["another job's message"], f"is job {genuine}'s")):
        assert text in store.job(job_id)["reason"], (text, store.job(job_id)["reason"])


def test_the_controllers_reconciler_sends_again_only_what_its_own_key_signed_and_byte_for_byte(
        panio, host, tmp_path, monkeypatch):
    """The controller trusts every worker's certificate (their replies): a row whose kept message a worker's key
    signed is still refused by the controller's reconciler, and nothing reaches the host's queue. A job it queued
    whose message vanished is published again as it was kept, byte for byte, under a new task id."""
    import base64
    import json

    import redis

    from controller import backends
    from controller.jobs import remote

    worker_lab(panio, host, "h9", ("t9",))  # no worker serves h9: what reaches its queue stays there to be read
    body = "[[steps]]\nrun = 'ping ${target} --count 1'\n"
    genuine = panio("job", "submit", job_file(tmp_path, body), "--target", "t9", "--json").json()["job_id"]
    r = redis.Redis.from_url(SHARED_REDIS)
    queue = f"{host.env['PANIO_REDIS_PREFIX']}celery:host.h9"
    assert r.delete(queue) == 1  # its message vanished

    store = host.store()
    spec = store.job(genuine)["spec"]
    forged = store.create_job("forged", "t9", "h9", spec)
    store.keep_messages([(forged, sealed_by(keyhelp.worker_env(), {**spec, "job_id": forged}, host, monkeypatch,
                                            tmp_path))])
    for name, value in host.env.items():  # this process is the controller now
        monkeypatch.setenv(name, value)
    rec = remote.reconciler(backends.celery_app())
    wait_for(lambda: rec.pass_() or (store.job(forged)["state"] == "done" and r.llen(queue) > 0), timeout_s=30,
             every_s=0.2)

    assert (store.job(forged)["health"], store.job(forged)["error"]["error"]) == ("incomplete", "refused")
    assert "not signed by this process's own key" in store.job(forged)["reason"]
    assert store.job(genuine)["state"] == "queued"
    [sent] = [json.loads(m) for m in r.lrange(queue, 0, -1)]  # the genuine job's, and nothing of the forged row
    assert sent["headers"]["id"].startswith(f"panio-job-{genuine}-again-")
    assert sent["content-type"] == "application/data"
    assert base64.b64decode(sent["body"]).decode() == json.loads(store.message(genuine))["body"]
