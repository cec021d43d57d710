"""What a one-step job writes to the results database, durably everywhere beside as shipped, in one run; and
the two PostgreSQL roads panio owns or borrows, each beside the other.

A job's records, as a worker writes them (create, take, claim with its fence, the step's start, the step's
record with the verdict, the serial-log artifact), N jobs a batch, on SQLite and on PostgreSQL
(``--pg-url``, a fresh schema; skipped, saying so, when it is not there). Two sides, alternating by round
(ABBA...: each goes first every other round), on the same database:

* ``durable``: every commit waits for the disk (on PostgreSQL, ``synchronous_commit = on`` for each; what
  panio did before the job road's relaxed commits);
* ``shipped``: as panio writes them now: the creation, the claim and the verdict durable, the rest relaxed
  (``bench_agent.results.store.ResultStore``).

On PostgreSQL also (issue 38 item 4, issue 41 item 4):

* ``two pools`` vs ``one pool``: the same shipped writes through a separate relaxed pool (what panio had before
  its connections were bounded: two pools a process, 15 connections each at most) and through the one bounded
  pool whose connection is switched between relaxed and durable commits (``results.db._commit_mode``);
* ``psycopg`` vs ``libpq``: a new process that reads one finished job and its steps, as `panio job status` does,
  through psycopg (import, connect, two statements) and through panio's ctypes binding of libpq
  (``bench_agent/results/libpq.py``), CPU and wall time of the whole process, ABAB.

Each figure is the median of the rounds' per-job times; the ratio the median of the rounds' ratios, with the
load average. This is the database's share of a job's cost on the worker, without Celery, Redis or a board:
``benchmarks/jobs_throughput.py`` measures the whole road.

Run: .venv/bin/python benchmarks/results_writes.py [--jobs N] [--rounds R] [--json]   (about 30 s)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs_throughput import PG_URL, drop_pg, pg_url  # noqa: E402

STEP = {"name": "s0", "command": "panio ping board0", "status": "running"}
DONE = {**STEP, "status": "pass", "exit_status": 0, "duration_s": 0.01, "output": "seq=1 ok\n",
        "checks": [{"check": "exit status in [0]", "ok": True, "got": 0}]}


def stores(url: str):
    """(durable, shipped): the same database; the durable side's relaxed engines are the durable ones."""
    from bench_agent.results.store import ResultStore

    shipped, durable = ResultStore(url), ResultStore(url)
    durable.relaxed, durable.relaxed_single = durable.engine, durable.single
    return durable, shipped


def one_job(store, n: int) -> None:
    job_id = store.create_job("bench", "board0", None, {"steps": [STEP]})
    store.take(job_id, "worker bench@here:1", 0.0)
    store.claim(job_id, "worker bench@here:1", fence=n)
    store.start_step(job_id, 0, STEP)
    store.finish(job_id, "complete", "passed", "all steps passed", steps=[(0, DONE)])
    store.add_artifact(job_id, "serial-console.log", "boot\n" * 50)


def batch_s(store, jobs: int) -> float:
    start = time.perf_counter()
    for n in range(jobs):
        one_job(store, n)
    return (time.perf_counter() - start) / jobs


def two_pools(url: str):
    """A store as panio wrote before the bound: its relaxed statements through a second pool of their own."""
    import sqlalchemy as sa

    from bench_agent.results.store import ResultStore

    store = ResultStore(url)
    relaxed = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"),
                               connect_args={"options": "-c synchronous_commit=off " + _url_options(url)})
    store.relaxed, store.relaxed_single = relaxed, relaxed.execution_options(isolation_level="AUTOCOMMIT")
    return store


def _url_options(url: str) -> str:
    from urllib.parse import parse_qs, urlsplit

    return " ".join(parse_qs(urlsplit(url).query).get("options", []))


def measure(url: str, jobs: int, rounds: int, sides=None) -> dict:
    durable, shipped = sides or stores(url)
    batch_s(durable, 3)
    batch_s(shipped, 3)
    pairs, loads = [], []
    for i in range(rounds):  # ABBA: each side goes first every other round
        if i % 2:
            shipped_s = batch_s(shipped, jobs)
            pairs.append((batch_s(durable, jobs), shipped_s))
        else:
            pairs.append((batch_s(durable, jobs), batch_s(shipped, jobs)))
        loads.append(os.getloadavg()[0])
    return {"durable_ms": statistics.median(d for d, _ in pairs) * 1000,
            "shipped_ms": statistics.median(s for _, s in pairs) * 1000,
            "ratio": statistics.median(s / d for d, s in pairs), "load": loads, "pairs": pairs}


