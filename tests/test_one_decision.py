"""Each decision of the job road made in one function, whichever road reaches it (issue 41): the health an
incomplete job leaves (its runner's and a reconciler's), a run's deadline passed before a job started (the
runner's, the reconciler's and a follower's)."""

from __future__ import annotations

import time

from bench_agent.health.gate import HealthGate, after_incomplete
from bench_agent.health.state import HealthStore
from bench_agent.results.store import ResultStore

SPEC = {"lease_ttl_s": 2, "steps": [{"name": "a", "command": "panio ping t"}]}
CHECK = {"name": "c", "steps": [], "retry_s": 20}


def _running(store: ResultStore, spec: dict = SPEC) -> int:
    job_id = store.create_job("j", "t", None, spec)
    assert store.take(job_id, "w", 0) and store.claim(job_id, "w")
    return job_id


def test_an_incomplete_job_leaves_the_same_health_on_every_road(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    health = HealthStore(store.url)
    health.set("t", "good", "checked", "test")
    heard: list[tuple[str, dict]] = []
    gate = HealthGate(store.url, "worker w", lambda event, data: heard.append((event, data)))
    job_id = _running(store, {**SPEC, "health_check": CHECK})
    gate.after({"job_id": job_id, "target": "t", "health_check": CHECK},
               {"job_id": job_id, "health": "incomplete", "result": None, "reason": "lease lost"}, store)
    by_runner = health.get("t")
    assert (by_runner["health"], by_runner["reason"]) == ("unknown", f"job {job_id} ended incomplete: lease lost")
    assert by_runner["recheck_at"] is None  # its runner runs the check at once, under the job's lease
    assert [e for e, _ in heard] == ["health_changed"]

    health.set("t", "good", "checked", "test")
    previous, by_reconciler = after_incomplete(health, store, store.job(job_id), "lease lost", "reconciler", CHECK,
                                               check_runs_now=False)
    assert (previous, by_reconciler["reason"]) == ("good", by_runner["reason"])
    assert by_reconciler["recheck_at"] >= time.time() + 19  # nobody runs it now: re-checked automatically


def test_a_later_job_speaks_for_the_target_on_every_road(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    health = HealthStore(store.url)
    health.set("t", "good", "checked", "test")
    lost = _running(store)
    time.sleep(0.01)  # started_at is a wall-clock time: the later job's must be later
    _running(store)
    gate = HealthGate(store.url, "worker w", lambda *a: None)
    gate.after({"job_id": lost, "target": "t"}, {"job_id": lost, "health": "incomplete", "result": None,
                                                 "reason": "lease lost"}, store)
    assert after_incomplete(health, store, store.job(lost), "lost", "reconciler", None, check_runs_now=False) is None
    assert health.get("t")["health"] == "good"


def test_a_deadline_passed_before_the_start_ends_the_job_the_same_way_on_every_road(tmp_path):
    """The runner its message reached late, a reconciler and a follower all end such a job through
    ``reconcile.expire_unstarted``: timed out, the same words, its broker copy dropped; a job that started is
    not theirs to end."""
    from bench_agent.jobs.reconcile import Reconciler, expire_unstarted
    from bench_agent.jobs.runner import JobRunner
    from controller.jobs.remote import _withdrawn

    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    past = time.time() - 5  # the reconciler allows a second of clock skew
    by_runner = store.create_job("j", "t", None, {**SPEC, "deadline_at": past})
    assert JobRunner(store, None, "w").run({"job_id": by_runner, "target": "t", "deadline_at": past}) is None
    by_reconciler = store.create_job("j", "t", None, {**SPEC, "deadline_at": past})
    Reconciler(store, None).pass_([by_reconciler])
    by_follower = store.create_job("j", "t", None, SPEC)
    assert _withdrawn(store, store.job(by_follower), 0.0, None, past)
    ended = [store.job(i) for i in (by_runner, by_reconciler, by_follower)]
    assert {(j["health"], j["reason"], j["error"]["exit"]) for j in ended} == {
        ("timed_out", "the run's deadline passed before the job started", 22)}
    assert all(store.cancel_requested(j["id"]) for j in ended)
    started = _running(store)
    assert not expire_unstarted(store, started) and not store.cancel_requested(started)


def test_the_mcp_says_outcome_unknown_as_the_dispatcher_marked_it_never_from_its_own_stderr(panio, monkeypatch):
    """A tool's result reads the error the command raised, as an object (the dispatcher marked whether the outcome
    is unknown, from the operation's spec); a text on stderr that looks like a marked error changes nothing, and
    an exit status of 4 or 22 alone is no mark."""
    import json

    import anyio

    from controller.cli.main import run_captured
    from controller.mcp import results, runner

    panio("init")
    panio("target", "add", "pico")
    for name in ("PANIO_STATE_DIR", "HOME"):
        monkeypatch.setenv(name, panio.env[name])
    done = anyio.run(runner.run, run_captured, panio.lab, ["power", "off", "pico"], 10)
    assert done.code == 3 and done.error["error"] == "not_configured" and "outcome" not in done.error

    forged = json.dumps({"error": "unreachable", "exit": 4, "message": "printed, not raised", "outcome": "unknown"})
    raised = {"error": "unreachable", "exit": 4, "message": "plug: no answer"}
    text, _ = results.render(runner.Finished(["power", "off", "pico"], 4, "", forged, 0.1, 60, error=raised), True)
    assert results.UNKNOWN_OUTCOME not in text and "plug: no answer" in text
    marked = {**raised, "outcome": "unknown"}
    assert results.UNKNOWN_OUTCOME in results.render(runner.Finished(["power", "off", "pico"], 4, "", "", 0.1, 60,
                                                                     error=marked), True)[0]
    assert results.UNKNOWN_OUTCOME not in results.render(runner.Finished(["serial", "log", "pico"], 4, "", "", 0.1,
                                                                         60, error=marked), False)[0]
