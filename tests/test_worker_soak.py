"""Issue 27: a worker never restarted keeps its memory flat over many jobs (a bounded soak on real parts).

One real `panio worker` on the shared Redis runs 200 jobs (each a real step
through the job road, its lease, its results rows); its resident memory after
the first 50 (imports done, caches warm) and after all 200 may differ by
allocator noise, not by a per-job leak: 2 MiB over 150 jobs is ~14 KiB a job,
a tenth of what the compressed night saw (+5 MiB in 25 minutes).
"""

from __future__ import annotations

import subprocess
import sys

from jobhelp import job_file, wait_for
from peerhelp import SHARED_REDIS, Workers, drop_keys, worker_lab

BATCH, BATCHES = 50, 4
SUBMIT = ("import sys\nfrom pathlib import Path\nfrom controller.jobs import remote\nfrom controller.lab import load\n"
          "lab = load(Path(sys.argv[1]))\n"
          "for _ in range(int(sys.argv[3])):\n    print(remote.submit(Path(sys.argv[2]), lab, 't1')['job_id'])\n")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def test_a_workers_memory_does_not_grow_with_the_jobs_it_runs(panio, tmp_path):
    workers = Workers(tmp_path, SHARED_REDIS)
    worker_lab(panio, workers)
    job = job_file(tmp_path, "[[steps]]\nrun = 'ping ${target} --count 1'\n")
    try:
        worker = workers.start("h1")
        store, seen = workers.store(), []
        for _ in range(BATCHES):  # one process submits a batch: 50 `panio` start-ups would dominate the test
            out = subprocess.run([sys.executable, "-c", SUBMIT, str(workers.lab), job, str(BATCH)], env=panio.env,
                                 capture_output=True, text=True, timeout=300, check=True).stdout
            ids = [int(x) for x in out.split()]
            assert len(ids) == BATCH
            wait_for(lambda: all(store.job(i)["state"] == "done" for i in ids), timeout_s=600, every_s=0.5)
            assert worker.poll() is None, workers.logs()[-2000:]
            seen.append(rss_mib(worker.pid))
        assert all(store.job(i)["result"] == "passed" for i in ids)
        growth = seen[-1] - seen[0]
        print(f"worker RSS after each {BATCH} jobs (MiB): {[round(x, 1) for x in seen]}")
        assert growth < 2.0, f"the worker grew {growth:.1f} MiB over {BATCH * (BATCHES - 1)} jobs: {seen}"
    finally:
        workers.stop_all()
        drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])
