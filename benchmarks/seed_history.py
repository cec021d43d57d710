"""Fill a results database with historic jobs (with their steps and an artifact each), fast.

A lab's history at scale for the measurements of docs/scale.md: ``--jobs`` finished jobs spread evenly
over the last ``--days`` days (the newest an hour ago), on ``--targets`` boards of ``--hosts`` control
hosts, each a 5-step job as `benchmarks/scale.py` runs it (power-cycle, wait for boot, transact twice,
power state) with its serial log as an artifact; about 1 in 20 failed, 1 in 50 incomplete. Rows go in
with PostgreSQL's COPY (psycopg) or SQLite's ``executemany`` in large transactions, after panio has
created its tables and indexes (``ResultStore``), so the database is the one panio would have grown.
Ids continue after the largest one there; running it twice doubles the history.

Run: .venv/bin/python benchmarks/seed_history.py --jobs 1000000 --results postgresql://postgres@127.0.0.1/panio_scale
     .venv/bin/python benchmarks/seed_history.py --jobs 1000000 --results sqlite:////tmp/history.db
A ``postgresql://`` database that does not exist yet is created. Prints what it wrote,
rows a second and the database's size (``--json``: one object).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import _history  # noqa: E402  (benchmarks/: --results, --days, the database's size and newest job)

STEPS = (  # name, command, output: the 5-step job of benchmarks/scale.py
    ("power-cycle", "panio power cycle ${target}", "cycled\n"),
    ("wait-boot", "panio serial wait ${target} 'login:' --timeout-ms 30000", "sim login:\n"),
    ("transact-1", "panio serial transact ${target} 'uname -a'", "Linux sim 6.1.0 #1 SMP aarch64 GNU/Linux\n"),
    ("transact-2", "panio serial transact ${target} 'cat /proc/uptime'", "12.34 10.01\n"),
    ("power-state", "panio power state ${target}", "on\n"),
)
SUITES = ("nightly-smoke", "boot-regression", "serial-soak", "kernel-bisect", "health-check")
SERIAL_LOG = "".join(f"[{i:6.3f}] sim: boot stage {i}\n" for i in range(8)) + "root@sim:~# uname -a\n"


def rows(first_id: int, n: int, days: float, targets: int, hosts: int, seed: int = 25):
    """Yield ``(job, [step...], artifact)``: each row a dict by column name (a column panio adds later and
    this does not know stays at its default, NULL)."""
    rnd = random.Random(seed + first_id)
    end = time.time() - 3600
    span = days * 86400
    spec_of = {}
    for k in range(n):
        job_id = first_id + k
        t = rnd.randrange(targets)
        target, host = f"board-{t:04d}", f"host-{t % hosts:03d}"
        suite = SUITES[job_id % len(SUITES)]
        created = end - span + span * k / max(n, 1)
        roll = rnd.random()
        if roll < 0.02:
            health, result, reason, failed_at = "incomplete", None, "lab: serial device went away", 1
        elif roll < 0.07:
            health, result, reason, failed_at = "complete", "failed", "failed: boots to a shell", 1
        else:
            health, result, reason, failed_at = "complete", "passed", "", None
        spec = spec_of.get(suite)
        if spec is None:
            spec = spec_of[suite] = json.dumps({"name": suite, "target": "${target}",
                                                "steps": [{"name": s, "run": c} for s, c, _ in STEPS]})
        started = created + rnd.uniform(0.05, 2.0)
        steps, at = [], started
        for idx, (name, command, output) in enumerate(STEPS):
            duration = rnd.uniform(0.05, 3.0) if idx == 1 else rnd.uniform(0.01, 0.2)
            if failed_at is not None and idx > failed_at:
                status, exit_status, duration, output = "skipped", None, None, ""
            elif failed_at == idx:
                status, exit_status = ("error" if result is None else "failed"), (4 if result is None else 1)
            else:
                status, exit_status = "passed", 0
            steps.append({"job_id": job_id, "idx": idx, "name": name, "command": command.replace("${target}", target),
                          "status": status, "exit_status": exit_status, "duration_s": duration, "checks": "[]",
                          "captured": "{}", "output": output})
            at += duration or 0
        job = {"id": job_id, "name": suite, "target": target, "host": host, "state": "done", "health": health,
               "result": result, "reason": reason, "spec": spec, "worker": f"{host}.{1000 + t % 97}@ctl",
               "fence": job_id, "cancel_requested": False, "created_at": created, "started_at": started,
               "leased_at": started, "finished_at": at + 0.01, "beat_at": at, "sent_at": created}
        yield job, steps, {"job_id": job_id, "name": "serial-console.log", "content": SERIAL_LOG}


def _columns(table) -> list[str]:
    return [c.name for c in table.columns]


def seed_postgresql(store, first_id: int, args) -> None:
    import psycopg

    j, s, a = (_columns(t) for t in (store.jobs, store.steps, store.artifacts))
    with psycopg.connect(args.results) as conn:
        with conn.cursor() as cur:
            def copy(table: str, cols: list[str], batch: list[tuple]) -> None:
                with cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as cp:
                    for row in batch:
                        cp.write_row(row)
            done = 0
            while done < args.jobs:
                n = min(args.batch, args.jobs - done)
                jobs, steps, artifacts = _split(rows(first_id + done, n, args.days, args.targets, args.hosts), j, s, a)
                copy("panio_jobs", j, jobs)
                copy("panio_steps", s, steps)
                copy("panio_artifacts", a, artifacts)
                conn.commit()
                done += n
                _progress(done, args)
            cur.execute("SELECT setval(pg_get_serial_sequence('panio_jobs', 'id'), (SELECT max(id) FROM panio_jobs))")
        conn.commit()
    with psycopg.connect(args.results, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE panio_jobs")
        conn.execute("VACUUM ANALYZE panio_steps")
        conn.execute("VACUUM ANALYZE panio_artifacts")


def seed_sqlite(store, first_id: int, args) -> None:
    import sqlite3

    path = args.results.split("sqlite:///", 1)[1]
    j, s, a = (_columns(t) for t in (store.jobs, store.steps, store.artifacts))
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    done = 0
    while done < args.jobs:
        n = min(args.batch, args.jobs - done)
        jobs, steps, artifacts = _split(rows(first_id + done, n, args.days, args.targets, args.hosts), j, s, a)
        with conn:
            for table, cols, batch in (("panio_jobs", j, jobs), ("panio_steps", s, steps),
                                       ("panio_artifacts", a, artifacts)):
                conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                 batch)
        done += n
        _progress(done, args)
    conn.execute("ANALYZE")
    conn.close()


def _split(generated, j: list[str], s: list[str], a: list[str]) -> tuple[list, list, list]:
    """The generated rows as three lists of tuples in the tables' column order."""
    jobs, steps, artifacts = [], [], []
    for job, job_steps, artifact in generated:
        jobs.append(tuple(job.get(c) for c in j))
        steps.extend(tuple(step.get(c) for c in s) for step in job_steps)
        artifacts.append(tuple(artifact.get(c) for c in a))
    return jobs, steps, artifacts


