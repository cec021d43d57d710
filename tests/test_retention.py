"""Retention (issue 17, friction 7): `panio job prune`, the lab's [retention], and per-job files cleaned up.

The results database grew ~8.7 KB a job with nothing to prune it; every job on
a worker left a lab-parse cache file behind; a killed worker left its per-job
lab files. Each is proven here against the real executable (and, for the
worker, a real `panio worker` on the real Redis).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import keyhelp
from conftest import PANIO
from jobhelp import job_file, wait_for

DAY_S = 86400


def _store(panio):
    from bench_agent.results.store import ResultStore

    return ResultStore(f"sqlite:///{panio.env['PANIO_STATE_DIR']}/results.db")


def _job(store, name: str, age_s: float, state: str = "done", artifact: str | None = "x" * 1000) -> int:
    """A job finished (or created, if not done) ``age_s`` ago, with one step and an artifact."""
    job_id = store.create_job(name, "pico", None, {"steps": []})
    store.record_step(job_id, 0, {"name": "s", "command": "panio ping pico", "status": "pass", "output": "ok"})
    if artifact:
        store.add_artifact(job_id, "serial-console.log", artifact)
    if state == "done":
        store.finish(job_id, "complete", "passed", "all steps passed")
    elif state == "running":
        store.claim(job_id, "worker elsewhere@host:1")
    with store.engine.begin() as c:
        c.execute(store.jobs.update().where(store.jobs.c.id == job_id)
                  .values(created_at=time.time() - age_s, finished_at=time.time() - age_s if state == "done" else None))
    return job_id


@pytest.fixture
def history(pico):
    store = _store(pico)
    ids = {"old": _job(store, "old", 40 * DAY_S), "older": _job(store, "older", 90 * DAY_S),
           "young": _job(store, "young", 2 * DAY_S), "old_running": _job(store, "stuck", 60 * DAY_S, "running"),
           "old_queued": _job(store, "waiting", 60 * DAY_S, "queued")}
    return pico, ids


def _ids(panio) -> set[int]:
    return {j["id"] for j in panio("job", "list", "--limit", "100", "--json").json()}


def test_prune_removes_finished_jobs_older_than_the_duration_with_steps_and_artifacts(history):
    panio, ids = history
    from controller.jobs.overrides import OverrideStore

    overrides = OverrideStore(_store(panio).url)
    for age_s in (40 * DAY_S, DAY_S):
        overrides.add({"at": time.time() - age_s, "target": "pico", "job_id": ids["young"], "holder": "h",
                       "token": 1, "command": "serial stop", "by": "ops@ctl", "reason": "wedged"})
    r = panio("job", "prune", "--older-than", "30d", "--dry-run", "--json").json()
    assert (r["jobs"], r["steps"], r["artifacts"], r["artifact_chars"], r["dry_run"]) == (2, 2, 2, 2000, True)
    assert r["overrides"] == 1
    assert _ids(panio) == set(ids.values())  # a dry run removes nothing
    out = panio("job", "prune", "--older-than", "30d").out
    assert out.startswith("removed 2 jobs finished over 30d ago: 2 steps, 2 artifacts (2000 characters)")
    # queued and running jobs are never pruned, however old
    assert _ids(panio) == {ids["young"], ids["old_running"], ids["old_queued"]}
    panio.fails("job", "status", str(ids["old"]), code=3)
    assert [o["reason"] for o in overrides.for_job(ids["young"])] == ["wedged"]  # the recent one stays
    assert _store(panio).list_artifacts(ids["old"]) == {}
    assert panio("job", "artifacts", str(ids["young"]), "--json").json()  # the young job keeps everything


def test_artifacts_only_keeps_the_history(history):
    panio, ids = history
    r = panio("job", "prune", "--older-than", "1d", "--artifacts-only", "--json").json()
    assert (r["jobs"], r["artifacts"]) == (0, 3)
    assert _ids(panio) == set(ids.values())
    assert panio("job", "status", str(ids["old"]), "--json").json()["steps"][0]["status"] == "pass"
    names = [a["name"] for a in panio("job", "artifacts", str(ids["old"]), "--json").json()]
    assert "serial-console.log" not in names and "step-01.log" in names  # the step's own output stays


def test_prune_removes_a_finished_jobs_kept_message_never_a_queued_ones(history):
    """The signed message kept with each job (all a reconciler may send again, issue 45) goes with its artifacts;
    a queued job keeps it, however old."""
    panio, ids = history
    store = _store(panio)
    store.keep_messages([(ids[k], f"sealed {k}") for k in ("old", "young", "old_queued")])
    panio("job", "prune", "--older-than", "30d", "--artifacts-only")
    assert [store.message(ids[k]) for k in ("old", "young", "old_queued")] == [None, "sealed young", "sealed old_queued"]


@pytest.mark.parametrize("argv, code, words", [
    (["--older-than", "30"], 2, "use a number and a unit"),
    (["--older-than=-3d"], 2, "use a number and a unit"),
    (["--older-than", "0d"], 2, "must be more than zero"),
    ([], 2, "needs --older-than DURATION (the lab file has no [retention] table)"),
    (["--artifacts-only"], 2, "--artifacts-only needs --older-than"),
])
def test_bad_prune_requests_change_nothing(history, argv, code, words):
    panio, ids = history
    r = panio.fails("job", "prune", *argv, code=code)
    assert words in r.err
    assert _ids(panio) == set(ids.values())


def test_the_labs_retention_applies_by_hand_and_automatically_at_most_hourly(history, tmp_path):
    panio, ids = history
    lab = panio.lab.read_text()
    panio.lab.write_text(lab + '\n[retention]\njobs = "60d"\nartifacts = "30d"\n')
    r = panio("job", "prune", "--dry-run", "--json").json()
    assert r["rules"] == {"jobs": "60d", "artifacts": "30d"}
    assert (r["artifacts"]["artifacts"], r["jobs"]["jobs"]) == (2, 1)
    # `job run` applies it at its end (the job's own verdict untouched), and writes the stamp
    quick = job_file(tmp_path, "[[steps]]\nrun = 'target show ${target}'\n")
    assert panio("job", "run", quick, "--target", "pico").code == 0
    assert _ids(panio) - {ids["older"]} == _ids(panio) and ids["old"] in _ids(panio)
    assert _store(panio).list_artifacts(ids["old"]) == {} and _store(panio).list_artifacts(ids["young"])
    stamp = json.loads((Path(panio.env["PANIO_STATE_DIR"]) / "retention.json").read_text())
    assert stamp["result"]["jobs"]["jobs"] == 1
    # within the hour a second run does not prune again
    again = _job(_store(panio), "again", 90 * DAY_S)
    panio("job", "run", quick, "--target", "pico")
    assert again in _ids(panio)


def test_a_bad_retention_value_is_a_config_error_naming_the_line(pico):
    pico.lab.write_text(pico.lab.read_text() + '\n[retention]\njobs = "forever"\n')
    r = pico.fails("job", "prune", code=5)
    assert "retention.jobs" in r.err and "must be a duration" in r.err


# --- device-health history ---------------------------------------------------

# each target's health changes, oldest first, by age in days; with a 30-day horizon, 4 events go:
# pico's two oldest (its newest stays although it is old too), qemu's two old ones, none of far's or bmc's
HEALTH_AGES_D = {"pico": [90, 60, 40], "qemu": [50, 35, 1], "far": [45], "bmc": [3, 2]}
HEALTH_KEPT = {"pico": ["pico 40d"], "qemu": ["qemu 1d"], "far": ["far 45d"], "bmc": ["bmc 3d", "bmc 2d"]}


def _health_history(url: str):
    """A HealthStore at ``url`` with HEALTH_AGES_D recorded: a change per age, dated that long ago."""
    from bench_agent.health.state import HEALTHS, HealthStore

    store = HealthStore(url)
    for target, ages_d in HEALTH_AGES_D.items():
        for i, age_d in enumerate(ages_d):
            store.set(target, HEALTHS[i % 3], f"{target} {age_d}d", "ops@desk")
            newest = store.history(target, limit=1)[0]["id"]
            with store.engine.begin() as c:
                c.execute(store.events.update().where(store.events.c.id == newest)
                          .values(at=time.time() - age_d * DAY_S))
    return store


def _reasons(store) -> dict[str, list[str]]:
    return {t: [e["reason"] for e in store.history(t, limit=100)] for t in HEALTH_AGES_D}


@pytest.fixture(params=["sqlite", "postgresql"])
def health_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.db'}"
        return
    from jobhelp import drop_pg_schema, pg_schema

    url = pg_schema()
    yield url
    drop_pg_schema(url)


def test_health_prune_keeps_each_targets_newest_event_and_its_current_health(health_url):
    store = _health_history(health_url)
    everything, current = _reasons(store), store.all()
    before = time.time() - 30 * DAY_S
    assert store.prune(before, dry_run=True) == 4
    assert _reasons(store) == everything  # a dry run removes nothing
    assert store.prune(before) == 4
    assert _reasons(store) == HEALTH_KEPT
    assert store.all() == current  # current health untouched
    for target, record in current.items():  # the history still says why each target is in its health
        last = store.history(target, limit=1)[0]
        assert (last["health"], last["reason"]) == (record["health"], record["reason"])
    assert store.prune(before) == 0
    assert store.prune(time.time() + 60) == 1  # everything old: only bmc's older event goes, one event each stays
    assert {t: len(r) for t, r in _reasons(store).items()} == dict.fromkeys(HEALTH_AGES_D, 1)


def test_job_prune_counts_and_removes_old_health_history(history):
    panio, ids = history
    store = _health_history(_store(panio).url)
    everything, current = _reasons(store), store.all()
    assert "health_events" not in panio("job", "prune", "--older-than", "30d", "--artifacts-only", "--json").json()
    r = panio("job", "prune", "--older-than", "30d", "--dry-run", "--json").json()
    assert (r["jobs"], r["health_events"]) == (2, 4)
    assert _reasons(store) == everything  # neither the dry run nor --artifacts-only removed any
    out = panio("job", "prune", "--older-than", "30d").out
    # (--artifacts-only above took the artifacts)
    assert out.startswith("removed 2 jobs finished over 30d ago: 2 steps, 0 artifacts (0 characters), 4 health events")
    assert _reasons(store) == HEALTH_KEPT and store.all() == current
    shown = panio("target", "health", "pico", "--json").json()
    assert (shown["health"], [e["reason"] for e in shown["history"]]) == ("maintenance", ["pico 40d"])
    assert panio("job", "prune", "--older-than", "30d", "--json").json()["health_events"] == 0


def test_the_labs_jobs_retention_prunes_health_history_and_artifacts_retention_does_not(history):
    panio, ids = history
    store = _health_history(_store(panio).url)
    panio.lab.write_text(panio.lab.read_text() + '\n[retention]\njobs = "30d"\nartifacts = "1d"\n')
    r = panio("job", "prune", "--dry-run", "--json").json()
    assert r["jobs"]["health_events"] == 4 and "health_events" not in r["artifacts"]
    panio("job", "prune")
    assert _reasons(store) == HEALTH_KEPT


# --- per-job files on a worker ------------------------------------------------

REDIS_URL = "redis://127.0.0.1:6379/5"


class Worker:
    def __init__(self, root: Path) -> None:
        self.root, self.prefix = root, f"panio-test-{uuid.uuid4().hex[:10]}:"
        self.env = {"PANIO_BROKER": REDIS_URL, "PANIO_REDIS_PREFIX": self.prefix,
                    "PANIO_RESULTS_URL": f"sqlite:///{root / 'results.db'}", "PANIO_VISIBILITY_TIMEOUT_S": "3",
                    **keyhelp.controller_env()}
        self.state = root / "wstate"
        self.procs: list[subprocess.Popen] = []
        self.lab: Path | None = None  # the host's own configuration: the test's lab file

    def start(self) -> subprocess.Popen:
        log = self.root / f"worker-{len(self.procs)}.log"
        env = {**os.environ, **self.env, **keyhelp.worker_env(), "PANIO_STATE_DIR": str(self.state),
               "HOME": str(self.root)}
        with open(log, "w") as f:
            proc = subprocess.Popen([PANIO, "worker", "--host", "bench1", "--lab", str(self.lab), "--concurrency",
                                     "2"], env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        wait_for(lambda: "ready." in log.read_text() or proc.poll() is not None, timeout_s=60)
        assert proc.poll() is None, log.read_text()
        return proc

    def labs(self) -> list[Path]:
        return sorted((self.state / "worker-bench1" / "labs").glob("job-*.toml"))

    def caches(self) -> list[Path]:
        return sorted((self.state / "cache").glob("lab-*job-*.marshal"))

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        import redis

        r = redis.Redis.from_url(REDIS_URL)
        for key in r.scan_iter(match=f"{self.prefix}*"):
            r.delete(key)


@pytest.fixture
def worker(panio, tmp_path):
    w = Worker(tmp_path / "w")
    w.root.mkdir()
    panio.env.update(w.env)
    panio("init")
    panio("host", "add", "bench1", "--ssh", "ops@bench1.invalid")
    panio("target", "add", "b1", "--host", "bench1")
    w.lab = panio.lab
    yield w
    w.close()


def test_a_workers_job_leaves_no_lab_file_and_no_parse_cache(panio, worker, tmp_path):
    worker.start()
    body = "[[steps]]\nrun = 'ping ${target} --count 2'\n[[steps]]\nrun = 'target show ${target}'\n"
    r = panio("job", "submit", job_file(tmp_path, body), "--target", "b1", "--wait", "--json", timeout=120)
    assert r.json()["result"] == "passed"
    assert worker.labs() == [] and worker.caches() == []


def test_a_worker_writes_no_per_job_files_and_prune_removes_an_older_panios(panio, worker, tmp_path):
    worker.start()
    body = "[[steps]]\nrun = 'ping ${target} --count 600 --interval 0.05'\n"
    job_id = panio("job", "submit", job_file(tmp_path, body), "--target", "b1", "--json").json()["job_id"]
    wait_for(lambda: panio("job", "status", str(job_id), "--json").json()["state"] == "running", timeout_s=60)
    assert not worker.labs() and not worker.caches()  # the step runs in the worker's process: no lab file
    # an older panio's leftovers: a per-job lab file of a worker that is gone, and its parse cache
    labs = worker.state / "worker-bench1" / "labs"
    labs.mkdir(parents=True, exist_ok=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    old = labs / f"job-7-{dead.pid}-0123abcd.toml"
    old.write_text("[targets.b1]\n")
    env = {**panio.env, "PANIO_STATE_DIR": str(worker.state)}
    r = subprocess.run([PANIO, "job", "prune", "--older-than", "1d", "--json"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert str(old) in json.loads(r.stdout)["files"], r.stderr
    assert not old.exists()
    panio("job", "cancel", str(job_id))


def test_the_capture_supervisors_error_log_is_rotated(pico):
    log = pico.state / "serial" / "pico" / "supervisor.err"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"old start-up noise\n" * 60000)  # over 1 MiB
    pico.fails("serial", "watch", "pico", code=12)  # no such device: the supervisor starts, fails, writes its log
    assert log.with_name("supervisor.err.1").stat().st_size > 1 << 20
    assert not log.exists() or log.stat().st_size < 1 << 20


def test_schedule_serve_applies_the_labs_retention_when_it_starts(history, tmp_path):
    panio, ids = history
    store = _health_history(_store(panio).url)
    panio.lab.write_text(panio.lab.read_text() + '\n[retention]\njobs = "30d"\n')
    log = tmp_path / "serve.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for(lambda: "retention (jobs older than 30d): removed 2 jobs, 2 artifacts, 4 health events"
                 in log.read_text(), timeout_s=30)
        assert _ids(panio) == {ids["young"], ids["old_running"], ids["old_queued"]}
        assert _reasons(store) == HEALTH_KEPT
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
