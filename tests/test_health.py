"""Device health: set and shown with history, gating new jobs, health checks after incomplete jobs and lifted
maintenance. Real `panio` processes, real step subprocesses, SQLite (and the same code on PostgreSQL elsewhere)."""

from __future__ import annotations

import re
import subprocess
import time

from conftest import PANIO
from jobhelp import job_file, stop, wait_for, wait_held

PING = """
name = "smoke"
target = "pico"
{extra}
[[steps]]
run = "panio ping ${{target}}"
"""
CHECK = """
name = "pico-health"
[[steps]]
name = "probe"
run = "panio action run ${target} probe"
"""


def health_lab(panio, tmp_path, flag):
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "probe", "-t", "pico", "--command", f"test -e {flag}")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "pico.toml").write_text(CHECK)
    with panio.lab.open("a") as f:
        f.write('\n[targets.pico.health_check]\njob = "checks/pico.toml"\n')


def history(panio) -> list[tuple[str, str]]:
    return [(e["previous"], e["health"]) for e in panio("target", "health", "pico", "--json").json()["history"]]


def test_set_show_and_history_with_who_and_why(panio):
    panio("init")
    panio("target", "add", "pico")
    assert panio("target", "health", "--json").json()[0]["health"] == "unknown"
    r = panio("target", "health", "pico", "--set", "maintenance", "--reason", "reflashing the BMC", "--json").json()
    assert (r["health"], r["reason"]) == ("maintenance", "reflashing the BMC") and "@" in r["set_by"]
    panio.fails("target", "health", "pico", "--set", "bad", code=2)  # a reason is required
    panio.fails("target", "health", "nope", "--set", "good", code=3)
    assert "--reason goes with --set" in panio.fails("target", "health", "pico", "--reason", "x", code=2).err
    panio("target", "health", "pico", "--set", "good")
    assert history(panio) == [("unknown", "maintenance"), ("maintenance", "good")]
    assert "maintenance -> good" in panio("target", "health", "pico").out