def _progress(done: int, args) -> None:
    if not args.json and (done % (args.batch * 10) == 0 or done == args.jobs):
        print(f"  {done:,} jobs", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1_000_000, help="historic jobs to add (default 1,000,000)")
    _history.add_results(p, "sqlite:///PATH or postgresql://USER@HOST/DB (created if it does not exist)")
    _history.add_days(p, "the history's span, ending an hour ago")
    p.add_argument("--targets", type=int, default=1000, help="boards the jobs ran on (default 1000)")
    p.add_argument("--hosts", type=int, default=100, help="control hosts the boards hang off (default 100)")
    p.add_argument("--batch", type=int, default=20_000, help="jobs a transaction (default 20,000)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.targets < 1 or args.hosts < 1 or args.batch < 1 or args.days <= 0:
        p.error("--jobs, --targets, --hosts, --batch and --days must be positive")
    if args.results.startswith("postgresql://"):
        _history.create_database(args.results)
    from bench_agent.results.store import ResultStore

    store = ResultStore(args.results)  # panio's own tables and indexes
    first_id = _history.newest_job(args.results) + 1
    t0 = time.monotonic()
    (seed_postgresql if store.engine.dialect.name == "postgresql" else seed_sqlite)(store, first_id, args)
    took = time.monotonic() - t0
    out = {"results": store.engine.dialect.name, "jobs": args.jobs, "steps": args.jobs * len(STEPS),
           "artifacts": args.jobs, "first_id": first_id, "seconds": round(took, 1),
           "jobs_per_s": round(args.jobs / took), "size_bytes": _history.db_size(args.results), "load": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"seeded {out['jobs']:,} jobs ({out['steps']:,} steps, {out['artifacts']:,} artifacts) into "
              f"{out['results']} in {took:.0f} s ({out['jobs_per_s']:,} jobs/s, load {out['load']:.1f}); "
              f"database {out['size_bytes'] / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
