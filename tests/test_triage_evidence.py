"""Triage on evidence (issue 44 item 4): the board's own last words head a triage when the prompt never came; the
board idle before a job is not a slow boot; flaky needs separate failures among passes; a board is judged on its
own history. Over a real results database (SQLite), runs recorded as a runner records them."""

from __future__ import annotations

import json
import time

from bench_agent.results.store import ResultStore
from bench_agent.triage import flaky
from bench_agent.triage.compare import triage


def stamp(ts: float) -> str:
    """A serial line's stamp for epoch ``ts`` (local time of day, as the capture writes it)."""
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int(ts % 1 * 1000):03d}"


def record(store, result: str, step: dict, log: list[tuple[float, str]], target: str = "b0",
           name: str = "boot") -> int:
    spec = {"steps": [], "inputs": {"job_sha256": "f1", "job_file": "# f1\n", "lab_sha256": "l1", "tags": [],
                                    "panio": "1.0"}}
    job_id = store.create_job(name, target, None, spec)
    store.record_steps(job_id, [(0, {"name": "waits for the prompt", "command": "panio serial wait b0",
                                     "checks": [], "captured": {}, **step})])
    text = "".join(f"[{stamp(t)}] #{i + 1} {line}\n" for i, (t, line) in enumerate(log))
    store.add_artifact(job_id, "serial-console.log", text)
    store.finish(job_id, "complete", result, "")
    return job_id