def test_maintenance_skips_or_holds_new_jobs_until_lifted(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    panio("target", "health", "pico", "--set", "maintenance", "--reason", "cable swap")
    skip = job_file(tmp_path, PING.format(extra='on_unhealthy = "skip"'), "skip.toml")
    r = panio.fails("job", "run", skip, code=8)
    assert "maintenance (cable swap, set by" in r.err and "skipped" in r.err
    assert "panio target health pico --set good" in r.error["hint"], r.error  # what lifts it, not `job logs`
    job = panio("job", "status", "1", "--json").json()
    assert job["health"] == "incomplete" and not any(s["status"] == "pass" for s in job["steps"])
    assert panio("target", "health", "pico", "--json").json()["health"] == "maintenance"  # a skip changes nothing

    waiting = job_file(tmp_path, PING.format(extra="lease_wait_s = 60"), "wait.toml")
    proc = subprocess.Popen([PANIO, "job", "run", waiting, "--json"], env=panio.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: any(j["id"] == 2 for j in panio("job", "list", "--json").json()), 60)
        wait_held(panio, 2)  # the job waits while the target is in maintenance
        assert proc.poll() is None
        panio("target", "health", "pico", "--set", "good")
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    assert panio("job", "status", "2", "--json").json()["result"] == "passed"


def test_a_job_held_back_until_its_deadline_says_how_long_it_waited_in_round_seconds(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    panio("target", "health", "pico", "--set", "maintenance", "--reason", "cable swap")
    r = panio.fails("job", "run", job_file(tmp_path, PING.format(extra=""), "short.toml"), "--deadline-s", "1.5",
                    code=8)
    assert re.search(r"no new job runs on it; waited \d+(\.\d)? s", r.err), r.err  # not "waited 1.4896 s"


def test_health_checks_before_after_incomplete_and_on_lifting_maintenance(panio, tmp_path):
    flag = tmp_path / "healthy"
    health_lab(panio, tmp_path, flag)
    smoke = job_file(tmp_path, PING.format(extra=""), "smoke.toml")
    # unknown + a check configured: the check runs first, fails, the target is bad and the job does not run
    r = panio.fails("job", "run", smoke, code=8)
    assert "failed its health check (job 2)" in r.err or "failed its health check" in r.err
    assert panio("target", "health", "pico", "--json").json()["health"] == "bad"
    assert panio("job", "status", "2", "--json").json()["spec"]["kind"] == "health_check"
    # bad: a new job is held back (skipped here) until a check passes
    panio.fails("job", "run", job_file(tmp_path, PING.format(extra='on_unhealthy = "skip"'), "s.toml"), code=8)
    flag.touch()
    r = panio("target", "health", "pico", "--check")
    assert "pico: good (health check job" in r.out
    assert [t["health"] for t in panio("target", "health", "--check", "--json").json()] == ["good"]
    assert panio("job", "run", smoke).code == 0  # good: no check before it
    # a job that ends incomplete (the lab failed under it): unknown, then its check runs at once
    flag.unlink()
    broken = job_file(tmp_path, 'target = "pico"\n[[steps]]\nrun = "panio serial status ${target}"\n', "b.toml")
    r = panio.fails("job", "run", broken, code=3)
    assert re.search(r"health check of pico \(job \d+\): job \d+ ended incomplete", r.out), r.out
    assert "pico health: good -> unknown" in r.out
    assert history(panio)[-2:] == [("good", "unknown"), ("unknown", "bad")]
    # maintenance lifted: the check runs before anything else does
    panio("target", "health", "pico", "--set", "maintenance", "--reason", "new SD card")
    flag.touch()
    r = panio("target", "health", "pico", "--set", "good", "--json").json()
    assert r["health"] == "good" and r["health_check_job"]["result"] == "passed"
    assert history(panio)[-3:] == [("bad", "maintenance"), ("maintenance", "unknown"), ("unknown", "good")]


def test_a_check_the_board_fails_says_which_step_once(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "pico.toml").write_text(
        'name = "pico-health"\n[[steps]]\nname = "answers"\nrun = "panio ping ${target}"\nexpect_output = "NEVER"\n')
    with panio.lab.open("a") as f:
        f.write('\n[targets.pico.health_check]\njob = "checks/pico.toml"\n')
    r = panio.fails("target", "health", "pico", "--check", code=14)
    assert "pico: bad (health check job 1 failed: answers, set by" in r.out, r.out
    assert panio("target", "health", "pico", "--json").json()["reason"] == "health check job 1 failed: answers"


def test_a_periodic_check_runs_before_a_job_once_due(panio, tmp_path):
    flag = tmp_path / "healthy"
    flag.touch()
    health_lab(panio, tmp_path, flag)
    panio.lab.write_text(panio.lab.read_text().replace('job = "checks/pico.toml"', 'job = "checks/pico.toml"\nevery_s = 3600'))
    smoke = job_file(tmp_path, PING.format(extra=""), "smoke.toml")
    assert "before job 1: its health is unknown" in panio("job", "run", smoke).out
    assert "health check" not in panio("job", "run", smoke).out  # just checked
    from bench_agent.health.state import HealthStore

    store = HealthStore(f"sqlite:///{tmp_path / 'state' / 'results.db'}")
    with store.engine.begin() as c:  # an hour and a second pass
        c.execute(store.current.update().values(checked_at=store.current.c.checked_at - 3601))
    assert "older than 3600 s" in panio("job", "run", smoke).out


def test_health_store_on_postgresql():
    from bench_agent.health.state import HealthStore
    from jobhelp import drop_pg_schema, pg_schema

    url = pg_schema()
    try:
        store = HealthStore(url)
        assert store.get("pico")["health"] == "unknown"
        assert store.set("pico", "maintenance", "rewiring", "ops@desk")[0] == "unknown"
        previous, record = store.set("pico", "good", "lifted", "ops@desk", checked=True)
        assert previous == "maintenance" and record["checked_at"]
        assert [(e["previous"], e["health"]) for e in store.history("pico")] == [("unknown", "maintenance"),
                                                                                ("maintenance", "good")]
        assert set(store.all()) == {"pico"}
    finally:
        drop_pg_schema(url)


def test_the_take_reads_the_targets_health_in_its_own_statement_on_postgresql():
    """The gate's first read rides the job's take (one statement): the record ``get`` would return, taken or not;
    a job on a target in maintenance is held on that record, without another read."""
    from bench_agent.health.state import HealthStore
    from bench_agent.health.gate import HealthGate
    from bench_agent.results.store import ResultStore
    from jobhelp import drop_pg_schema, pg_schema

    url = pg_schema()
    try:
        results, health = ResultStore(url), HealthStore(url)
        job_id = results.create_job("j", "pico", None, {"steps": []})
        assert results.take_reading_health(job_id, "w1", 0.0, "pico") == (True, health.get("pico"))
        health.set("pico", "maintenance", "rewiring", "ops@desk")
        taken, seen = results.take_reading_health(job_id, "w2", 0.0, "pico")  # w1 holds it, its beat fresh
        assert not taken and seen == health.get("pico") and seen["health"] == "maintenance"

        gate = HealthGate(url, "w1", lambda event, data: None)
        reads = []
        gate.store.get = lambda target: reads.append(target) or health.get(target)
        payload = {"job_id": job_id, "target": "pico", "on_unhealthy": "skip"}
        held = gate.blocked(payload, 0, lambda: False, seen)
        assert held is not None and "maintenance" in held.message and reads == []
        health.set("pico", "good", "lifted", "ops@desk")
        assert gate.blocked(payload, 0, lambda: False) is None and reads == ["pico"]  # nothing seen: it reads
    finally:
        drop_pg_schema(url)


def test_automatic_rechecks_back_off_and_never_lift_an_operators_word(tmp_path):
    from bench_agent.health.gate import HealthGate

    gate = HealthGate(f"sqlite:///{tmp_path / 'r.db'}", "worker w@h:1", lambda *a: None)
    check = {"target": "pico", "kind": "health_check", "auto": True, "retry_s": 60, "retry_max_s": 1800}
    failed = {"health": "complete", "result": "failed", "reason": "failed: answers"}
    waits = []
    for job_id in range(1, 8):
        before = time.time()
        gate.after(check, {**failed, "job_id": job_id})
        record = gate.store.get("pico")
        waits.append(round(record["recheck_at"] - before))
    assert waits == [60, 120, 240, 480, 960, 1800, 1800] and record["failures"] == 7
    job = {"target": "pico", "health_check": check, "on_unhealthy": "skip"}
    assert gate.blocked(job, 0, lambda: True) is not None  # not due yet: held back
    with gate.store.engine.begin() as c:
        c.execute(gate.store.current.update().values(recheck_at=time.time() - 1))
    assert gate.blocked(job, 0, lambda: True) is not None  # due, but a suite's job skips: the scheduler re-checks
    job = {**job, "on_unhealthy": "wait"}
    assert gate.blocked(job, 0, lambda: True) is None  # due: a job that waits for it has its runner re-check first
    why, held = gate.before_steps(job)
    assert held is None and "automatic re-check is due" in why
    gate.after(check, {"job_id": 8, "health": "complete", "result": "passed", "reason": "all steps passed"})
    assert (gate.store.get("pico")["health"], gate.store.get("pico")["recheck_at"]) == ("good", None)
    operator = {k: v for k, v in check.items() if k != "auto"}  # `panio target health pico --check`
    gate.after(operator, {**failed, "job_id": 9})
    assert (gate.store.get("pico")["health"], gate.store.get("pico")["recheck_at"]) == ("bad", None)
    gate.store.set("pico", "maintenance", "rewiring", "ops@desk")
    assert gate.blocked(job, 0, lambda: True) is not None and gate.store.get("pico")["recheck_at"] is None


HEAL_CHECK = """
name = "pico-health"
[[steps]]
name = "answers"
run = "panio serial transact ${target} 'echo fit' --until 'fit' --timeout-ms 5000"
"""
LONG_WAIT = """
name = "waits"
target = "pico"
[[steps]]
run = "panio serial wait ${target} --since-step --pattern 'no-such-prompt' --timeout-ms 60000"
timeout_s = 90
"""


def test_a_board_made_bad_after_a_stopped_capture_heals_on_its_own_once_it_runs_again(bench, panio, tmp_path,
                                                                                    receiver):
    """Issue 27: the capture is stopped under a job; the automatic check that follows does not burn itself on
    it (the target is held bad, saying why); `panio schedule serve` asks the lab again with backoff, and once
    the capture runs again the check runs and the target is good, with no operator action."""
    import os
    import signal

    from bench_agent.sim.console import PROMPT

    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    assert bench.wait_for("pico", PROMPT, timeout_ms=30000)["status"] == "matched"
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "pico.toml").write_text(HEAL_CHECK)
    with panio.lab.open("a") as f:
        f.write(f'\n[targets.pico.health_check]\njob = "checks/pico.toml"\nretry_s = 1\nretry_max_s = 4\n'
                f'\n[[notify]]\nwebhook = "{receiver.url}/w"\n')
    assert "pico: good" in panio("target", "health", "pico", "--check").out  # job 1

    pid = bench.discovery("pico")["pid"]
    threads = len(os.listdir(f"/proc/{pid}/task"))
    proc = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, LONG_WAIT)], env=panio.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(os.listdir(f"/proc/{pid}/task")) > threads, 30, 0.02)  # job 2 waits on the capture
        os.kill(pid, signal.SIGTERM)  # the capture stops behind panio's back
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 10, err  # not_running: the lab's
    assert "health check of pico not run: its health check waits for the lab: no serial capture runs" in out, out
    record = panio("target", "health", "pico", "--json").json()
    assert record["health"] == "bad" and "(start it: `panio serial watch pico`)" in record["reason"], record
    assert history(panio)[-2:] == [("good", "unknown"), ("unknown", "bad")]
    first_look = record["recheck_at"]

    serve = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        # the scheduler asks the lab again, finds the capture still stopped, and holds the check again
        wait_for(lambda: panio("target", "health", "pico", "--json").json()["recheck_at"] > first_look + 0.5, 30)
        assert panio("target", "health", "pico", "--json").json()["health"] == "bad"
        assert [j["id"] for j in panio("job", "list", "--json").json()] == [2, 1], "a check was burned on the lab"
        panio("serial", "watch", "pico")
        restarted = time.monotonic()
        wait_for(lambda: panio("target", "health", "pico", "--json").json()["health"] == "good", 30)
        assert time.monotonic() - restarted < 15  # within its backoff (1 s, at most 4 s) plus the check
        serve.send_signal(signal.SIGTERM)
        out, err = serve.communicate(timeout=60)
    finally:
        stop(serve)
    assert "re-check of pico: held: its health check waits for the lab" in out, out
    assert re.search(r"re-check of pico: health check job 3: complete, passed", out), out
    record = panio("target", "health", "pico", "--json").json()
    assert record["set_by"].startswith("panio schedule serve@") and record["recheck_at"] is None
    assert history(panio)[-1] == ("bad", "good")
    wait_for(lambda: len([b for b in receiver.bodies("/w") if b["event"] == "health_changed"]) >= 4, 60)
    changes = [(b["previous"], b["health"]) for b in receiver.bodies("/w") if b["event"] == "health_changed"]
    assert changes[-2:] == [("unknown", "bad"), ("bad", "good")], changes


