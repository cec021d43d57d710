"""Job throughput beside bare Celery, and a long job's cost per step beside `python -c pass`, in one run.

What it compares, on a SQLite and then a PostgreSQL results database (``PANIO_RESULTS_URL``):

1. one-step jobs (``panio serial transact`` on a simulated board's PTY console) through a real
   ``panio worker --host local`` against bare Celery tasks (a task that returns its argument) on the
   same broker, with the same worker concurrency (threads) and the same number of messages: tasks/s each;
2. the fixed cost of a job: no road takes a job without steps (`job check` refuses a file with none; only a
   payload written by hand past it would have none), so the cheapest step there is (``panio ping ${target}``:
   one in-process operation) stands in for "no step", against the same bare tasks;
3. a job of 200 ``serial transact`` steps: its wall time per step (submit to done, over 200) against one
   ``python -c pass`` start-up, five of them timed just before the job and five just after.

Bare Celery is measured in the same run, alternating (ABC ABC...: a panio batch, then a bare batch with
plain JSON messages, then a bare batch with signed ones, by round); each figure is the median of the
rounds' ratios, printed with the load average and the goal. panio signs every message (docs/security.md),
so the signed bare side is the like-for-like floor: its task messages are signed by the sender's key and
verified by the worker with Celery's ``auth`` serializer and the same kind of keys (the test suite's), its
results are plain JSON (a panio job sends no result: the results database says when it is done). Both
ratios are printed, each with the goal beside it.
A batch runs end to end: for panio, from the first job's creation (planned, recorded in one transaction,
published: what `panio suite` does) to the moment the results database shows every job done (polled every
``POLL_S``); for bare Celery, from the first ``send_task`` to the last result.

Run: .venv/bin/python benchmarks/jobs_throughput.py [--quick] [--jobs N] [--rounds R] [--only sqlite] [--json]
(2-3 minutes on the shared 2-core machine; --quick about one)
Needs: /usr/bin/redis-server (a private one on a free loopback port), PostgreSQL at ``--pg-url``
(default the test suite's; `bash scripts/system-deps.sh` starts it): without it that side is skipped,
saying so. Starts and stops its own simulated boards (``panio-sim``), serial captures and workers.
Exits non-zero on an error only, not when a goal is missed (it prints MISSED beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's real-peer helpers

from peerhelp import PrivateRedis, Workers  # noqa: E402

BIN = Path(sys.executable).parent
PANIO, SIM = str(BIN / "panio"), str(BIN / "panio-sim")
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"  # tests/jobhelp.py's
POLL_S = 0.01
PROMPT = "root@sim:~# "
TRANSACT = f"panio serial transact ${{target}} 'echo ok' --until '{PROMPT}' --timeout-ms 5000"
GOALS = {  # (goal, at least?) per measurement and database
    ("transact", "sqlite"): (0.3, True), ("transact", "postgresql"): (0.2, True),
    ("ping", "sqlite"): (0.5, True), ("ping", "postgresql"): (0.35, True),
    ("long", "sqlite"): (0.5, False), ("long", "postgresql"): (0.5, False),
}

RAW_WORKER = """
import sys
from celery import Celery
url, prefix, concurrency, queue = sys.argv[1:5]
app = Celery("raw", broker=url, backend=url)
app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"],
                worker_prefetch_multiplier=1, broker_transport_options={"global_keyprefix": prefix},
                result_backend_transport_options={"global_keyprefix": prefix}, worker_hijack_root_logger=False)
if len(sys.argv) > 5:  # signed: accept only tasks signed by a certificate of the store (Celery's auth serializer)
    key, cert, store = sys.argv[5:8]
    app.conf.update(accept_content=["auth"], security_key=key, security_certificate=cert, security_cert_store=store,
                    security_digest="sha256", task_serializer="auth")
    app.setup_security(allowed_serializers=["json"], digest="sha256")
@app.task(name="raw.noop")
def noop(x):
    return x
app.worker_main(["worker", "-Q", queue, "--pool", "threads", "-c", concurrency, "--without-gossip",
                 "--without-mingle", "--without-heartbeat", "--loglevel", "WARNING"])