def test_the_headline_is_the_boards_last_words_when_the_prompt_never_came(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    t0 = time.time() - 3600
    ok = json.dumps({"status": "matched", "text": "Starting kernel ...\nbuildroot login: "})
    record(store, "passed", {"status": "pass", "exit_status": 0, "output": ok, "started_at": t0, "duration_s": 3},
           [(t0 + 0.1, "U-Boot 2024.01"), (t0 + 1, "Starting kernel ..."), (t0 + 2, "buildroot login: ")])
    t1 = t0 + 600
    stuck = json.dumps({"status": "timeout", "text": "U-Boot 2024.01\nStarting kernel ...\n"})
    failed = record(store, "failed", {"status": "fail", "exit_status": 22, "output": stuck, "started_at": t1,
                                      "duration_s": 10},
                    [(t1 + 0.1, "U-Boot 2024.01"), (t1 + 1, "Starting kernel ...")])
    t = triage(store, failed)
    assert t["last_words"]["line"] == "Starting kernel ..." and t["last_words"]["source"] == "serial-console.log"
    assert t["summary"].startswith("the board's last words: 'Starting kernel ...'"), t["summary"]
    assert "status: timeout" not in t["summary"]
    alone = ResultStore(f"sqlite:///{tmp_path / 'alone.db'}")  # no serial log, no pass: the wait's own text
    job = alone.create_job("boot", "b0", None, {"steps": []})
    alone.record_steps(job, [(0, {"name": "w", "command": "panio serial wait b0", "status": "fail",
                                  "exit_status": 22, "output": stuck, "checks": [], "captured": {}})])
    alone.finish(job, "complete", "failed", "")
    assert "the board's last words: 'Starting kernel ...'" in triage(alone, job)["summary"]


def test_the_board_idle_before_the_job_is_not_a_slow_boot(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    t0 = time.time() - 7200
    boot = [(0.0, "root@sim:~# "), (0.6, "reboot"), (1.0, "U-Boot 2024.01"), (1.5, "Starting kernel ...")]
    record(store, "passed", {"status": "pass", "exit_status": 0, "output": "", "started_at": t0 + 0.5,
                             "duration_s": 2}, [(t0 + d, line) for d, line in boot])
    # the next run: its board sat at its prompt for 40 s before the job began (the lease came long after)
    t1 = t0 + 600
    idle = [(0.0, "root@sim:~# "), (40.6, "reboot"), (41.0, "U-Boot 2024.01"), (41.5, "Starting kernel ..."),
            (42.0, "oops")]
    failed = record(store, "failed", {"status": "fail", "exit_status": 1, "output": "", "started_at": t1 + 40.5,
                                      "duration_s": 2}, [(t1 + d, line) for d, line in idle])
    t = triage(store, failed)
    assert all(d.get("late") is None for d in t["logs"]), [d.get("late") for d in t["logs"]]
    assert "late:" not in t["summary"]
    # a boot that is slow once the job began is still named
    t2 = t0 + 1200
    slow = [(0.0, "root@sim:~# "), (0.6, "reboot"), (1.0, "U-Boot 2024.01"), (9.5, "Starting kernel ...")]
    slower = record(store, "failed", {"status": "fail", "exit_status": 1, "output": "", "started_at": t2 + 0.5,
                                      "duration_s": 10}, [(t2 + d, line) for d, line in slow])
    late = triage(store, slower)["logs"][0]["late"]
    assert late["line"].endswith("Starting kernel ...") and late["wait_s"] >= 8


def _runs(results: str) -> list[dict]:
    """Runs with identical inputs, newest first, from a string oldest first (P pass, F fail)."""
    return [{"id": i + 1, "health": "complete", "result": "passed" if c == "P" else "failed",
             "spec": {"inputs": {"job_sha256": "x"}}} for i, c in reversed(list(enumerate(results)))]


def test_flaky_only_on_separate_failures_among_passes():
    one = flaky.verdicts(_runs("PPPFPPP"))
    assert not one["flaky"] and "one failure among passes" in one["why"]
    outage = flaky.verdicts(_runs("PPFFFPP"))
    assert not outage["flaky"] and "an outage then a fix" in outage["why"]
    twice = flaky.verdicts(_runs("PPFPPFP"))
    assert twice["flaky"] and "2 separate failures" in twice["why"]
    assert not flaky.verdicts(_runs("FFFF"))["flaky"] and flaky.verdicts(_runs("PPFF"))["regression_since"] == 3


def test_a_board_is_judged_on_its_own_history_not_its_share_of_the_labs_newest_jobs(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")

    def job(target: str, result: str) -> None:
        store.finish(store.create_job("boot", target, None, {"steps": []}), "complete", result, "")

    for _ in range(8):
        job("rare", "failed")  # its own history: it fails every time
    for i in range(18):
        job("busy1" if i % 2 else "busy2", "passed")
    job("rare", "failed")  # its one job among the lab's newest
    for _ in range(2):
        job("busy1", "passed")
    named = flaky.outliers(store, window=10, lab_window=20)
    assert [o["target"] for o in named] == ["rare"] and named[0]["failed"] == 9, named
    assert "rare failed 9 of its last 9 jobs" in named[0]["why"]


def test_which_lab_keys_changed_is_said_of_a_job_a_worker_ran(tmp_path):
    """A worker's payload carries no table of its target (no hook travels on the broker): the inputs' digests per
    key still say which keys changed."""
    from bench_agent.triage.compare import inputs

    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")

    def run(result: str, table: dict) -> int:
        spec = {"steps": [], "target_config": {"host": "bench1"}, "inputs": inputs("# f\n", table, [], "1.0")}
        job_id = store.create_job("boot", "b0", "bench1", spec)
        store.record_steps(job_id, [(0, {"name": "s", "command": "panio ping b0", "status":
                                         "pass" if result == "passed" else "fail", "exit_status": 0,
                                         "checks": [], "captured": {}})])
        store.finish(job_id, "complete", result, "")
        return job_id

    run("passed", {"host": "bench1", "power": {"cycle_cmd": "plug cycle 1"}, "tags": ["pi5"]})
    failed = run("failed", {"host": "bench1", "power": {"cycle_cmd": "plug cycle 2"}, "tags": ["pi5"]})
    assert triage(store, failed)["inputs"]["lab"] == {"changed": ["power"]}


def test_the_cli_says_why_one_failure_is_not_flaky():
    from controller.cli.jobs.job_triage import lines

    t = {"job": {"id": 7, "name": "boot", "target": "b0", "health": "complete", "result": "failed", "reason": ""},
         "baseline": None, "match": "no passing run of this job before it", "flaky": flaky.verdicts(_runs("PPPFPP"))}
    assert any("not flaky (PPPFPP" in x and "one failure among passes" in x for x in lines(t))
