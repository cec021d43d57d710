"""The recorder's cost a job (issue 38's 10,000-board bend): the same backlog of hosts' reports drained by the
recorder of two source trees, side by side.

The 10,000-board run of ``controller_load.py`` bent in the recorder (docs/scale.md, "The controller under load").
This measures the recorder alone, like with like: a private redis-server and a PostgreSQL database made for the
run, a lab of ``--hosts`` control hosts with 10 boards each, and, for each round, ``--jobs`` queued jobs whose
hosts' signed reports (``taken``, ``started`` with the lease's fencing token, ``step_start``, ``finish``: a
reporting worker's four for a one-step job) were written beforehand by ``_sim_hosts.Host.run_job``, the load
generator's own host code, while no recorder ran. Then ``panio recorder`` of one tree is started and drains the
backlog: timed from its "recording" line to the last job recorded done, its process's CPU and PostgreSQL's
backends' CPU (``_proccpu``) over the same window.

Side A is the tree at ``--base`` (a ``git worktree`` made for the run, removed after), side B this tree; the
rounds alternate which goes first (``_bench.paired``) and the figures are the medians of the paired ratios
B / A: the recorder's CPU a job, the database's CPU a job, and the drain's jobs/s (a rate: B / A above 1 is
better). With ``--base HEAD`` and no change in the tree the ratios are 1 (the benchmark's own check).

Run: .venv/bin/python benchmarks/recorder_drain.py --base REV [--jobs 2000] [--hosts 200] [--rounds 4] [--json]
Needs /usr/bin/redis-server, git, and a PostgreSQL at ``--pg`` (default postgresql://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's real-peer helpers (PrivateRedis)

from _bench import emit, row  # noqa: E402
from _trees import MAIN, base_tree, paired_trees  # noqa: E402
from controller_load import make_keys, pg_admin, write_lab  # noqa: E402

# CPU a job of the new recorder against the old: the bend is fixed when a job costs it at most half as much
GOAL_CPU_RATIO = 0.5


class Bench:
    def __init__(self, args, root: Path) -> None:
        from peerhelp import PrivateRedis

        self.args, self.root = args, root
        self.db = f"panio_drain_{uuid.uuid4().hex[:8]}"
        pg_admin(args.pg, f"CREATE DATABASE {self.db}")
        self.results = f"{args.pg}/{self.db}"
        self.redis = PrivateRedis(root)
        self.redis.start()
        self.lab = root / "lab.toml"
        self.hosts = write_lab(self.lab, args.hosts * 10, 10)
        self.owner = {t: h for h, ts in self.hosts.items() for t in ts}
        ctl_keys, self.host_keys = make_keys(root / "keys", list(self.hosts))
        self.prefix = f"d{uuid.uuid4().hex[:6]}:"  # one prefix for every round: the fencing counters keep rising
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PANIO_") and k != "PYTHONPATH"}
        self.env.update(PANIO_BROKER=self.redis.url, PANIO_REDIS_PREFIX=self.prefix, PANIO_RESULTS_URL=self.results,
                        PANIO_LAB=str(self.lab), PANIO_STATE_DIR=str(root / "cstate"), HOME=str(root), **ctl_keys)
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self._sim = None
        self.round = 0

    def close(self) -> None:
        self.redis.stop()
        pg_admin(self.args.pg, f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")

    def _hosts(self):
        """One ``_sim_hosts.Host`` a host (not started: their ``run_job`` is called here, in order)."""
        if self._sim is None:
            import _sim_hosts
            from celery.security.certificate import FSCertStore
            from celery.security.serialization import SecureSerializer

            from bench_agent.jobs.signing import DIGEST

            verifier = SecureSerializer(cert_store=FSCertStore(self.host_keys["store"]), digest=DIGEST)
            cfg = {"redis": self.redis.url, "prefix": self.prefix, "state": str(self.root / "hosts"), **self.host_keys}
            self._sim = {h: _sim_hosts.Host(h, set(ts), cfg, verifier, lambda line: None)
                         for h, ts in self.hosts.items()}
        return self._sim

    def backlog(self) -> list[int]:
        """``--jobs`` queued jobs, a board each in turn, and their hosts' reports waiting in the streams."""
        from bench_agent.results.store import ResultStore

        store = ResultStore(self.results)
        targets = list(self.owner)
        self.round += 1
        specs = []
        for i in range(self.args.jobs):
            t = targets[(self.round * self.args.jobs + i) % len(targets)]
            specs.append(("noop", t, self.owner[t], {"name": "noop", "target": t, "via": "broker",
                                                     "steps": [{"name": "ping", "command": f"panio ping {t}"}]}))
        ids = store.create_jobs(specs)
        hosts = self._hosts()
        for job_id, (name, t, h, spec) in zip(ids, specs):
            hosts[h].run_job({"job_id": job_id, "target": t, "name": name, "steps": spec["steps"], "lease_ttl_s": 30})
        return ids

    def drain(self, tree: Path) -> dict:
        """Start ``tree``'s recorder on a fresh backlog; its figures once every job is recorded done."""
        import psycopg

        from _proccpu import Tracker, spent

        ids = self.backlog()
        log = self.root / f"recorder-{self.round}.log"
        proc = subprocess.Popen([sys.executable, "-c", MAIN, "recorder", "--lab", str(self.lab)],
                                env={**self.env, "PYTHONPATH": str(tree)}, cwd=tree, stdout=open(log, "w"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        tracker = Tracker(str(self.root), lambda: {proc.pid: "recorder"}, pg_database=self.db).start()
        try:
            deadline = time.monotonic() + 120
            while "recorder: recording" not in log.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the recorder of {tree} did not start: {log.read_text()[-800:]}")
                time.sleep(0.02)
            a = tracker.mark()
            with psycopg.connect(self.results, autocommit=True) as c:
                deadline = time.monotonic() + self.args.timeout_s
                while c.execute("SELECT count(*) FROM panio_jobs WHERE id = ANY(%s) AND state = 'done'",
                                (ids,)).fetchone()[0] < len(ids):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"the recorder of {tree} did not drain {len(ids)} jobs: "
                                         f"{log.read_text()[-800:]}")
                    time.sleep(0.05)
                bad = c.execute("SELECT count(*) FROM panio_jobs WHERE id = ANY(%s) AND health <> 'complete'",
                                (ids,)).fetchone()[0]
            b = tracker.mark()
        finally:
            tracker.stop()
            proc.terminate()
            proc.wait(timeout=30)
        refused = log.read_text().count("refused report")
        if bad or refused:
            raise SystemExit(f"the recorder of {tree}: {bad} jobs not complete, {refused} reports refused: "
                             f"{log.read_text()[-800:]}")
        cpu = spent(a, b)
        wall = b["at"] - a["at"]
        return {"recorder_cpu_ms": cpu.get("recorder", 0.0) * 1000 / len(ids),
                "db_cpu_ms": cpu.get("results_db", 0.0) * 1000 / len(ids), "jobs_s": len(ids) / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the git revision of side A (e.g. the commit before a change)")
    ap.add_argument("--jobs", type=int, default=2000, help="jobs in each round's backlog (four reports each)")
    ap.add_argument("--hosts", type=int, default=200, help="control hosts, 10 boards each")
    ap.add_argument("--rounds", type=int, default=4, help="paired rounds (each drains two backlogs)")
    ap.add_argument("--timeout-s", type=float, default=600, help="a drain longer than this fails the run")
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432", help="PostgreSQL server (a database "
                    "is made for the run and dropped after)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="panio-drain-"))
    try:
        with base_tree(args.base, root) as (base, rev):
            bench = Bench(args, root)
            try:
                def show(is_base: bool, r: dict) -> None:
                    if not args.json:
                        print(f"  {'base ' + rev if is_base else 'this tree':<14} recorder {r['recorder_cpu_ms']:.2f} "
                              f"ms a job, database {r['db_cpu_ms']:.2f} ms a job, {r['jobs_s']:.1f} jobs/s", flush=True)

                pairs = paired_trees(bench.drain, base, args.rounds, show)
            finally:
                bench.close()
        at = f" ({args.jobs} jobs, {args.hosts} hosts; floor = {rev})"
        rows = [row("recorder CPU a job, this tree / base" + at, pairs["recorder_cpu_ms"], "<=", GOAL_CPU_RATIO, "ms"),
                row("database CPU a job, this tree / base" + at, pairs["db_cpu_ms"], "<=", 1.0, "ms"),
                row("drain rate, this tree / base" + at, pairs["jobs_s"], ">=", 1.0, "jobs/s")]
        emit(__file__, rows, args.json, {"base": rev, "jobs": args.jobs, "hosts": args.hosts})
    finally:
        shutil.rmtree(root, ignore_errors=True)

if __name__ == "__main__":
    main()
