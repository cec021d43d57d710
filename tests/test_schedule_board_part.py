"""Issue 43: a board with several jobs in a schedule's run is busy until all of them are done.

docs/jobs.md ("Schedules"): a slot that comes while the schedule's previous run is still going fires on the boards
whose part of it is done; a board still running a job of the previous run is not given a second one. A board's
part is all of its jobs in that run: one done and the next still running is not done (else the next run's
jobs would run beside the previous run's on the board, and a board slower than its schedule would pile up runs).

A real `panio schedule serve` (no broker: the suites run in its process) fires a suite of two jobs (``quick``,
then ``hold``) over pico and qemu every second. pico's ``hold`` action waits for the test's ``go`` file, so
pico's first run stays on its second job, its first one done, over several slots; qemu's actions end at once.
"""

from __future__ import annotations

import re
import signal
import subprocess

from conftest import PANIO
from jobhelp import fixture_lab, job_file, stop, wait_for

QUICK = "name = 'quick'\n[[steps]]\nrun = 'ping ${target}'\nexpect_output = '${target} \\(local\\)'\n"
HOLD = "name = 'hold'\n[[steps]]\nrun = 'action run ${target} hold'\ntimeout_s = 300\n"


def test_a_board_is_busy_until_all_its_jobs_of_the_previous_run_are_done(panio, tmp_path):
    from bench_agent.results.store import ResultStore

    fixture_lab(panio)
    url = f"sqlite:///{tmp_path / 'results.db'}"
    panio.env["PANIO_RESULTS_URL"] = url
    go = tmp_path / "go"
    hold = tmp_path / "hold.sh"
    hold.write_text(f"#!/bin/sh\nwhile [ ! -e {go} ]; do sleep 0.05; done\n")
    hold.chmod(0o755)
    panio("action", "add", "hold", "-t", "pico", "--command", str(hold))
    panio("action", "add", "hold", "-t", "qemu", "--command", "true")
    job_file(tmp_path, QUICK, "quick.toml")
    job_file(tmp_path, HOLD, "hold.toml")
    suite = job_file(tmp_path, "name = 'night'\ntargets = ['pico', 'qemu']\njobs = ['quick.toml', 'hold.toml']\n",
                     "night.toml")
    panio("schedule", "add", "night", "--suite", suite, "--every", "1s")
    log = tmp_path / "serve.log"
    serve = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=open(log, "w"),
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    store = ResultStore(url)

    def on(target: str, **what) -> list[dict]:
        return [j for j in store.list_jobs(limit=1000)
                if j["target"] == target and all(j[k] == v for k, v in what.items())]

    try:
        # pico's part of three later runs skipped while its first run's hold job runs (its quick job done)
        wait_for(lambda: len(on("pico", result="skipped")) >= 6 or serve.poll() is not None, timeout_s=90,
                 every_s=0.5)
        assert serve.poll() is None, log.read_text()
        go.touch()
        # pico's part of a later run runs once its first run's jobs are all done
        wait_for(lambda: len(on("pico", result="passed")) >= 4 or serve.poll() is not None, timeout_s=90,
                 every_s=0.5)
        serve.send_signal(signal.SIGTERM)  # stops firing; waits for the runs still going
        assert serve.wait(timeout=90) == 0, log.read_text()
    finally:
        go.touch()
        if serve.poll() is None:
            stop(serve)

    jobs = sorted(store.list_jobs(limit=1000), key=lambda j: j["id"])
    text = log.read_text()
    for j in jobs:  # what happened (pytest shows it when the test fails)
        print(j["id"], j["name"], j["target"], j["state"], j["result"], round(j["created_at"] % 1000, 2),
              j["started_at"] and round(j["started_at"] % 1000, 2),
              j["finished_at"] and round(j["finished_at"] % 1000, 2), j["reason"])
    print(text)
    assert all(j["state"] == "done" for j in jobs)
    by_id = {j["id"]: j for j in jobs}
    ran_on_pico = [j for j in jobs if j["target"] == "pico" and j["started_at"]]
    quick, first_hold = ran_on_pico[:2]
    assert (quick["name"], first_hold["name"]) == ("quick", "hold")
    skipped = [j for j in jobs if j["target"] == "pico" and j["result"] == "skipped"]
    assert len(skipped) >= 6 and len(skipped) % 2 == 0, skipped  # a run's part is skipped whole: both its jobs
    for j in skipped:
        m = re.fullmatch(r"target pico (?:is still running job (\d+)|has job (\d+) of the previous run still "
                         r"queued|was busy with job (\d+))(?: of the previous run)?", j["reason"])  # as it was then
        assert m, j
        held = by_id[int(m.group(1) or m.group(2) or m.group(3))]
        # the board's quick job of that run was done when the slot fired; its hold job was not
        assert (held["target"], held["name"]) == ("pico", "hold"), (j, held)
        done = [x for x in ran_on_pico if x["name"] == "quick" and x["id"] < held["id"]][-1]
        assert done["finished_at"] < j["created_at"] <= held["finished_at"] + 2, (j, done, held)
    # pico never had two jobs at once, and its next run's jobs came only after its whole part was done
    for a, b in zip(ran_on_pico, ran_on_pico[1:]):
        assert a["finished_at"] <= b["started_at"], (a["id"], b["id"])
    assert len(ran_on_pico) >= 4 and all(j["result"] == "passed" for j in ran_on_pico), ran_on_pico
    # qemu's part of the runs that skipped pico's ran: the slot was not skipped for pico's sake
    qemu = [j for j in jobs if j["target"] == "qemu" and j["result"] == "passed"]
    assert any(abs(q["created_at"] - j["created_at"]) < 0.5 for j in skipped for q in qemu), (skipped, qemu)
    assert (f"pico skipped: pico is still running job {first_hold['id']} of the previous run" in text
            or f"pico skipped: pico has job {first_hold['id']} of the previous run still queued" in text), text
