"""Issue 43: a board that panics at every boot, during suites on real workers, does not hold the healthy boards.

A simulated bench of two boards (``panio-sim up``: consoles on PTYs behind Shelly-protocol plugs), a real
``panio worker`` serving both, the machine's Redis as broker and lease store, a results database (SQLite), a
real ``panio schedule serve`` firing a suite over both boards and re-checking the bad one, and a webhook
receiver. board1 is made to panic at every boot (``panio-sim inject --boot-line 'Kernel panic ...'
--no-prompt``). Asserted: every suite's verdict is sent once its healthy board is done, board1's part reported
(failed or skipped, never "the lab"), ``job_failed`` for its failing job, board0 never idle longer than a
backoff step because of board1, and board1's re-checks one at a time, its backoff doubling once a failed check.
"""

from __future__ import annotations

import signal
import subprocess
import time

from conftest import PANIO
from jobhelp import job_file, stop, wait_for
from simbench import PROMPT, boot_job, sim, sim_bench

BOOT = boot_job(6000, 15, then=f"""[[steps]]
name = "console answers"
run = "panio serial transact ${{target}} 'uname -a' --until '{PROMPT}' --timeout-ms 5000"
expect_output = "Linux"
""")
CHECK = BOOT.replace('name = "boot"', 'name = "board-health"')
PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
RETRY_S, RETRY_MAX_S, EVERY_S, EVERY_CHECK_S = 4, 16, 3, 20  # checked every 20 s: its first jobs fail first
BUSY = "of the previous run"  # a slot that comes while a board still runs its job skips that board's part only


def _lab(bench_lab: str, receiver_url: str) -> str:
    health = "".join(f'\n[targets.{b}.health_check]\njob = "check.toml"\nretry_s = {RETRY_S}\n'
                     f'retry_max_s = {RETRY_MAX_S}\nevery_s = {EVERY_CHECK_S}\n' for b in ("board0", "board1"))
    return bench_lab + health + f'\n[[notify]]\nwebhook = "{receiver_url}/night"\n'