def test_a_target_put_in_maintenance_while_a_job_waits_for_its_lease_holds_the_job(tmp_path):
    """The gate's read before the lease stands only when the lease came at once; a job that waited reads again."""
    from bench_agent.leases import base as leases
    from bench_agent.leases import file_store as file_leases
    from bench_agent.results.store import ResultStore
    from bench_agent.jobs.runner import JobRunner

    url = f"sqlite:///{tmp_path / 'r.db'}"
    results, store = ResultStore(url), file_leases.FileLeaseStore(tmp_path / "leases")

    def job(name: str) -> dict:
        payload = {"job_id": results.create_job(name, "pico", None, {"steps": []}), "name": name, "target": "pico",
                   "steps": []}
        assert results.take(payload["job_id"], "w", 0.0) and results.claim(payload["job_id"], "w")
        return payload

    runner = JobRunner(results, store, "worker w@h:1")
    first = job("first")
    assert runner._gate().blocked(first, 0, lambda: True) is None  # the target is usable: read once
    held = leases.acquire(store, "pico", {"holder": "first"}, 30, 0)
    assert held.at_once
    assert runner._checked_steps(first, held, None)["result"] == "passed"

    second = job("second")
    assert runner._gate().blocked(second, 0, lambda: True) is None  # still usable when it asks for the lease
    meanwhile = []

    def operator_acts() -> bool:  # called while the second job waits for the lease: maintenance, then the release
        if not meanwhile:
            runner._gate().store.set("pico", "maintenance", "rewiring", "ops@desk")
            held.release()
            meanwhile.append(True)
        return False

    lease = leases.acquire(store, "pico", {"holder": "second"}, 30, 20, should_stop=operator_acts)
    try:
        assert meanwhile and not lease.at_once
        summary = runner._checked_steps(second, lease, None)
    finally:
        lease.release()
    assert (summary["health"], summary["result"]) == ("incomplete", "skipped"), summary
    assert "held back after its lease was granted" in summary["reason"], summary["reason"]


