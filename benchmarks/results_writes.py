"""What a one-step job writes to the results database, durably everywhere beside as shipped, in one run.

A job's records, as a worker writes them (create, take, claim with its fence, the step's start, the step's
record with the verdict, the serial-log artifact), N jobs a batch, on SQLite and on PostgreSQL
(``--pg-url``, a fresh schema; skipped, saying so, when it is not there). Two sides, alternating by round
(ABBA...: each goes first every other round), on the same database:

* ``durable``: every commit waits for the disk (on PostgreSQL, ``synchronous_commit = on`` for each; what
  panio did before the job road's relaxed commits);
* ``shipped``: as panio writes them now: the creation, the claim and the verdict durable, the rest relaxed
  (``bench_agent.results.store.ResultStore``).

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


def measure(url: str, jobs: int, rounds: int) -> dict:
    durable, shipped = stores(url)
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
        finally:
            drop_pg(url)
    print(f"a one-step job's results-database writes, durable everywhere vs as shipped, alternating ABBA "
          f"({args.rounds} rounds of {args.jobs} jobs a side; median per job; ratio: median of the rounds' ratios)")
    for kind, r in out.items():
        if "skipped" in r:
            print(f"  {kind:<11} SKIPPED: {r['skipped']}")
            continue
        print(f"  {kind:<11} durable={r['durable_ms']:.2f} ms/job   shipped={r['shipped_ms']:.2f} ms/job   "
              f"ratio {r['ratio']:.3f}×   load {min(r['load']):.1f}-{max(r['load']):.1f}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
