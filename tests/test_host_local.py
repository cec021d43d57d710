"""`panio host add NAME --local` (issue 44 item 6): two control hosts on one machine without SSH or Ansible. Each
gets a state directory and a key pair exchanged with the controller's; its worker reads the controller's lab file
itself, so a target added after the workers started runs on its host with no host file regenerated. Real workers,
real Redis, real signing."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import uuid

from conftest import PANIO
from jobhelp import job_file, wait_for

JOB = "name = 'hello'\n[[steps]]\nname = 'ping it'\nrun = 'ping ${target} --count 1'\n"


def test_two_local_hosts_run_their_targets_jobs_and_follow_lab_edits(panio, tmp_path):
    panio.env.update(PANIO_BROKER="redis://127.0.0.1:6379/7", PANIO_REDIS_PREFIX=f"hl{uuid.uuid4().hex[:8]}:",
                     PANIO_RESULTS_URL=f"sqlite:///{tmp_path / 'results.db'}")
    panio("init")
    assert panio.fails("host", "add", "bench1", code=2).error["error"] == "usage"  # --ssh or --local
    commands = {}
    for host in ("bench1", "bench2"):
        done = panio("host", "add", host, "--local", "--json").json()
        assert done["state_dir"].endswith(f"hosts/{host}") and os.path.isfile(done["cert"])
        commands[host] = done["worker"]
    assert "transport = \"celery\"" in panio.lab.read_text()
    panio("target", "add", "t1", "--host", "bench1")
    workers = []
    try:
        for host, line in commands.items():
            words = shlex.split(line)
            env = {**panio.env, **dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))}
            argv = [PANIO, *[w for w in words if "=" not in w or w.startswith("-")][1:], "--concurrency", "1"]
            log = tmp_path / f"{host}.log"
            workers.append(subprocess.Popen(argv, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                            start_new_session=True))
            wait_for(lambda: "ready." in log.read_text() or workers[-1].poll() is not None, timeout_s=60)
            assert workers[-1].poll() is None, log.read_text()
        job = job_file(tmp_path, JOB)
        first = panio("job", "run", job, "--target", "t1", "--json", timeout=120).json()
        assert first["result"] == "passed" and first["host"] == "bench1", first
        panio("target", "add", "t2", "--host", "bench2")  # after the workers started: no file to regenerate
        second = panio("job", "run", job, "--target", "t2", "--json", timeout=120).json()
        assert second["result"] == "passed" and second["host"] == "bench2", second
        assert "bench2" in second["worker"]
    finally:
        for proc in workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in workers:
            proc.wait(timeout=30)