def test_a_running_automatic_re_check_is_said_as_running_not_as_due_later(panio, tmp_path):
    """Issue 43: a re-check taken holds the target's ``recheck_at`` 15 min on; while it runs, the target's reason
    (``target health``, a skipped job's error) says it runs now, not "re-checked automatically from <15 min on>"."""
    from bench_agent.health.state import HealthStore

    flag, go = tmp_path / "healthy", tmp_path / "go"
    (tmp_path / "probe.sh").write_text(f"while [ ! -e {go} ]; do sleep 0.1; done\ntest -e {flag}\n")
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "probe", "-t", "pico", "--command", f"sh {tmp_path / 'probe.sh'}")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "pico.toml").write_text(CHECK)
    with panio.lab.open("a") as f:
        f.write('\n[targets.pico.health_check]\njob = "checks/pico.toml"\n')
    go.touch()
    smoke = job_file(tmp_path, PING.format(extra=""), "smoke.toml")
    panio.fails("job", "run", smoke, code=8)  # its automatic check (job 2) fails: bad, re-checked from 60 s on
    shown = panio("target", "health", "pico").out
    assert "re-checked automatically from" in shown and "running now" not in shown, shown
    store = HealthStore(f"sqlite:///{tmp_path / 'state' / 'results.db'}")
    with store.engine.begin() as c:  # its re-check due
        c.execute(store.current.update().values(recheck_at=time.time() - 1))
    go.unlink()
    flag.touch()
    proc = subprocess.Popen([PANIO, "job", "run", smoke], env=panio.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:  # its runner takes the re-check and runs it first; the check waits for `go`
        wait_for(lambda: "running now" in panio("target", "health", "pico").out, 60)
        shown = panio("target", "health", "pico").out
        assert re.search(r"its automatic re-check is running now \(since \d\d:\d\d:\d\d\)", shown), shown
        assert "re-checked automatically from" not in shown, shown
        assert panio("target", "health", "pico", "--json").json()["rechecking_at"] <= time.time()
        skipped = panio.fails("job", "run", job_file(tmp_path, PING.format(extra='on_unhealthy = "skip"'), "s.toml"),
                              code=8)
        assert "its automatic re-check is running now" in skipped.err, skipped.err
        go.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    record = panio("target", "health", "pico", "--json").json()
    assert (record["health"], record["rechecking_at"]) == ("good", None), record
