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
