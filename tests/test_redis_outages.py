"""Issue 43: Redis away (a private redis-server stopped and started again, its data kept with AOF) as a job's
lease, a health check, the scheduler and the dashboard see it."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid

import pytest

from jobhelp import job_file, wait_for
from peerhelp import REDIS, PrivateRedis

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed (scripts/system-deps.sh)")


@pytest.fixture
def aof_redis(tmp_path):
    redis = PrivateRedis(tmp_path, aof=True)
    redis.start()
    yield redis
    redis.stop()


def _in_thread(func) -> tuple[threading.Thread, dict]:
    """``func()`` in a thread of its own; what it returned (``value``) or raised (``error``), and when (``at``)."""
    got: dict = {}

    def run() -> None:
        try:
            got["value"] = func()
        except Exception as exc:  # noqa: BLE001 - handed to the test, which asserts on it
            got["error"] = exc
        got["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_a_steps_lease_check_waits_for_redis_for_as_long_as_the_lease_may_hold(aof_redis, tmp_path, monkeypatch,
                                                                               caplog):
    """A job's side effect whose lease the host cannot check because Redis is away waits for Redis (one line when
    it goes, one when it is back) and is then done, once; before, it failed after 3 s and the job ended
    incomplete. It waits only as long as the lease's TTL (from its last renewal) may still hold it, then the lease
    is lost; a broken lease is refused at once."""
    from bench_agent.jobs.runner import local_caller
    from bench_agent.leases import base as leases
    from bench_agent.leases.fences import FenceStore
    from bench_agent.leases.redis_store import RETRY_S, RedisLeaseStore

    prefix, results = f"t{uuid.uuid4().hex[:8]}:", f"sqlite:///{tmp_path / 'results.db'}"
    monkeypatch.setenv("PANIO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PANIO_REDIS_URL", aof_redis.url)  # the store the host's lease guard checks
    monkeypatch.setenv("PANIO_REDIS_PREFIX", prefix)
    store = RedisLeaseStore(aof_redis.url, prefix, fences=FenceStore(results))
    marks = tmp_path / "marks"
    mark = {"target": "t1", "name": "mark", "command": f"sh -c 'echo x >> {marks}'"}
    caplog.set_level(logging.WARNING, logger="panio.worker")

    def step(ttl_s: float):
        lease = leases.acquire(store, "t1", {"holder": "test"}, ttl_s=ttl_s, wait_s=5)
        lease.keep(ttl_s)
        call = local_caller("t1", leases.Presented(lease), store)
        assert call("action.run", mark)["exit"] == 0
        return lease, call

    lease, call = step(ttl_s=15.0)  # renewed every 5 s: the store holds it at least 10 s after Redis goes
    aof_redis.stop()
    thread, got = _in_thread(lambda: call("action.run", mark))
    # the guard's check gave up on Redis (after RETRY_S: the old code's failure) and the call waits for it
    wait_for(lambda: not thread.is_alive() or "lease store: Redis unreachable since" in caplog.text, timeout_s=30)
    assert thread.is_alive(), got
    aof_redis.start()
    thread.join(timeout=30)
    assert "error" not in got, got.get("error")
    assert got["value"]["exit"] == 0 and marks.read_text() == "x\nx\n"  # done once, after Redis came back
    said = [r.getMessage() for r in caplog.records]
    assert sum("lease store: Redis unreachable since" in m for m in said) == 1, said
    assert sum("lease store: Redis back after" in m for m in said) == 1, said
    assert not lease.lost

    store.break_("t1", "operator@desk")  # broken: refused at once, nothing done
    started = time.monotonic()
    with pytest.raises(leases.Refused, match="lease lost"):
        call("action.run", mark)
    assert time.monotonic() - started < RETRY_S and marks.read_text() == "x\nx\n"
    lease.release()

    lease, call = step(ttl_s=5.0)  # Redis away for longer than the lease may hold: lost once its TTL ran out
    aof_redis.stop()
    may_hold_s = lease.held_for_s()
    started = time.monotonic()
    with pytest.raises(leases.Refused, match="lost: its store stayed out of reach") as lost:
        call("action.run", mark)
    waited_s = time.monotonic() - started
    # said lost as the TTL runs out, not late: a guard's check of a request naming no lab reads two keys, each
    # retried for RETRY_S, and a try begun just before the TTL's end said it up to ~6 s after (each try now
    # gives up at the wait's end: ``leases.base.gives_up``)
    assert may_hold_s - 0.5 <= waited_s <= may_hold_s + 1.0, (may_hold_s, waited_s, lost.value)
    assert lease.lost and marks.read_text() == "x\nx\nx\n"
    assert any("the lease on 't1'" in r.getMessage() and "is lost" in r.getMessage() for r in caplog.records)
    aof_redis.start()
    assert store.current("t1") is None  # Redis kept the lease's TTL: it had expired, as the runner said
    with pytest.raises(leases.Refused):
        lease.check()


CHECK = "name = 't1-health'\n[[steps]]\nname = 'probe'\nrun = 'panio action run ${target} probe'\n"


def _health_lab(panio, workers, tmp_path) -> None:
    """t1 on h1 with a health check, and a power state hook that waits for the test's ``go`` file: the gate asks
    the lab (``hold_for_lab``) just before a health check would start, so the test can stop Redis right there."""
    from peerhelp import worker_lab

    worker_lab(panio, workers)
    state = tmp_path / "state.sh"
    state.write_text(f"#!/bin/sh\ntouch {tmp_path}/asked\nwhile [ ! -e {tmp_path}/go ]; do sleep 0.05; done\necho on\n")
    state.chmod(0o755)
    panio("power", "set", "-t", "t1", "--state-cmd", str(state))
    panio("action", "add", "probe", "-t", "t1", "--command", "true")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "t1.toml").write_text(CHECK)
    with workers.lab.open("a") as f:
        f.write('\n[targets.t1.health_check]\njob = "checks/t1.toml"\n')


def _checks(store) -> list[dict]:
    return [j for j in store.list_jobs(limit=100) if j["name"] == "t1-health"]


def test_a_health_check_waits_for_redis_before_it_starts_and_never_judges_the_board_for_it(panio, tmp_path):
    """Redis away at the instant a health check would start (the gate had just asked the lab): the check is not
    made until Redis answers, then runs and passes; Redis away for longer than the job's lease may hold: the check
    never starts, the job ends incomplete (skipped) saying the lab's Redis did not answer, and the board is not
    judged (before: the check ran, lost its lease and marked the healthy board bad)."""
    from peerhelp import Workers

    redis = PrivateRedis(tmp_path, aof=True)
    redis.start()
    workers = Workers(tmp_path, redis.url)
    go, asked = tmp_path / "go", tmp_path / "asked"
    try:
        _health_lab(panio, workers, tmp_path)
        workers.start("h1")
        store = workers.store()

        def submit(ttl_s: int, name: str) -> int:
            body = f"lease_ttl_s = {ttl_s}\n[[steps]]\nrun = 'ping ${{target}} --count 1'\n"
            go.unlink(missing_ok=True)
            asked.unlink(missing_ok=True)
            job_id = panio("job", "submit", job_file(tmp_path, body, name), "--target", "t1", "--json").json()["job_id"]
            wait_for(asked.exists, timeout_s=60)  # the gate asks the lab before the check: Redis goes now
            redis.stop()
            go.touch()
            return job_id

        job_id = submit(30, "held.toml")  # renewed every 10 s: Redis may hold the lease 20 s after it goes
        wait_for(lambda: workers.logs().count("lease store: Redis unreachable since") == 1, timeout_s=60)
        assert _checks(store) == [], _checks(store)  # no check made while Redis is away
        redis.start()
        done = wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=90)
        assert (done["health"], done["result"]) == ("complete", "passed"), done["reason"]
        assert [(c["health"], c["result"]) for c in _checks(store)] == [("complete", "passed")]
        assert panio("target", "health", "t1", "--json").json()["health"] == "good"
        assert "lease store: Redis back after" in workers.logs()

        panio("target", "health", "t1", "--set", "unknown", "--reason", "a check is due again", "--no-check")
        job_id = submit(4, "lost.toml")  # Redis away for longer than its lease (4 s) may hold
        done = wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=90)
        assert (done["health"], done["result"]) == ("incomplete", "skipped"), (done["reason"], workers.logs()[-3000:])
        assert "health check did not start: the lab's Redis did not answer" in done["reason"], done["reason"]
        assert len(_checks(store)) == 1  # none made
        assert panio("target", "health", "t1", "--json").json()["health"] == "unknown"  # not judged
        assert "is lost: its store stayed out of reach" in workers.logs()
        redis.start()
        job_id = panio("job", "submit", job_file(tmp_path, "[[steps]]\nrun = 'ping ${target}'\n", "after.toml"),
                       "--target", "t1", "--json").json()["job_id"]
        done = wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=90)
        assert (done["health"], done["result"]) == ("complete", "passed"), done["reason"]
        assert panio("target", "health", "t1", "--json").json()["health"] == "good"  # checked once Redis is back
        assert all(p.poll() is None for p in workers.procs)
    finally:
        go.touch()
        workers.stop_all()
        redis.stop()


PAGES = ("/", "/queue", "/jobs", "/targets/t1", "/schedules", "/api/v1/jobs", "/api/v1/leases", "/api/v1/schedules")


def _since(text: str, what: str) -> float:
    """Seconds since ``what unreachable since HH:MM:SS`` was said in ``text`` (0 before)."""
    import re

    m = re.search(what + r" unreachable since (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text)
    return time.time() - time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) if m else 0.0


def test_the_scheduler_and_the_dashboard_ride_out_redis_away(panio, tmp_path):
    """The Redis that `panio schedule serve` and `panio dashboard` use stopped for longer than their timeouts (the
    scheduler lease's 15 s TTL, a Redis call's 3 s, the sockets' 5 s) and started again: both stay up, each says
    it once when Redis goes and once when it is back, the dashboard answers 503 "... unreachable since ..." or
    what it can (never a 500), and the schedule fires again by itself, its jobs run by the worker."""
    import subprocess

    from conftest import PANIO
    from dashhelp import Client, DashboardProc
    from jobhelp import stop
    from peerhelp import Workers, worker_lab

    redis = PrivateRedis(tmp_path, aof=True)
    redis.start()
    workers = Workers(tmp_path, redis.url, PANIO_DASHBOARD_TOKEN="t" * 32)
    bearer = {"Authorization": f"Bearer {'t' * 32}"}
    serve = dash = None
    try:
        worker_lab(panio, workers)
        workers.start("h1")
        job_file(tmp_path, "[[steps]]\nrun = 'ping ${target} --count 1'\n", "quick.toml")
        suite = job_file(tmp_path, "targets = ['t1']\njobs = ['quick.toml']\n", "suite.toml")
        panio("schedule", "add", "often", "--suite", suite, "--every", "2s")
        log = tmp_path / "serve.log"
        serve = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=open(log, "w"),
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        dash = DashboardProc(panio.env, tmp_path / "dash.log")
        web = Client(dash.url)
        store = workers.store()
        wait_for(lambda: any(j["state"] == "done" for j in store.list_jobs(limit=5)) or serve.poll() is not None,
                 timeout_s=90)
        for path in PAGES:
            assert web.get(path, **bearer)[0] == 200, path

        redis.stop()
        seen: set[int] = set()

        def looked() -> bool:  # every page, while Redis is away: an answer, never a 500
            for path in PAGES:
                status, _, body = web.get(path, **bearer)
                assert status in (200, 503), (path, status, body[:2000])
                if status == 503:
                    assert "Redis unreachable since" in body, (path, body[:500])
                seen.add(status)
            return True

        # away for longer than the scheduler lease's TTL (15 s): both processes stay up, said once
        wait_for(lambda: looked() and (serve.poll() is not None or _since(log.read_text(), "Redis") >= 17),
                 timeout_s=90, every_s=1.0)
        assert serve.poll() is None and dash.proc.poll() is None, log.read_text()[-3000:]
        assert 503 in seen
        assert log.read_text().count("Redis unreachable since") == 1, log.read_text()[-3000:]
        assert (tmp_path / "dash.log").read_text().count("Redis unreachable since") == 1

        redis.start()
        fired = len(store.list_jobs(limit=1000))
        wait_for(lambda: "Redis back after" in log.read_text() or serve.poll() is not None, timeout_s=90)
        # it fires again by itself, and the worker runs what it fired
        wait_for(lambda: [j for j in store.list_jobs(limit=1000)[:-fired or None] if j["state"] == "done"],
                 timeout_s=120)
        wait_for(lambda: all(web.get(path, **bearer)[0] == 200 for path in PAGES) and
                 "Redis back after" in (tmp_path / "dash.log").read_text(), timeout_s=60, every_s=0.5)
        assert (tmp_path / "dash.log").read_text().count("Redis back after") == 1
        assert serve.poll() is None and dash.proc.poll() is None
        for text in (log.read_text(), (tmp_path / "dash.log").read_text()):
            assert "Traceback" not in text, text[-3000:]
    finally:
        if serve is not None:
            stop(serve)
        if dash is not None:
            dash.stop()
        workers.stop_all()
        redis.stop()


def _use(pid: int) -> tuple[int, int, int]:
    """(RSS in KiB, threads, open file descriptors) of process ``pid`` (/proc)."""
    from pathlib import Path

    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]), int(status["Threads"]), len(os.listdir(f"/proc/{pid}/fd"))


def _open(pid: int) -> dict[str, int]:
    """What process ``pid`` holds open, by kind: socket, pipe, anon_inode, or the file's path."""
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = link.split(":", 1)[0] if ":[" in link else link
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def test_what_a_redis_restart_allocates_in_a_worker_is_given_back(panio, tmp_path):
    """Redis restarted 20 times under a worker that runs a job after each: no thread and no connection is left
    behind by a restart, and its memory (RSS) stays within a bound. Measured here: +1.3 MiB over 20 restarts
    with jobs (+45 KiB a restart, on over 40); with MALLOC_ARENA_MAX=1 +0.7 MiB (the rest: malloc's arenas);
    tracemalloc puts Python's own part at ~10 KiB a restart, Celery's and kombu's per-connection objects (a
    consumer's Request classes, timer entries), none of panio's."""
    from peerhelp import Workers, worker_lab

    redis = PrivateRedis(tmp_path, aof=True)
    redis.start()
    workers = Workers(tmp_path, redis.url)
    try:
        worker_lab(panio, workers)
        worker = workers.start("h1")
        store = workers.store()
        quick = job_file(tmp_path, "[[steps]]\nrun = 'ping ${target} --count 1'\n", "quick.toml")

        def restart() -> None:
            connects = worker.log.read_text().count("Connected to ")
            redis.restart(down_s=0.5)
            wait_for(lambda: worker.log.read_text().count("Connected to ") > connects or worker.poll() is not None,
                     timeout_s=90)
            job_id = panio("job", "submit", quick, "--target", "t1", "--json").json()["job_id"]
            done = wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=90)
            assert (done["health"], done["result"]) == ("complete", "passed"), done["reason"]

        for _ in range(5):  # warm: pools, clients, Celery's per-connection state
            restart()
        rss_kib, threads, fds = _use(worker.pid)
        before = _open(worker.pid)
        for _ in range(20):
            restart()
        grown_kib, threads_after, fds_after = _use(worker.pid)
        grown_kib -= rss_kib
        print(f"worker RSS {rss_kib} KiB -> +{grown_kib} KiB over 20 Redis restarts; threads {threads} -> "
              f"{threads_after}, fds {fds} -> {fds_after}")
        # A connection left behind by each restart would be 20 more; at any one moment a few may be in flight
        # (a pool's connection opened for the job just done, a reconnect's socket not yet closed): they close.
        try:
            wait_for(lambda: _use(worker.pid)[2] <= fds + 2, timeout_s=60)
        except AssertionError:
            raise AssertionError(f"fds {fds} -> {_use(worker.pid)[2]} 60 s after: {before} -> {_open(worker.pid)}")
        assert threads_after <= threads, (threads, threads_after)
        assert grown_kib < 6 * 1024, f"+{grown_kib} KiB over 20 Redis restarts"
        assert worker.poll() is None
    finally:
        workers.stop_all()
        redis.stop()
