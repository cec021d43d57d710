"""A job whose runner died keeps what the target's capture logged over its window (issue 44 item 3): its serial
page reads the capture on the host instead of saying nothing was captured, and keeps it as the job's artifact."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid

from conftest import PANIO
from dashhelp import Client, DashboardProc
from jobhelp import job_file, wait_for

MARKER = "dead-" + uuid.uuid4().hex[:8]
JOB = f"""name = "dies"
lease_ttl_s = 2
[[steps]]
name = "say"
run = "panio serial transact ${{target}} 'echo {MARKER}' --until 'root@sim:~# ' --timeout-ms 10000"
expect_output = "{MARKER}"
[[steps]]
name = "long ping"
run = "panio ping ${{target}} --count 2000 --interval 0.05"
"""


def test_a_dead_runners_job_shows_and_keeps_what_the_capture_logged(panio, sim_bench, tmp_path):
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
    dashboard = DashboardProc(panio.env, tmp_path / "dashboard.log")
    try:
        c = Client(dashboard.url)
        wait_for(lambda: "lost" in c.get("/jobs/1")[2], timeout_s=30)  # settled once its lease expired
        page = c.get("/jobs/1/serial")[2]
        assert "its runner saved none (it died)" in page and f"echo {MARKER}" in page, page
        assert "nothing was captured" not in page
        kept = store.list_artifacts(1)["serial-console.log"]  # kept: the capture may rotate it away later
        assert MARKER in kept
    finally:
        dashboard.stop()
