"""Issue 43: a slow (here, panicking) board does not make its schedule skip whole slots.

A simulated bench of two boards (``panio-sim up``), a real ``panio worker`` serving both, the machine's Redis
as broker and lease store, a results database (SQLite), a real ``panio schedule serve`` firing a suite over
both boards every few seconds, and a webhook receiver. board1 panics at every boot, so each of its jobs waits
out its boot timeout, far longer than the schedule's period. Asserted: board0's jobs keep coming at the
schedule's pace while board1 is busy; board1 never has two jobs at once, its part of a slot that comes while
it still runs the previous run's job ends skipped at once saying so; the scheduler's log says it in one line;
the suite's verdict counts that part as skipped; ``schedule list`` gives the last run's jobs.
"""

from __future__ import annotations

import re
import signal
import subprocess

from conftest import PANIO
from jobhelp import job_file, stop, wait_for
from simbench import boot_job, sim, sim_bench

SLOW = boot_job(12000, 20)
PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
EVERY_S = 4
SLACK_S = 2.5  # the scheduler's tick, the broker's hop, a loaded machine; board1's jobs take ~13 s


def test_a_slow_board_does_not_make_its_schedule_skip_slots(panio, tmp_path, receiver):
    from peerhelp import SHARED_REDIS, Workers, use_lab

    with sim_bench(panio, tmp_path / "sim", boards=2, booted=True) as bench:
        (tmp_path / "w").mkdir()
        workers = Workers(tmp_path / "w", SHARED_REDIS)
        lab = bench.lab.read_text() + f'\n[[notify]]\nwebhook = "{receiver.url}/night"\n'
        use_lab(panio, workers)
        workers.lab.write_text(lab)
        job_file(tmp_path / "w", SLOW, "boot.toml")
        suite = job_file(tmp_path / "w", "name = 'night'\ntargets = ['board0', 'board1']\njobs = ['boot.toml']\n",
                         "night.toml")
        panio.env["PANIO_STATE_DIR"] = str(tmp_path / "w" / "wstate")  # the host's: its captures are the worker's
        serve = None
        workers.start("local", concurrency=2)
        log = tmp_path / "serve.log"
        try:
            store = workers.store()
            sim("inject", "board1", "--dir", str(bench.dir), "--boot-line", PANIC, "--no-prompt", env=panio.env)
            panio("schedule", "add", "night", "--suite", suite, "--every", f"{EVERY_S}s")
            serve = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=open(log, "w"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

            def ran(target: str) -> list[dict]:
                return [j for j in store.list_jobs(limit=1000) if j["target"] == target and j["started_at"]]

            # board1's third slow job has started: two of its runs overlapped the next slots
            wait_for(lambda: len(ran("board1")) >= 3 or serve.poll() is not None, timeout_s=120, every_s=0.5)
            assert serve.poll() is None, log.read_text()
            serve.send_signal(signal.SIGTERM)  # stops firing; waits for the runs still going
            assert serve.wait(timeout=90) == 0, log.read_text()
            listed = panio("schedule", "list", "--json").json()
        finally:
            if serve is not None and serve.poll() is None:
                stop(serve)
            workers.stop_all()

        jobs = sorted(store.list_jobs(limit=1000), key=lambda j: j["id"])
        text = log.read_text()
        for j in jobs:  # what happened (pytest shows it when the test fails)
            print(j["id"], j["target"], j["state"], j["health"], j["result"], round(j["created_at"] % 1000, 1),
                  j["started_at"] and round(j["started_at"] % 1000, 1),
                  j["finished_at"] and round(j["finished_at"] % 1000, 1), j["reason"])
        print(text)
        assert all(j["state"] == "done" for j in jobs)
        board0 = [j for j in jobs if j["target"] == "board0" and j["started_at"]]
        board1 = [j for j in jobs if j["target"] == "board1" and j["started_at"]]
        assert all((j["health"], j["result"]) == ("complete", "passed") for j in board0), board0
        assert all(j["result"] == "failed" for j in board1), board1

        # board0's jobs keep coming at the schedule's pace while board1 is busy (the old scheduler skipped every
        # slot until board1's job ended: board0 idled ~10 s a run)
        for a, b in zip(board0, board0[1:]):
            assert b["started_at"] - a["finished_at"] <= EVERY_S + SLACK_S, (a["id"], b["id"])
        assert len(board0) >= 2 * len(board1), (len(board0), len(board1))

        # board1 never has two jobs at once; a slot that comes while it runs one skips its part, at once, naming it
        for a, b in zip(board1, board1[1:]):
            assert a["finished_at"] <= b["started_at"], (a["id"], b["id"])
        by_id = {j["id"]: j for j in jobs}
        skipped = [j for j in jobs if j["target"] == "board1" and j["result"] == "skipped"]
        assert skipped
        for j in skipped:
            # running, or queued (between two of its jobs, or waiting for its lease), as the database said then
            m = re.fullmatch(r"target board1 (?:is still running job (\d+)|has job (\d+) of the previous run still "
                             r"queued|was busy with job (\d+))(?: of the previous run)?", j["reason"])
            assert m, j
            held = by_id[int(m.group(1) or m.group(2) or m.group(3))]
            # busy when the slot fired (read a moment before its jobs were recorded)
            assert held["target"] == "board1" and held["created_at"] < j["created_at"] <= held["finished_at"] + 2, j
            assert j["finished_at"] - j["created_at"] <= 2.0, j
            lines = [f"board1 skipped: board1 is still running job {held['id']} of the previous run",
                     f"board1 skipped: board1 has job {held['id']} of the previous run still queued"]
            assert any(line in x and "schedule night: running" in x for x in text.splitlines() for line in lines), lines

        # the suite's verdict: board0's part passed, board1's skipped
        verdicts = [b["verdict"] for p, b in receiver.posts if p == "/night" and b["event"] == "suite_finished"]
        assert "passed; 1 skipped on board1" in verdicts, verdicts
        assert not [v for v in verdicts if v.startswith("nothing ran")], verdicts  # every board busy: slot skipped
        # the schedule's record: the last run's jobs (runs overlap; an earlier one ending later does not win)
        (night,) = listed
        last = [j["id"] for j in jobs[-2:]]  # a run is recorded in one commit, one job a board
        assert sorted(night["last_jobs"]) == sorted(last), (night, last)
        assert "previous run still going; this slot is skipped" not in text
