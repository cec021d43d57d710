"""The controller API's CPU a job submission (issue 38's 10,000-board bend, after the recorder's): the same
submissions posted to the ``panio dashboard`` of two source trees, side by side.

At 10,000 simulated boards the dashboard's process (the HTTP API) spent ~6-8 ms of CPU a ``POST /api/v1/jobs``,
one process, one core: it bent first (docs/scale.md, "The controller under load"). This measures that process
alone, like with like: a private redis-server (the broker: each job is signed and published to its host's queue,
no worker consumes it), a PostgreSQL database made for the run, the controller's signing keys
(``controller_load.make_keys``), a lab of ``--hosts`` control hosts with 10 boards each tagged ``load``, and one
submitter token for the tag. Each round starts one tree's ``panio dashboard`` (``PYTHONPATH`` = the tree), posts
``--warmup`` submissions, then ``--jobs`` more from ``--threads`` keep-alive connections (a board each in turn),
and takes the dashboard process's CPU (``/proc`` utime + stime, ``_proccpu.stat_cpu``) and the wall time across
them; every answer must be ``201``.

Side A is the tree at ``--base`` (a ``git worktree`` made for the run, removed after), side B this tree; the
rounds alternate which goes first (``_bench.paired``) and the figures are the medians of the paired ratios
B / A: the dashboard's CPU a submission and submissions/s (a rate: B / A above 1 is better). With ``--base HEAD``
and no change in the tree the ratios are 1 (the benchmark's own check).

Run: .venv/bin/python benchmarks/api_cpu.py --base REV [--jobs 2000] [--threads 16] [--hosts 30] [--rounds 6] [--json]
Needs /usr/bin/redis-server, git, and a PostgreSQL at ``--pg`` (default postgresql://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
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
from controller_load import JOB, board, make_keys, pg_admin, write_lab  # noqa: E402

# CPU a submission of this tree's API against the base's: the goal of the issue 38 follow-up
GOAL_CPU_RATIO = 0.8


class Bench:
    def __init__(self, args, root: Path) -> None:
        from peerhelp import PrivateRedis

        self.args, self.root = args, root
        self.db = f"panio_apicpu_{uuid.uuid4().hex[:8]}"
        pg_admin(args.pg, f"CREATE DATABASE {self.db}")
        self.redis = PrivateRedis(root)
        self.redis.start()
        self.lab = root / "lab.toml"
        self.boards = args.hosts * 10
        hosts = write_lab(self.lab, self.boards, 10)
        ctl_keys, _ = make_keys(root / "keys", list(hosts))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PANIO_") and k != "PYTHONPATH"}
        self.env.update(PANIO_BROKER=self.redis.url, PANIO_REDIS_PREFIX=f"a{uuid.uuid4().hex[:6]}:",
                        PANIO_RESULTS_URL=f"{args.pg}/{self.db}", PANIO_LAB=str(self.lab),
                        PANIO_STATE_DIR=str(root / "cstate"), HOME=str(root), **ctl_keys)
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        p = subprocess.run([sys.executable, "-c", MAIN, "token", "add", "bench", "--scope", "submitter", "--tag",
                            "load", "--json"], env={**self.env, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"panio token add failed: {p.stderr.strip()[-500:]}")
        self.token = json.loads(p.stdout)["token"]
        self.next_board = 0
        self.round = 0

    def close(self) -> None:
        self.redis.stop()
        pg_admin(self.args.pg, f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")

    def post(self, hostport: str, count: int, threads: int) -> float:
        """``count`` submissions from ``threads`` keep-alive connections; the wall time they took."""
        lock = threading.Lock()
        left = [count]
        errors: list[str] = []
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}

        def work() -> None:
            conn = http.client.HTTPConnection(hostport, timeout=60)
            try:
                while True:
                    with lock:
                        if left[0] <= 0 or errors:
                            return
                        left[0] -= 1
                        t = board(self.next_board % self.boards)
                        self.next_board += 1
                    body = json.dumps({"toml": JOB, "file": "noop.toml", "target": t})
                    conn.request("POST", "/api/v1/jobs", body, headers)
                    answer = conn.getresponse()
                    data = answer.read()
                    if answer.status != 201:
                        errors.append(f"{answer.status}: {data[:300]!r}")
            except (OSError, http.client.HTTPException) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                conn.close()

        workers = [threading.Thread(target=work) for _ in range(threads)]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        took = time.perf_counter() - start
        if errors:
            raise SystemExit(f"a submission failed: {errors[0]}")
        return took

    def measure(self, tree: Path) -> dict:
        """Start ``tree``'s dashboard, warm it, post ``--jobs`` submissions; its CPU a submission and the rate."""
        from _proccpu import stat_cpu

        self.round += 1
        log = self.root / f"dashboard-{self.round}.log"
        proc = subprocess.Popen([sys.executable, "-c", MAIN, "dashboard", "--port", "0"],
                                env={**self.env, "PYTHONPATH": str(tree)}, cwd=tree, stdout=open(log, "w"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while not (found := re.search(r"http://(\S+?)/", log.read_text())):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the dashboard of {tree} did not start: {log.read_text()[-800:]}")
                time.sleep(0.05)
            hostport = found.group(1)
            try:
                self.post(hostport, self.args.warmup, self.args.threads)
                a = stat_cpu(proc.pid)
                took = self.post(hostport, self.args.jobs, self.args.threads)
                b = stat_cpu(proc.pid)
            except SystemExit as exc:  # the server's side of it: what its log says
                raise SystemExit(f"{exc} (the dashboard of {tree}: {log.read_text()[-1500:]})") from None
            if a is None or b is None or a[0] != b[0]:
                raise SystemExit(f"the dashboard of {tree} ended while measured: {log.read_text()[-800:]}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        return {"cpu_ms": (b[1] - a[1]) * 1000 / self.args.jobs, "jobs_s": self.args.jobs / took}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the git revision of side A (e.g. the commit before a change)")
    ap.add_argument("--jobs", type=int, default=2000, help="submissions measured a round")
    ap.add_argument("--warmup", type=int, default=100, help="submissions posted first each round, not measured")
    ap.add_argument("--threads", type=int, default=16, help="the submitter's keep-alive connections (16, as "
                    "controller_load.py: enough to keep the dashboard's core busy; with 4 the rate is bound by "
                    "each submission's round trips, not by the API's CPU)")
    ap.add_argument("--hosts", type=int, default=30, help="control hosts in the lab, 10 boards each")
    ap.add_argument("--rounds", type=int, default=6, help="paired rounds (each runs both dashboards)")
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432", help="PostgreSQL server (a database "
                    "is made for the run and dropped after)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="panio-apicpu-"))
    try:
        with base_tree(args.base, root) as (base, rev):
            # both trees' byte code compiled first, so neither round pays for compiling the sources
            for tree in (base, ROOT):
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "controller"),
                                str(tree / "bench_agent")], check=True,
                               env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
            bench = Bench(args, root)
            try:
                def show(is_base: bool, r: dict) -> None:
                    if not args.json:
                        print(f"  {'base ' + rev if is_base else 'this tree':<14} dashboard {r['cpu_ms']:.2f} ms CPU "
                              f"a submission, {r['jobs_s']:.1f} submissions/s", flush=True)

                pairs = paired_trees(bench.measure, base, args.rounds, show)
            finally:
                bench.close()
        at = f" ({args.jobs} POST /api/v1/jobs, {args.threads} connections; floor = {rev})"
        rows = [row("API CPU a submission, this tree / base" + at, pairs["cpu_ms"], "<=", GOAL_CPU_RATIO, "ms"),
                row("submissions/s, this tree / base" + at, pairs["jobs_s"], ">=", 1.0, "jobs/s")]
        emit(__file__, rows, args.json, {"base": rev, "jobs": args.jobs, "threads": args.threads,
                                         "boards": bench.boards})
    finally:
        shutil.rmtree(root, ignore_errors=True)

if __name__ == "__main__":
    main()