READ = r"""
import re, sys
url, job, road = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from bench_agent.results.read import JOB, STEPS, Reader
if road == "libpq":
    with Reader.open(url) as r:
        assert r.job(job)["steps"]
else:
    import psycopg

    def rows(conn, sql, params):
        sql = re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)
        cur = conn.execute(sql, params)
        names = [d.name for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    with psycopg.connect(url) as conn:
        assert rows(conn, JOB, {"id": job}) and rows(conn, STEPS, {"id": job})
"""


def read_process(url: str, job_id: int, road: str, env: dict) -> tuple[float, float]:
    """(CPU s, wall s) of a new Python process that reads job ``job_id`` through ``road``."""
    import resource
    import subprocess

    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-c", READ, url, str(job_id), road], check=True, env=env)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def reads(url: str, rounds: int) -> dict:
    """psycopg (A) against libpq (B), a new process each, ABAB; CPU and wall medians, ratios B/A."""
    from _bench import byte_compiled_env

    env = byte_compiled_env()
    store = stores(url)[1]
    job_id = store.create_job("bench", "board0", None, {"steps": [STEP]})
    store.finish(job_id, "complete", "passed", "all steps passed", steps=[(0, DONE)])
    for road in ("psycopg", "libpq"):
        read_process(url, job_id, road, env)
    pairs, loads = [], []
    for i in range(rounds):
        first, second = ("psycopg", "libpq") if i % 2 == 0 else ("libpq", "psycopg")
        got = {first: read_process(url, job_id, first, env), second: read_process(url, job_id, second, env)}
        pairs.append((got["psycopg"], got["libpq"]))
        loads.append(os.getloadavg()[0])
    return {"psycopg_cpu_ms": statistics.median(a[0] for a, _ in pairs) * 1000,
            "libpq_cpu_ms": statistics.median(b[0] for _, b in pairs) * 1000,
            "cpu_ratio": statistics.median(b[0] / a[0] for a, b in pairs),
            "psycopg_wall_ms": statistics.median(a[1] for a, _ in pairs) * 1000,
            "libpq_wall_ms": statistics.median(b[1] for _, b in pairs) * 1000,
            "wall_ratio": statistics.median(b[1] / a[1] for a, b in pairs), "load": loads}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=30, help="jobs a batch (default 30)")
    ap.add_argument("--rounds", type=int, default=7, help="paired rounds (default 7)")
    ap.add_argument("--pg-url", default=os.environ.get("PANIO_BENCH_PG_URL", PG_URL))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="panio-results-bench-") as d:
        out["sqlite"] = measure(f"sqlite:///{Path(d) / 'results.db'}", args.jobs, args.rounds)
    url, why = pg_url(args.pg_url)
    if url is None:
        out["postgresql"] = {"skipped": f"PostgreSQL not available at {args.pg_url} ({why})"}
    else:
        try:
            out["postgresql"] = measure(url, args.jobs, args.rounds)
            out["postgresql pools"] = measure(url, args.jobs, args.rounds, (two_pools(url), stores(url)[1]))
            out["postgresql reads"] = reads(url, args.rounds * 2)
        finally:
            from bench_agent.results.db import dispose

            dispose(url)
            drop_pg(url)
    print(f"a one-step job's results-database writes, durable everywhere vs as shipped, alternating ABBA "
          f"({args.rounds} rounds of {args.jobs} jobs a side; median per job; ratio: median of the rounds' ratios)")
    for kind, r in out.items():
        if "skipped" in r:
            print(f"  {kind:<11} SKIPPED: {r['skipped']}")
            continue
        if kind == "postgresql pools":
            print(f"  one bounded pool (switching commit modes) vs two pools: two={r['durable_ms']:.2f} ms/job   "
                  f"one={r['shipped_ms']:.2f} ms/job   ratio {r['ratio']:.3f}×   "
                  f"load {min(r['load']):.1f}-{max(r['load']):.1f}   goal <= 1.10×")
            continue
        if kind == "postgresql reads":
            print(f"  a new process reading a finished job: psycopg CPU {r['psycopg_cpu_ms']:.0f} ms, libpq "
                  f"{r['libpq_cpu_ms']:.0f} ms (ratio {r['cpu_ratio']:.2f}×); wall {r['psycopg_wall_ms']:.0f} vs "
                  f"{r['libpq_wall_ms']:.0f} ms (ratio {r['wall_ratio']:.2f}×)   "
                  f"load {min(r['load']):.1f}-{max(r['load']):.1f}   "
                  f"(libpq kept while its CPU ratio <= 0.7×: docs/architecture.md)")
            continue
        print(f"  {kind:<11} durable={r['durable_ms']:.2f} ms/job   shipped={r['shipped_ms']:.2f} ms/job   "
              f"ratio {r['ratio']:.3f}×   load {min(r['load']):.1f}-{max(r['load']):.1f}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
