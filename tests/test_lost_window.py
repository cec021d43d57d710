"""A job whose runner died keeps its serial window, kept by the reconciler that settles it, never by a reader.

Here the host's own worker settles it: a real worker killed (-9) mid-job, a second worker of the same host started;
its reconciler finds the job's runner dead, settles it "worker lost" and keeps what the target's capture (a real
supervisor on a simulated board) logged over the job's window as the job's ``serial-console.log``."""

from __future__ import annotations

import json
import subprocess
import uuid

from conftest import PANIO
from jobhelp import dying_job, job_file, wait_for
from peerhelp import Workers, drop_keys
from simbench import sim_bench

REDIS_URL = "redis://127.0.0.1:6379/7"
MARKER = "lost-" + uuid.uuid4().hex[:8]
JOB = dying_job(MARKER)


def test_the_hosts_worker_that_settles_a_dead_runners_job_keeps_its_serial_window(panio, tmp_path):
    with sim_bench(panio, tmp_path / "sim", booted=True) as bench:
        workers = Workers(tmp_path / "w", REDIS_URL)
        (tmp_path / "w").mkdir()
        workers.lab.write_text(bench.lab.read_text())  # board0, on this machine (host "local")
        here = {**panio.env, "PANIO_STATE_DIR": str(tmp_path / "w" / "wstate"), "PANIO_LAB": str(workers.lab)}
        try:
            subprocess.run([PANIO, "serial", "watch", "board0"], env=here, check=True, capture_output=True,
                           timeout=60)
            first = workers.start("local", concurrency=1)
            job = json.loads(subprocess.run([PANIO, "job", "submit", job_file(tmp_path, JOB), "--target", "board0",
                                             "--json"], env={**here, **workers.env}, check=True, capture_output=True,
                                            text=True, timeout=60).stdout)["job_id"]
            store = workers.store()
            wait_for(lambda: len(store.job(job)["steps"]) >= 2, timeout_s=60)
            workers.kill(first)  # the runner dies mid-job: it saves no serial window
            assert not [n for n in store.list_artifacts(job) if n.startswith("serial-")]
            workers.start("local", concurrency=1)  # the host's worker again: its reconciler settles the job
            done = wait_for(lambda: (j := store.job(job))["state"] == "done" and j, timeout_s=60)
            assert done["health"] == "incomplete" and "lost" in done["reason"], done
            kept = wait_for(lambda: store.list_artifacts(job).get("serial-console.log"), timeout_s=30)
            assert f"echo {MARKER}" in kept and MARKER in kept.split(f"echo {MARKER}", 1)[1], kept
        finally:
            workers.stop_all()
            drop_keys(REDIS_URL, workers.env["PANIO_REDIS_PREFIX"])
            subprocess.run([PANIO, "serial", "stop", "board0"], env=here, capture_output=True, timeout=60)
