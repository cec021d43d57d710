"""Issue 43: a healthy board on the same host as a slow (here, panicking) board keeps getting its jobs.

A simulated bench of two boards, a real ``panio worker`` serving both with two threads, the machine's Redis as
broker and lease store, a results database (SQLite). board1 panics at every boot, so each of its jobs waits out
its boot timeout (~13 s). Three jobs are queued for board1, then one for board0. Before, the second board1 job
waited for the lease in the worker's other thread and the third sat in the queue ahead of board0's: board0's
job started only when a board1 job ended (13-26 s later). Now the jobs behind a target's running job wait in that
target's line without a thread: board0's job starts at once. Asserted too: board1's jobs ran one after the
other, each once, in the order they came, each as the board's failure (none 'lease not obtained'); and a worker
stopped (SIGTERM) while jobs wait in a line sends them back to the queue at once instead of running them first:
it exits with its running job, and a worker started after it runs them.
"""

from __future__ import annotations

import os
import signal
import subprocess

from conftest import PANIO
from jobhelp import job_file, stop, wait_for
from simbench import boot_job, sim, sim_bench

SLOW = boot_job(12000, 20)
PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
START_BOUND_S = 6.0  # the broker's hop, a loaded machine; a board1 job takes ~13 s


def test_a_healthy_board_is_not_held_behind_a_slow_boards_jobs(panio, tmp_path):
    from peerhelp import SHARED_REDIS, Workers, use_lab

    with sim_bench(panio, tmp_path / "sim", boards=2, booted=True) as bench:
        (tmp_path / "w").mkdir()
        workers = Workers(tmp_path / "w", SHARED_REDIS)
        use_lab(panio, workers)
        workers.lab.write_text(bench.lab.read_text())
        boot = job_file(tmp_path / "w", SLOW, "boot.toml")
        panio.env["PANIO_STATE_DIR"] = str(tmp_path / "w" / "wstate")  # the host's: its captures are the worker's
        first = workers.start("local", concurrency=2)
        runs: list[subprocess.Popen] = []
        try:
            store = workers.store()
            sim("inject", "board1", "--dir", str(bench.dir), "--boot-line", PANIC, "--no-prompt", env=panio.env)

            def jobs(target: str) -> list[dict]:
                return sorted((j for j in store.list_jobs(limit=100) if j["target"] == target), key=lambda j: j["id"])

            def submit(target: str, count: int) -> None:
                runs.append(subprocess.Popen([PANIO, "job", "run", boot, "--target", target], env=panio.env,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             stdin=subprocess.DEVNULL, start_new_session=True))
                wait_for(lambda: len(jobs(target)) >= count, timeout_s=30)  # queued in this order

            for n in range(1, 4):
                submit("board1", n)
            # the first board1 job runs and the second waits for its lease: the worker's two threads, before
            wait_for(lambda: any(j["started_at"] for j in jobs("board1")), timeout_s=30)
            submit("board0", 1)
            (healthy,) = jobs("board0")
            wait_for(lambda: store.job(healthy["id"])["started_at"] is not None, timeout_s=60, every_s=0.2)
            healthy = store.job(healthy["id"])
            started_after = healthy["started_at"] - healthy["created_at"]
            busy = [j for j in jobs("board1") if j["state"] != "done"]
            # stopped while a board1 job runs and another waits in line: that one goes back to the queue at once
            wait_for(lambda: store.job(healthy["id"])["state"] == "done", timeout_s=30)
            os.killpg(first.pid, signal.SIGTERM)
            first.wait(timeout=40)  # its running job's boot wait (~13 s), not the ones in line too
            stopped = first.log.read_text()
            back = [j for j in jobs("board1") if f"job {j['id']}: sent back to the queue" in stopped]
            assert back and all(store.job(j["id"])["state"] == "queued" for j in back), stopped
            # what Celery still delivers as the worker stops (a job it just sent back) goes back too, not in line
            after = stopped[stopped.index(": sent back to the queue"):]
            assert "line (" not in after and "leased board1" not in after, after
            workers.start("local", concurrency=2)
            # all of board1's jobs are done within their boot waits, one after the other
            wait_for(lambda: all(r.poll() is not None for r in runs), timeout_s=120, every_s=0.5)
        finally:
            for r in runs:
                if r.poll() is None:
                    stop(r)
            workers.stop_all()

        slow = jobs("board1")
        for j in [*slow, store.job(healthy["id"])]:  # what happened (pytest shows it when the test fails)
            print(j["id"], j["target"], j["state"], j["health"], j["result"], round(j["created_at"] % 1000, 1),
                  j["started_at"] and round(j["started_at"] % 1000, 1),
                  j["finished_at"] and round(j["finished_at"] % 1000, 1), j["reason"])
        print(workers.logs()[-6000:])
        assert started_after <= START_BOUND_S, started_after
        assert len(busy) >= 2, busy  # board1 was still busy with queued jobs when board0's started
        assert store.job(healthy["id"])["result"] == "passed"
        assert [j["result"] for j in slow] == ["failed"] * 3, slow  # the board's failure, not 'lease not obtained'
        ran = sorted(slow, key=lambda j: j["started_at"])  # one at a time (the jobs a stopping worker hands back
        for a, b in zip(ran, ran[1:]):  # may reach the next worker in another order)
            assert a["finished_at"] <= b["started_at"], (a["id"], b["id"])
        logs = workers.logs()
        for j in slow:  # each ran once, its log lines under its own task id (not the job's before it in line)
            assert logs.count(f"job {j['id']}: leased board1, running") == 1, j["id"]
            lines = [line for line in logs.splitlines() if f"job {j['id']}: " in line and "run_job[" in line]
            assert lines and all(f"[panio-job-{j['id']}" in line for line in lines), lines