def test_a_board_that_panics_at_every_boot_holds_no_suite(panio, tmp_path, receiver):
    from bench_agent.health.state import HealthStore, backoff_s
    from bench_agent.outage import BACKOFF_S
    from peerhelp import SHARED_REDIS, Workers, use_lab

    step_s = max(BACKOFF_S)  # a backoff step: the longest a healthy board may idle because of the bad one
    with sim_bench(panio, tmp_path / "sim", boards=2, booted=True) as bench:
        (tmp_path / "w").mkdir()
        workers = Workers(tmp_path / "w", SHARED_REDIS)
        lab = _lab(bench.lab.read_text(), receiver.url)
        use_lab(panio, workers)
        workers.lab.write_text(lab)
        job_file(tmp_path / "w", BOOT, "boot.toml")
        job_file(tmp_path / "w", CHECK, "check.toml")
        suite = job_file(tmp_path / "w", "name = 'night'\ntargets = ['board0', 'board1']\njobs = ['boot.toml']\n",
                         "night.toml")
        panio.env["PANIO_STATE_DIR"] = str(tmp_path / "w" / "wstate")  # the host's: its captures are the worker's
        serve = None
        workers.start("local", concurrency=2)
        try:
            panio("suite", "run", suite, timeout=180)  # both boards checked (good) and passing
            store, health = workers.store(), HealthStore(workers.env["PANIO_RESULTS_URL"])
            assert {t: r["health"] for t, r in health.all().items()} == {"board0": "good", "board1": "good"}
            sim("inject", "board1", "--dir", str(bench.dir), "--boot-line", PANIC, "--no-prompt", env=panio.env)
            fault_at = time.time()
            panio("schedule", "add", "night", "--suite", suite, "--every", f"{EVERY_S}s")
            log = tmp_path / "serve.log"
            serve = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=open(log, "w"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

            def checks() -> list[dict]:
                return [j for j in store.list_jobs(limit=1000, name="board-health")
                        if j["target"] == "board1" and j["created_at"] > fault_at]

            # board1's check failed, then two automatic re-checks (4 s, 8 s after), suites fired all along
            try:
                wait_for(lambda: len([j for j in checks() if j["state"] == "done"]) >= 3 or serve.poll() is not None,
                         timeout_s=150, every_s=0.5)
            finally:
                _dump(store, receiver, fault_at)
            assert serve.poll() is None, log.read_text()
            panio("schedule", "rm", "night")
            wait_for(lambda: not store.active_jobs(), timeout_s=90, every_s=0.5)
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(timeout=60) == 0, log.read_text()
        finally:
            if serve is not None and serve.poll() is None:
                stop(serve)
            workers.stop_all()

        jobs = {j["id"]: j for j in store.list_jobs(limit=1000)}
        posts = [b for p, b in receiver.posts if p == "/night"]
        # nothing lost or run twice: every job ended; board0's all passed, but for a slot that came while it still
        # ran the previous run's job (its health check first made it longer): that part skipped, never queued
        assert all(j["state"] == "done" for j in jobs.values())
        board0 = sorted((j for j in jobs.values() if j["target"] == "board0" and j["name"] == "boot"
                         and j["started_at"]), key=lambda j: j["started_at"])
        assert all((j["health"], j["result"]) == ("complete", "passed") for j in board0), board0
        busy0 = [j for j in jobs.values() if j["target"] == "board0" and j["name"] == "boot" and not j["started_at"]]
        assert all(j["result"] == "skipped" and BUSY in j["reason"] for j in busy0), busy0

        # each suite's verdict is sent once its healthy board is done, board1's part told as the board's
        suites = [b for b in posts if b["event"] == "suite_finished" and b["at"] > fault_at]
        assert len(suites) >= 3, posts
        for told in suites:
            part = {j["target"]: j for j in told["jobs"]}
            assert part["board0"]["fault"] is None or BUSY in part["board0"]["reason"], told
            assert part["board1"]["fault"] in ("board", "skipped"), told
            assert "board1" in told["verdict"] and "lab" not in told["verdict"], told["verdict"]
            if "is bad" in (part["board1"]["reason"] or "") or BUSY in (part["board1"]["reason"] or ""):
                # its part skipped at once (bad, or busy with the previous run's job): sent once board0 is done
                done0 = jobs[part["board0"]["id"]]["finished_at"]
                assert told["at"] - done0 <= step_s, (told["text"], told["at"] - done0)
        first = next(t for t in suites if {j["target"]: j for j in t["jobs"]}["board1"]["fault"] == "board")
        assert first["verdict"] == "the board failed on board1" and "on board1: failed (the board)" in first["text"], first
        assert "Kernel panic" in first["text"], first["text"]  # why: its triage's first divergent line
        skipped = [j for j in jobs.values() if j["target"] == "board1" and j["result"] == "skipped"]
        assert skipped and all("target board1 is bad (health check job" in j["reason"] or BUSY in j["reason"] or
                               "target board1 failed its health check" in j["reason"] for j in skipped), skipped
        for j in skipped:  # a bad or busy board's part of a suite ends at once: it waits for no worker slot, no lease
            if "is bad" in j["reason"] or BUSY in j["reason"]:
                assert j["finished_at"] - j["created_at"] <= 2.0, j
        failed = [b for b in posts if b["event"] == "job_failed" and b["target"] == "board1"]
        assert failed and failed[0]["fault"] == "board", posts
        # no board blamed for the lab, nor the lab for the board: the skipped parts are told as skipped
        assert {b["fault"] for b in posts if b["event"] == "job_incomplete"} == {"skipped"}, posts

        # board0 never idle longer than the schedule's period and a backoff step
        for a, b in zip(board0, board0[1:]):
            if a["finished_at"] > fault_at:
                assert b["started_at"] - a["finished_at"] <= EVERY_S + step_s, (a["id"], b["id"])

        # board1's re-checks: one at a time, its backoff doubled once a failed check
        ran = sorted((j for j in checks() if j["started_at"]), key=lambda j: j["started_at"])
        for a, b in zip(ran, ran[1:]):
            assert a["finished_at"] <= b["started_at"], (a, b)
        record = health.get("board1")
        assert record["health"] == "bad" and record["failures"] == len(ran), (record, len(ran))
        for n, (a, b) in enumerate(zip(ran, ran[1:]), start=1):
            assert b["started_at"] - a["finished_at"] >= backoff_s(n, {"retry_s": RETRY_S,
                                                                        "retry_max_s": RETRY_MAX_S}) - 0.5


def _dump(store, receiver, t0: float) -> None:
    """What happened (pytest shows it when the test fails)."""
    for j in sorted(store.list_jobs(limit=1000), key=lambda j: j["id"]):
        print(j["id"], j["name"], j["target"], j["state"], j["health"], j["result"],
              f"{j['started_at'] and round(j['started_at'] - t0, 1)}..{j['finished_at'] and round(j['finished_at'] - t0, 1)}",
              (j["reason"] or "")[:160])
    for p, b in receiver.posts:
        print(round(b["at"] - t0, 1), b["event"], b["text"][:300].replace("\n", " | "))
