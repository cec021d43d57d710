"""A job whose runner died keeps what the target's capture logged over its window (issue 44 item 3): its serial
page reads the capture on the host instead of saying nothing was captured, and keeps it as the job's artifact."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid

from conftest import PANIO
from dashhelp import Client, DashboardProc, signed_in, tokened
from jobhelp import dying_job, job_file, wait_for

MARKER = "dead-" + uuid.uuid4().hex[:8]
READ = "read-" + uuid.uuid4().hex
JOB = dying_job(MARKER)


def _dead_runner(panio, tmp_path):
    """Job 1 on board0, its runner killed mid-job (it saves no serial window); the results store."""
    from bench_agent.results.store import ResultStore

    runner = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, JOB), "--target", "board0"], env=panio.env,
                              stdout=open(tmp_path / "job.out", "w"), stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    store = ResultStore(f"sqlite:///{panio.env['PANIO_STATE_DIR']}/results.db")
    try:
        wait_for(lambda: len(store.job(1)["steps"]) >= 2 if store.state(1) else False, timeout_s=60)
    finally:
        os.killpg(runner.pid, signal.SIGKILL)  # the runner dies mid-job: it saves no serial window
        runner.wait(timeout=10)
    assert not [n for n in store.list_artifacts(1) if n.startswith("serial-")]
    return store


def test_a_dead_runners_job_shows_and_keeps_what_the_capture_logged(panio, sim_bench, tmp_path):
    store = _dead_runner(panio, tmp_path)
    dashboard = DashboardProc(panio.env, tmp_path / "dashboard.log")
    try:
        c = Client(dashboard.url)
        wait_for(lambda: "lost" in c.get("/jobs/1")[2], timeout_s=30)  # settled once its lease expired
        kept = store.list_artifacts(1)["serial-console.log"]  # kept as it was settled: the capture may rotate it
        assert MARKER in kept
        page = c.get("/jobs/1/serial")[2]
        assert "its runner saved none (it died)" in page and f"echo {MARKER}" in page, page
        assert "nothing was captured" not in page
    finally:
        dashboard.stop()


def _rows(store) -> list[str]:
    """Every row of the results database (not its schema: a dashboard creates the tables it reads at start)."""
    with store.engine.connect() as c:
        return sorted(line for line in c.connection.driver_connection.iterdump() if line.startswith("INSERT"))


def test_a_get_of_a_dead_runners_job_changes_no_row(panio, sim_bench, tmp_path):
    """A GET changes nothing (crawlers, prefetch, a reader's token): the page reads the capture's window of a
    settled job whose window was not kept (say its host's worker settled it), and writes none of it."""
    store = _dead_runner(panio, tmp_path)
    wait_for(lambda: panio("job", "status", "1", "--json").json()["state"] == "done", timeout_s=30)  # settled
    with store.engine.begin() as c:  # as when its host was out of reach as it was settled: no window kept
        c.exec_driver_sql("DELETE FROM panio_artifacts WHERE name LIKE 'serial-%'")
    before = _rows(store)
    dashboard = tokened(panio.env, tmp_path / "dashboard.log", "op-" + uuid.uuid4().hex, READ)
    try:
        reader = signed_in(dashboard, READ)
        for path in ("/jobs/1", "/jobs/1/serial", "/jobs/1/serial?iface=console", "/jobs/1/live", "/jobs/1/serial/live",
                     "/jobs/1/triage"):
            reader.get(path)
            reader.get(path, **{"HX-Request": "true"})
        page = reader.get("/jobs/1/serial")[2]
        assert "its runner saved none (it died)" in page and f"echo {MARKER}" in page, page  # shown as before
        assert _rows(store) == before  # and not one row written
    finally:
        dashboard.stop()