"""
# The bare sides: plain JSON, and signed the way panio signs a job (the task message signed by the sender's key
# and verified by the worker; the result, which a panio job does not have, plain JSON).
BARE = ("unsigned", "signed")


def job_file(tmp: Path, name: str, runs: list[str]) -> Path:
    path = tmp / f"{name}.toml"
    steps = "".join(f'[[steps]]\nname = "s{i}"\nrun = "{run}"\nexpect_output = "ok|seq=1"\n'
                    for i, run in enumerate(runs))
    path.write_text(f'name = "{name}"\ntags = ["sim"]\n{steps}')
    return path


class Bench:
    """The simulated boards with their serial captures, a private Redis, and a bare Celery worker on it."""

    def __init__(self, tmp: Path, boards: int, concurrency: int) -> None:
        self.tmp, self.boards, self.concurrency = tmp, [f"board{i}" for i in range(boards)], concurrency
        self.redis = PrivateRedis(tmp)
        self.env = {**os.environ, "PANIO_LAB": str(tmp / "sim" / "lab.toml"), "HOME": str(tmp),
                    # the worker's state directory (peerhelp.Workers): its local ops reach these captures
                    "PANIO_STATE_DIR": str(tmp / "wstate")}
        self.raw_prefix = f"raw-{uuid.uuid4().hex[:6]}:"
        self.raw_workers: list[subprocess.Popen] = []
        self.raw_apps: dict = {}

    def start(self) -> None:
        self.redis.start()
        subprocess.run([SIM, "up", "--dir", str(self.tmp / "sim"), "--boards", str(len(self.boards)),
                        "--boot-s", "0.2", "--countdown-s", "0.3"], env=self.env, check=True, capture_output=True,
                       timeout=60)
        for board in self.boards:
            self.cli("serial", "watch", board)
            self.at_shell(board)
        self._start_bare()

    def at_shell(self, board: str) -> None:
        """Wait for ``board``'s shell prompt (``sim.console.to_shell``: a board still counting down to autoboot
        stops in U-Boot at the transact's newline, and is booted from there)."""
        from bench_agent.sim.console import to_shell

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if to_shell(lambda text, until: self.cli("serial", "transact", board, text, "--until", until,
                                                     "--timeout-ms", "10000", check=False)):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{board} does not answer on its console")

    def _start_bare(self) -> None:
        """The bare workers (one per side of ``BARE``) and their clients in this process. The signed side uses
        the test suite's keys, as panio's worker does: the worker's pair, the controller's to send."""
        import keyhelp
        from celery import Celery
        from celery.security.serialization import register_auth

        from bench_agent.jobs.signing import CERT_ENV, KEY_ENV, STORE_ENV

        worker_keys, controller_keys = keyhelp.worker_env(), keyhelp.controller_env()
        for side in BARE:
            signed = [worker_keys[KEY_ENV], worker_keys[CERT_ENV], worker_keys[STORE_ENV]] if side == "signed" else []
            self.raw_workers.append(subprocess.Popen(
                [sys.executable, "-c", RAW_WORKER, self.redis.url, self.raw_prefix, str(self.concurrency),
                 f"raw-{side}", *signed], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
            app = Celery("raw", broker=self.redis.url, backend=self.redis.url)
            app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"],
                            broker_transport_options={"global_keyprefix": self.raw_prefix},
                            result_backend_transport_options={"global_keyprefix": self.raw_prefix})
            if side == "signed":  # this process's auth serializer signs with the controller's key, as panio's does
                app.conf.update(task_serializer="auth")
                with open(controller_keys[KEY_ENV]) as k, open(controller_keys[CERT_ENV]) as c:
                    register_auth(k.read(), None, c.read(), controller_keys[STORE_ENV], "sha256")
            self.raw_apps[side] = app
            app.send_task("raw.noop", args=[0], queue=f"raw-{side}").get(timeout=60)

    def cli(self, *args: str, check: bool = True) -> str:
        p = subprocess.run([PANIO, *args], env=self.env, capture_output=True, text=True, timeout=60)
        if check and p.returncode != 0:
            raise RuntimeError(f"panio {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
        return p.stdout

    def bare_batch(self, n: int, side: str) -> float:
        """Seconds to send ``n`` bare tasks (``side``: signed or not) and get all ``n`` results."""
        start = time.perf_counter()
        results = [self.raw_apps[side].send_task("raw.noop", args=[i], queue=f"raw-{side}") for i in range(n)]
        for r in results:
            r.get(timeout=60)
        return time.perf_counter() - start

    def stop(self) -> None:
        for raw in self.raw_workers:
            if raw.poll() is None:
                os.killpg(raw.pid, 15)
                raw.wait(timeout=30)
        for board in self.boards:
            self.cli("serial", "stop", board, check=False)
        subprocess.run([SIM, "down", "--dir", str(self.tmp / "sim")], env=self.env, capture_output=True, timeout=60)
        self.redis.stop()


class Controller:
    """The controller's side, in this process: plan, record and publish jobs (what `panio suite` does),
    then watch the results database until they are all done."""

    def __init__(self, bench: Bench, workers: Workers) -> None:
        from controller import backends
        from controller.lab.store import load

        os.environ.update({k: bench.env[k] for k in ("PANIO_LAB", "HOME", "PANIO_STATE_DIR")})
        os.environ.update(workers.env)
        self.lab, self.boards = load(bench.env["PANIO_LAB"]), bench.boards
        self.store, self.app = backends.results_store(), backends.celery_app()

    def prepare(self, path: Path) -> tuple[dict, list[dict]]:
        from controller.jobs import spec

        job, steps, _targets = spec.prepare(path, self.lab, None)
        return job, steps

    def running(self, ids: list[int]) -> int:
        """How many of ``ids`` are not done: one indexed count, so the watching costs the machine little."""
        import sqlalchemy as sa

        j = self.store.jobs.c
        with self.store.engine.connect() as c:
            return c.execute(sa.select(sa.func.count()).where(j.id.in_(ids), j.state != "done")).scalar()

    def batch(self, prepared: tuple[dict, list[dict]], n: int) -> tuple[float, list[int]]:
        """Seconds from the first job's creation to all ``n`` done; the jobs round-robin over the boards."""
        from controller.jobs import local, remote

        job, steps = prepared
        start = time.perf_counter()
        payloads = local.create_many(self.store, self.lab, [(job, steps, self.boards[i % len(self.boards)])
                                                            for i in range(n)], for_worker=True)
        remote.publish_all(self.app, self.store, payloads)
        ids = [p["job_id"] for p in payloads]
        deadline = time.monotonic() + 300
        while self.running(ids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs {ids} not done after 300 s")
            time.sleep(POLL_S)
        elapsed = time.perf_counter() - start
        for job_id in ids:
            j = self.store.job(job_id)
            if (j["health"], j["result"]) != ("complete", "passed"):
                failed = [s for s in j["steps"] if s["status"] != "pass"][:1]
                raise RuntimeError(f"job {job_id} ended {j['health']}, {j['result']}: {j['reason']} "
                                   f"{failed[0]['output'][-500:] if failed else ''}")
        return elapsed, ids


def python_start_s() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def load1() -> float:
    return os.getloadavg()[0]


def throughput(ctl: Controller, bench: Bench, prepared, n: int, rounds: int) -> dict:
    """Rounds of (panio batch, bare unsigned batch, bare signed batch), one warm-up round first; each ratio is
    panio's rate over that round's bare rate, and the figure the median of the rounds' ratios."""
    ctl.batch(prepared, n)
    for side in BARE:
        bench.bare_batch(n, side)
    rounds_, loads = [], []
    for _ in range(rounds):
        panio_s, _ids = ctl.batch(prepared, n)
        rounds_.append({"panio": n / panio_s, **{side: n / bench.bare_batch(n, side) for side in BARE}})
        loads.append(load1())
    out = {"jobs_per_s": statistics.median(r["panio"] for r in rounds_), "rounds": rounds_, "load": loads, "n": n}
    for side in BARE:
        out[f"bare_{side}_per_s"] = statistics.median(r[side] for r in rounds_)
        out[f"ratio_{side}"] = statistics.median(r["panio"] / r[side] for r in rounds_)
    return out


def long_job(ctl: Controller, prepared, steps: int, rounds: int, starts: int = 5) -> dict:
    """Rounds of ``starts`` bare interpreter starts, one job of ``steps`` steps, ``starts`` starts again (the job
    takes seconds: the starts on both sides of it see the load it saw); one warm-up round first."""
    ctl.batch(prepared, 1)
    python_start_s()
    pairs, loads, recorded = [], [], []
    for _ in range(rounds):
        before = [python_start_s() for _ in range(starts)]
        elapsed, ids = ctl.batch(prepared, 1)
        floor = statistics.median(before + [python_start_s() for _ in range(starts)])
        pairs.append((elapsed / steps, floor))
        loads.append(load1())
        recorded.append(statistics.median(s["duration_s"] for s in ctl.store.job(ids[0])["steps"]))
    return {"per_step_s": statistics.median(p for p, _ in pairs), "python_s": statistics.median(f for _, f in pairs),
            "ratio": statistics.median(p / f for p, f in pairs), "step_recorded_s": statistics.median(recorded),
            "pairs": pairs, "load": loads, "steps": steps}


def pg_url(base: str) -> tuple[str | None, str]:
    """A fresh schema on ``base`` (as tests/jobhelp.py makes one): (results URL, "") or (None, why not)."""
    import sqlalchemy as sa

    schema = "bench_" + uuid.uuid4().hex[:12]
    engine = sa.create_engine(base.replace("postgresql://", "postgresql+psycopg://"), connect_args={"connect_timeout": 3})
    try:
        with engine.begin() as c:
            c.execute(sa.text(f"CREATE SCHEMA {schema}"))
    except (sa.exc.OperationalError, ImportError) as exc:
        return None, str(getattr(exc, "orig", exc)).strip().splitlines()[0]
    finally:
        engine.dispose()
    return f"{base}?options=-csearch_path%3D{schema}", ""


def drop_pg(url: str) -> None:
    import sqlalchemy as sa

    base, schema = url.split("?", 1)[0], url.rsplit("%3D", 1)[1]
    engine = sa.create_engine(base.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as c:
        c.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
    engine.dispose()


def one_database(kind: str, url: str, bench: Bench, tmp: Path, args) -> dict:
    workers = Workers(tmp, bench.redis.url, PANIO_RESULTS_URL=url)
    workers.lab = Path(bench.env["PANIO_LAB"])  # a worker serves its own lab file: the simulated boards'
    workers.start("local", concurrency=args.concurrency)
    try:
        ctl = Controller(bench, workers)
        transact = ctl.prepare(job_file(tmp, "transact", [TRANSACT]))
        ping = ctl.prepare(job_file(tmp, "ping", ["panio ping ${target}"]))
        long = ctl.prepare(job_file(tmp, "long", [TRANSACT] * args.steps))
        return {"transact": throughput(ctl, bench, transact, args.jobs, args.rounds),
                "ping": throughput(ctl, bench, ping, args.jobs, args.rounds),
                "long": long_job(ctl, long, args.steps, args.long_rounds)}
    finally:
        workers.stop_all()


def verdict(key: tuple[str, str], ratio: float) -> str:
    goal, at_least = GOALS[key]
    met = ratio >= goal if at_least else ratio <= goal
    return f"goal {'≥' if at_least else '≤'} {goal:g}×  {'met' if met else 'MISSED'}"


def loads(r: dict) -> str:
    return f"load {min(r['load']):.1f}-{max(r['load']):.1f}"


def report(results: dict, args, skipped: dict[str, str]) -> None:
    print(f"panio jobs vs bare Celery: bare Celery measured in the same run, alternating (ABC...: a panio batch, "
          f"a bare unsigned batch, a bare signed batch; each ratio is the median of the {args.rounds} rounds' "
          f"ratios; the long job's, of {args.long_rounds} rounds of 5 `python -c pass`, one job, 5 `python -c pass`)")
    print(f"  {args.boards} simulated boards (panio-sim, PTY consoles, captures running); a private redis-server; "
          f"`panio worker --host local --concurrency {args.concurrency}` (signed messages) vs bare Celery workers "
          f"(threads, -c {args.concurrency}, a task returning its argument; unsigned JSON, and task messages signed "
          f"with Celery's auth serializer, RSA-2048 as panio's keys); {args.jobs} jobs / {args.jobs} tasks a batch")
    print(f"  panio: record the batch's jobs (planned, one transaction) + publish each, until the results database "
          f"shows all done (polled every {POLL_S * 1000:g} ms); bare: send_task x N, then .get() each; "
          f"{os.cpu_count()} cores, python {sys.version.split()[0]}")
    for kind in ("sqlite", "postgresql"):
        if kind in skipped:
            print(f"\n{kind}: SKIPPED, not measured: {skipped[kind]}")
            continue
        r = results[kind]
        print(f"\n{kind} ({r['url']})")
        for name, what in (("transact", "one-step jobs (serial transact)"),
                           ("ping", "fixed cost of a job (one `ping` step: a job needs a step)")):
            m = r[name]
            print(f"  {what:<58} panio={m['jobs_per_s']:.1f} jobs/s   {loads(m)}")
            for side in BARE:
                print(f"    {'beside bare Celery, ' + side:<56} bare={m[f'bare_{side}_per_s']:.1f} tasks/s   "
                      f"ratio {m[f'ratio_{side}']:.3f}×   {verdict((name, kind), m[f'ratio_{side}'])}")
        m = r["long"]
        print(f"  {'one job of ' + str(m['steps']) + ' serial transact steps':<58} panio={m['per_step_s'] * 1000:.2f} "
              f"ms/step   python -c pass={m['python_s'] * 1000:.1f} ms   ratio {m['ratio']:.3f}×   "
              f"{verdict(('long', kind), m['ratio'])}   {loads(m)}   (the runner records "
              f"{m['step_recorded_s'] * 1000:.2f} ms per step)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller batches and fewer rounds (about a minute)")
    ap.add_argument("--jobs", type=int, help="jobs (and bare tasks) per batch (default 30, quick 12)")
    ap.add_argument("--rounds", type=int, help="paired rounds per throughput measurement (default 5, quick 3)")
    ap.add_argument("--long-rounds", type=int, help="paired rounds of the long job (default 3, quick 2)")
    ap.add_argument("--steps", type=int, default=200, help="steps of the long job (default 200)")
    ap.add_argument("--boards", type=int, default=4, help="simulated boards (default 4)")
    ap.add_argument("--concurrency", type=int, default=4, help="worker threads, both workers (default 4)")
    ap.add_argument("--pg-url", default=os.environ.get("PANIO_BENCH_PG_URL", PG_URL),
                    help=f"PostgreSQL to make a schema in (default {PG_URL})")
    ap.add_argument("--only", choices=("sqlite", "postgresql"), help="one database only")
    ap.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    args = ap.parse_args()
    args.jobs = args.jobs or (12 if args.quick else 30)
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.long_rounds = args.long_rounds or (2 if args.quick else 3)
    started = time.monotonic()
    results: dict = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="panio-jobs-bench-") as d:
        tmp = Path(d)
        bench = Bench(tmp, args.boards, args.concurrency)
        try:
            bench.start()
            for kind in ("sqlite", "postgresql"):
                if args.only and kind != args.only:
                    skipped[kind] = "--only " + args.only
                    continue
                if kind == "sqlite":
                    url = f"sqlite:///{tmp / 'results.db'}"
                else:
                    url, why = pg_url(args.pg_url)
                    if url is None:
                        skipped[kind] = f"PostgreSQL not available at {args.pg_url} ({why})"
                        continue
                try:
                    results[kind] = {"url": url.split("?")[0], **one_database(kind, url, bench, tmp, args)}
                finally:
                    if kind == "postgresql":
                        drop_pg(url)
        finally:
            bench.stop()
    report(results, args, skipped)
    print(f"\n(the run took {time.monotonic() - started:.0f} s)")
    if args.json:
        print(json.dumps({"results": results, "skipped": skipped}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
