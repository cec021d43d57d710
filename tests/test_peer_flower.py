"""Flower, as a real process on loopback, sees panio's workers and tasks (issue 10, item 11).

The command is the one docs/monitoring.md gives operators:
``celery -A controller.jobs.monitor flower --address=127.0.0.1``, with workers
started as ``panio worker --events``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from jobhelp import job_file, stop_group, wait_for
from peerhelp import REDIS, PrivateRedis, Workers, free_port, worker_lab

pytest.importorskip("flower", reason="flower is in the test extra (pip install -e .[test])")
pytestmark = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed (scripts/system-deps.sh)")


def api(port: int, path: str):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return json.loads(r.read())
    except OSError:
        return None


def test_flower_lists_panio_workers_and_tasks(panio, tmp_path):
    redis = PrivateRedis(tmp_path)
    redis.start()
    workers = Workers(tmp_path, redis.url)
    worker_lab(panio, workers)
    port = free_port()
    flower = subprocess.Popen([sys.executable, "-m", "celery", "-A", "controller.jobs.monitor", "flower",
                               "--address=127.0.0.1", f"--port={port}"],
                              env={**panio.env, "FLOWER_UNAUTHENTICATED_API": "true"}, cwd=tmp_path,
                              stdout=open(tmp_path / "flower.log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        worker = workers.start("h1", "--events")
        wait_for(lambda: api(port, "/api/workers") is not None, timeout_s=60)
        r = panio("job", "run", job_file(tmp_path, "[[steps]]\nrun = 'ping ${target} --count 2'\n"), "--target", "t1",
                  "--deadline-s", "60")
        assert "complete, passed" in r.out
        name = wait_for(lambda: [n for n in api(port, "/api/workers?refresh=1") or {} if n.startswith("h1.")],
                        timeout_s=30, every_s=0.5)[0]
        assert name.startswith(f"h1.{worker.pid}@")
        tasks = wait_for(lambda: {k: t for k, t in (api(port, "/api/tasks") or {}).items()
                                  if t["name"] == "panio.run_job" and t["state"] == "SUCCESS"},
                         timeout_s=30, every_s=0.5)
        (task_id, task), = tasks.items()
        assert task_id == "panio-job-1" and task["worker"] == name
        assert "'health': 'complete'" in task["result"]
    finally:
        stop_group(flower, grace_s=10)
        workers.stop_all()
        redis.stop()
