"""A small run of the scale harness (benchmarks/scale.py): 3 control hosts x 2 boards, real workers, a real
scheduler, dashboard and Redis, for one minute of schedules firing every 20 s; nothing lost, run twice or
overlapping, no per-job key left in Redis, and CPU time recorded by kind of process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_small_lab_under_schedules_loses_nothing_runs_nothing_twice_and_leaves_no_job_key(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--hosts", "3", "--boards", "2",
                        "--minutes", "1", "--every", "20", "--idle-after-s", "5", "--json"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["boards"] == 6 and out["fires"] >= 4  # two schedules, every 20 s, for a minute
    assert out["jobs"] >= 12 and out["done"] == out["jobs"], out  # each fire: a job on each of the 6 boards
    assert (out["lost"], out["run_twice"], out["overlapping_leases"]) == (0, 0, 0), out
    assert out["markers_seen"] == out["jobs"]  # every job's run is on its board's console, each once
    assert out["redis_per_job_keys"] == 0, out["redis_per_job_key_examples"]
    shapes = out["redis_key_shapes"]
    assert not any("lease:board" in k for k in shapes), shapes  # every board's lease released
    assert shapes.get("scale:lab:<LAB>:fence:board<N>") == 6, shapes  # what stays: one fencing counter a board
    for key in ("queue_wait_p99_s", "fire_jitter_p99_s", "jobs_per_s", "dashboard_p50_s", "job_list_p50_s"):
        assert out[key] is not None and out[key] >= 0, key
    cpu = out["cpu_s_per_job"]  # CPU seconds a job by kind of process: each kind that did work spent some
    for kind in ("worker", "hooks", "supervisor", "sim", "scheduler", "dashboard", "redis", "job_list"):
        assert cpu.get(kind, 0) > 0, (kind, cpu)
    assert out["cpu_jobs"] > 0 and set(out["cpu_s_per_job_net"]) == set(cpu), out["cpu_s_per_job_net"]
    assert all(v >= 0 for v in [*out["idle_cpu_s_per_s"].values(), *out["idle_after_cpu_s_per_s"].values()])
