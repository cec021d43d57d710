"""What an operator waits for on a long history: `panio job list`, `job status`, every dashboard page, pruning.

Against a results database seeded with a long history (``benchmarks/seed_history.py``, a million jobs for
docs/scale.md) and, alternating with it round by round (ABAB), the same commands and pages against an
empty database of the same engine (a file beside; on PostgreSQL a database made for the run and dropped
after it) with the same lab (1,000 boards on 100 hosts) and broker: like with like, so the paired ratio is
what the history costs on top of panio's own start-up and rendering. Beside each wall time, the CPU time
it took (the command's own process; the dashboard server's for a page), which the load of a shared
machine inflates far less. Each figure is the median
of its rounds, printed with the load average and the goal (met / NOT met); the ratio is the median of
the paired ratios.

- ``panio job list`` (the default page) and ``panio job status ID`` are timed as a user runs them: a new
  process each, wall time (the figure and its goal), and its CPU time (user + system), which the load of a
  shared machine does not inflate.
- Dashboard pages over HTTP from one ``panio dashboard`` per database: ``/`` (hosts, 1,000 targets with
  their last job, the queue), ``/jobs``, ``/jobs`` filtered (a target; incomplete jobs), a job, its serial
  log, its triage (the last pass of its name compared), an artifact, ``/queue``, ``/schedules``.
- ``--prune`` (changes the database: the oldest month goes): retention of everything older than
  ``--days`` minus 30 days runs while a writer records a 5-step job every 20 ms as a runner does; the
  longest wait of a write is the figure (goal: never above 1 s).

Run: .venv/bin/python benchmarks/history_scale.py --results postgresql://postgres@127.0.0.1/panio_scale [--prune]
Needs /usr/bin/redis-server (a private one on a free loopback port: the broker and lease store).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's real-peer helpers
sys.path.insert(0, str(ROOT))

import _bench  # noqa: E402  (benchmarks/: the environment as installed)
import _history  # noqa: E402  (benchmarks/: --results, --days, the newest job)
import keyhelp  # noqa: E402
from dashhelp import DashboardProc  # noqa: E402
from peerhelp import PrivateRedis  # noqa: E402

BIN = Path(sys.executable).parent
PANIO = str(BIN / "panio")
GOALS_S = {"job list": 0.3, "job status": 0.15, "page": 0.3, "prune write wait": 1.0}


def write_lab(path: Path, hosts: int, boards: int) -> None:
    lines = []
    for h in range(hosts):
        lines += [f"[hosts.host-{h:03d}]", f'ssh = "ops@host-{h:03d}.invalid"', 'transport = "celery"', ""]
    for b in range(hosts * boards):
        lines += [f"[targets.board-{b:04d}]", f'host = "host-{b % hosts:03d}"', f'tags = ["t{b % 10}"]', ""]
    path.write_text("\n".join(lines))


CPU_S: dict[str, list[float]] = {}  # command -> the CPU time (user + system) of each run: what the load does not inflate


def timed_run(name: str, argv: list[str], env: dict) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    took = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_S.setdefault(name, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return took


def timed_get(name: str, url: str, pid: int) -> float:
    before = process_cpu_s(pid)
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
        assert r.status == 200, (url, r.status)
    took = time.monotonic() - t0
    CPU_S.setdefault(name, []).append(process_cpu_s(pid) - before)
    return took


def process_cpu_s(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used, in clock ticks' resolution (10 ms: a page's
    figure is the mean of its rounds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="panio-history-"))
    redis = PrivateRedis(work)
    redis.start()
    lab = work / "lab.toml"
    write_lab(lab, 100, 10)
    empty_url = _history.empty_like(args.results, work)  # the same engine with no history: like with like
    from bench_agent.results.store import ResultStore

    empty = ResultStore(empty_url)  # one job, so `job status` has something to show on both sides
    empty_id = empty.create_job("nightly-smoke", "board-0007", "host-007", {"steps": []})
    empty.finish(empty_id, "complete", "passed")
    empty.add_artifact(empty_id, "serial-console.log", "root@sim:~# uname -a\n")  # as each seeded job has
    from controller.jobs.overrides import OverrideStore

    for url in (args.results, empty_url):
        OverrideStore(url)  # its table, as the first `panio job status` (or override) makes it
    sides = {"history": (args.results, _history.newest_job(args.results) - 1000), "empty": (empty_url, empty_id)}
    envs, dashboards = {}, {}
    compiled = _bench.byte_compiled_env()  # as installed: byte code read, not compiled by every command
    try:
        for side, (url, _) in sides.items():
            envs[side] = {**compiled, "PANIO_LAB": str(lab), "PANIO_STATE_DIR": str(work / f"state-{side}"),
                          "PANIO_RESULTS_URL": url, "PANIO_BROKER": redis.url, "PANIO_REDIS_PREFIX": "hist:",
                          **keyhelp.controller_env()}
            envs[side].pop("PANIO_DASHBOARD_TOKEN", None)
            dashboards[side] = DashboardProc(envs[side], work / f"dashboard-{side}.log")
        samples: dict[str, dict[str, list[float]]] = {"history": {}, "empty": {}}
        loads = []
        for round_ in range(args.rounds + 1):  # the first warms both sides up (templates, caches) and is dropped
            for side in ("history", "empty"):
                url, job_id = sides[side]
                env, base, pid = envs[side], dashboards[side].url, dashboards[side].proc.pid
                checks = {
                    "job list": lambda: timed_run(f"job list {side}", [PANIO, "job", "list"], env),
                    "job status": lambda: timed_run(f"job status {side}", [PANIO, "job", "status", str(job_id)], env),
                    "page /": "/",
                    "page /jobs": "/jobs",
                    "page /jobs?target=": "/jobs?target=board-0007",
                    "page /jobs?health=incomplete": "/jobs?health=incomplete",
                    "page /jobs/ID": f"/jobs/{job_id}",
                    "page /jobs/ID/serial": f"/jobs/{job_id}/serial",
                    "page /jobs/ID/triage": f"/jobs/{job_id}/triage",
                    "page /jobs/ID/artifacts/NAME": f"/jobs/{job_id}/artifacts/serial-console.log",
                    "page /queue": "/queue",
                    "page /schedules": "/schedules",
                }
                for name, check in checks.items():
                    took = timed_get(f"{name} {side}", base + check, pid) if isinstance(check, str) else check()
                    samples[side].setdefault(name, []).append(took)
            if round_ == 0:
                samples = {"history": {}, "empty": {}}
                CPU_S.clear()
                continue
            loads.append(os.getloadavg()[0])
        out = {}
        for name in samples["history"]:
            h, e = samples["history"][name], samples["empty"][name]
            goal = GOALS_S["page"] if name.startswith("page") else GOALS_S[name]
            out[name] = {"median_s": statistics.median(h), "empty_median_s": statistics.median(e),
                         "ratio": statistics.median(a / b for a, b in zip(h, e)), "goal_s": goal,
                         "met": statistics.median(h) <= goal}
            cpu = CPU_S[f"{name} history"]  # a command's own: its median; a page's: the mean (10 ms ticks)
            out[name]["cpu_s"] = statistics.fmean(cpu) if name.startswith("page") else statistics.median(cpu)
        out["load"] = statistics.median(loads)
        if args.prune:
            out["prune"] = prune_under_writes(args.results, args.days)
        return out
    finally:
        for d in dashboards.values():
            d.stop()
        redis.stop()
        _history.drop_empty(empty_url)
        shutil.rmtree(work, ignore_errors=True)


def prune_under_writes(url: str, days: float) -> dict:
    """Prune the oldest month while a writer records jobs as a runner does; the writer's longest wait."""
    from bench_agent.results.store import ResultStore

    store = ResultStore(url)
    waits: list[float] = []
    done = threading.Event()

    def write(call, *args):
        t0 = time.monotonic()
        value = call(*args)
        waits.append(time.monotonic() - t0)
        return value

    def writer() -> None:
        while not done.is_set():
            job_id = write(store.create_job, "during-prune", "board-0001", "host-001", {"steps": []})
            write(store.claim, job_id, "bench")
            for idx in range(5):
                write(store.record_step, job_id, idx, {"name": f"s{idx}", "command": "panio ping board-0001",
                                                       "status": "passed", "output": "ok\n"})
            write(store.finish, job_id, "complete", "passed")
            done.wait(0.02)

    thread = threading.Thread(target=writer)
    thread.start()
    t0 = time.monotonic()
    try:
        counts = store.prune(time.time() - (days - 30) * 86400)
    finally:
        took = time.monotonic() - t0
        done.set()
        thread.join()
    return {"jobs": counts["jobs"], "seconds": took, "writes": len(waits),
            "write_wait_max_s": max(waits), "write_wait_p50_s": statistics.median(waits),
            "goal_s": GOALS_S["prune write wait"], "met": max(waits) <= GOALS_S["prune write wait"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _history.add_results(p, "the seeded database (seed_history.py)")
    p.add_argument("--rounds", type=int, default=7, help="ABAB rounds (default 7)")
    p.add_argument("--prune", action="store_true", help="also prune the oldest month under writes (changes the DB)")
    _history.add_days(p, "the span the history was seeded over")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args()
    out = measure(args)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"history: {args.results} (load average {out['load']:.1f} on {os.cpu_count()} cores)")
    for name, m in out.items():
        if isinstance(m, dict) and "median_s" in m:
            cpu = f", CPU {m['cpu_s'] * 1000:.0f} ms"
            print(f"  {name:<30} {m['median_s'] * 1000:7.0f} ms  (empty db {m['empty_median_s'] * 1000:5.0f} ms, "
                  f"x{m['ratio']:.2f}{cpu})  goal <= {m['goal_s'] * 1000:.0f} ms: {'met' if m['met'] else 'NOT met'}")
    if "prune" in out:
        pr = out["prune"]
        print(f"  prune: {pr['jobs']:,} jobs in {pr['seconds']:.0f} s; {pr['writes']} writes meanwhile, longest "
              f"wait {pr['write_wait_max_s'] * 1000:.0f} ms (p50 {pr['write_wait_p50_s'] * 1000:.0f} ms)  "
              f"goal <= {pr['goal_s'] * 1000:.0f} ms: {'met' if pr['met'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
