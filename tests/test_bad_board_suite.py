"""Issue 43 item 3: a bad board's re-checks never hold a suite; one re-check at a time per board; the suite's
notification says which board's part was skipped and why, its verdict the jobs that ran.

Two simulated boards on real PTYs, a real results database (SQLite), the real suite runner and a real webhook
receiver on loopback.
"""

from __future__ import annotations

import time

from jobhelp import job_file, wait_for

ANSWERS = "name = 'answers'\n[[steps]]\nrun = \"serial transact ${target} 'echo alive' --until 'alive\\r?\\n.*# $' " \
          "--timeout-ms 10000\"\n"
CHECK = "name = 'b2-health'\n[[steps]]\nrun = \"serial transact ${target} 'echo fit' --until 'fit' " \
        "--timeout-ms 5000\"\n"


def test_a_bad_boards_due_recheck_never_holds_a_suite(bench, panio, tmp_path, receiver):
    from bench_agent.health.state import HealthStore
    from bench_agent.sim.console import PROMPT

    url = f"sqlite:///{tmp_path / 'results.db'}"
    panio.env["PANIO_RESULTS_URL"] = url
    for name in ("b1", "b2"):
        sim = bench.board(name)["console"]
        panio("serial", "watch", name)
        sim.power_on()
        assert bench.wait_for(name, PROMPT, timeout_ms=30000)["status"] == "matched"
    check = job_file(tmp_path, CHECK, "b2-health.toml")
    with panio.lab.open("a") as f:
        f.write(f'\n[targets.b2.health_check]\njob = "{check}"\nretry_s = 60\n'
                f'\n[[notify]]\nwebhook = "{receiver.url}/hook"\non = ["suite_finished"]\n'
                f'\n[[notify]]\nwebhook = "{receiver.url}/jobs"\non = ["job_incomplete", "job_failed"]\n')
    # as an automatic check leaves a board that failed it: bad, its re-check due now
    health = HealthStore(url)
    health.set("b2", "bad", "health check job 99 failed: answers", "worker w@h:1", None, True,
               recheck_at=time.time() - 1, failures=1)

    suite = job_file(tmp_path, "name = 'night'\ntargets = ['b1', 'b2']\njobs = ['answers.toml']\n", "night.toml")
    job_file(tmp_path, ANSWERS, "answers.toml")
    started = time.monotonic()
    panio.fails("suite", "run", suite, code=8)  # CI still hears that a job could not run (busy)
    took_s = time.monotonic() - started
    jobs = panio("job", "list", "--json").json()
    # no re-check ran under the suite's job: it is the scheduler's (before, the suite waited for it)
    assert sorted(j["name"] for j in jobs) == ["answers", "answers"], jobs
    by_target = {j["target"]: j for j in jobs}
    assert (by_target["b1"]["health"], by_target["b1"]["result"]) == ("complete", "passed")
    assert (by_target["b2"]["health"], by_target["b2"]["result"]) == ("incomplete", "skipped")
    assert took_s < 30

    sent = wait_for(lambda: receiver.bodies("/hook"), timeout_s=20)[0]
    assert sent["verdict"] == "passed; 1 skipped on b2", sent
    part = {j["target"]: j for j in sent["jobs"]}
    assert part["b1"]["fault"] is None and part["b2"]["fault"] == "skipped"
    assert "b2 is bad (health check job 99 failed: answers" in part["b2"]["reason"]
    assert "job %d answers on b2: skipped (its board is held): target b2 is bad" % part["b2"]["id"] in sent["text"]

    told = wait_for(lambda: receiver.bodies("/jobs"), timeout_s=20)
    assert [(b["target"], b["fault"]) for b in told] == [("b2", "skipped")], told
    assert "on b2 skipped (its board is held): target b2 is bad" in told[0]["text"]

    # one re-check at a time per board: the first asker takes the due one, the next finds it taken
    assert health.claim_recheck("b2", time.time()) and not health.claim_recheck("b2", time.time())
    assert health.get("b2")["recheck_at"] > time.time() + 60


def test_a_health_check_the_labs_own_services_failed_does_not_judge_the_board(tmp_path):
    """Issue 43 item 2: a check whose step found Redis (or the results database) away ends incomplete, and the
    board is not made bad for it: unknown, re-checked soon, its failures not counted. A check the board failed
    still makes it bad."""
    from bench_agent.errors import Unreachable
    from bench_agent.health.gate import HealthGate

    events = []
    gate = HealthGate(f"sqlite:///{tmp_path / 'r.db'}", "worker w@h:1", lambda e, d: events.append((e, d)))
    check = {"target": "b1", "kind": "health_check", "auto": True, "retry_s": 60, "retry_max_s": 1800}
    gate.store.set("b1", "good", "health check job 1 passed", "worker w@h:1", 1, True)
    away = Unreachable("Redis at redis://127.0.0.1:6379/0 unreachable: Error 111 connecting").to_json()
    gate.after(check, {"job_id": 2, "health": "incomplete", "result": None, "error": away,
                       "reason": f"step 'answers': lab failure: {away['message']}"})
    record = gate.store.get("b1")
    assert record["health"] == "unknown" and "the lab's Redis was unreachable" in record["reason"], record
    assert record["recheck_at"] is not None and not record["failures"]
    gate.after(check, {"job_id": 3, "health": "complete", "result": "failed", "reason": "failed: answers"})
    assert gate.store.get("b1")["health"] == "bad"
