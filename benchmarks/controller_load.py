"""The controller under N boards' load, on one machine (issue 38 item 5): real controller processes, simulated
hosts at the protocol level.

Started here: a private redis-server (broker, leases, the hosts' report streams), a PostgreSQL database made for
the run (dropped after it, unless ``--keep``), and the controller's processes as an operator runs them:
``panio dashboard`` (the HTTP API), ``panio recorder`` (records the hosts' signed reports, and reconciles) and
``panio schedule serve`` (no schedule: it idles as in a lab between firings). The job source is the API: a
submitter token posts each board's job (``POST /api/v1/jobs``, one ``panio ping`` step) every ``--job-every-s``
seconds, the boards' jobs spread evenly over the period.

The hosts: ``--boards`` / ``--boards-per-host`` control hosts, a thread each, in ``--sim-processes`` processes
(``benchmarks/_sim_hosts.py``): each takes its queue's signed messages as a worker does, verifies them, takes
the target's lease with its fencing token in Redis and sends the signed reports a reporting worker sends
(panio's own ``ReportingStore`` and ``RedisLeaseStore``), running each job's step as a no-op.

Printed, each goal beside its figure (issue 38's goals: 1,000 boards; at 10,000 the same, and where it bends):
jobs/s offered and sustained (recorded done in the window), lost (submitted, not recorded complete after the
drain), run twice (a job run by the hosts more than once), queue wait p50/p99 (the job's row made by the API to
its lease taken on the host), recorded after (the host's verdict to its row done), API p99 (a submission's round
trip), the controller's CPU in cores (its processes, Redis and PostgreSQL's backends of the run's database, from
/proc: ``_proccpu``), the database's connections (``pg_stat_activity``, the most seen, sampled each second) and
the machine's load.

Run: .venv/bin/python benchmarks/controller_load.py --boards 1000 --job-every-s 60 --minutes 10 [--json]
Needs /usr/bin/redis-server and a PostgreSQL at ``--pg`` (default postgresql://postgres@127.0.0.1:5432).
``PANIO_RESULTS_POOL`` in the environment is passed to the controller's processes (their connection pool).
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import re
import signal
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

from _bench import emit, load, percentile, value_row  # noqa: E402

PANIO = str(Path(sys.executable).parent / "panio")
JOB = "name = 'noop'\ntarget = 'b00000'\n[[steps]]\nname = 'ping'\nrun = 'ping ${target} --count 1'\n"
GOALS_1000 = {"lost": 0, "twice": 0, "wait_p99_s": 2.0, "cores": 0.5, "db_connections": 20}


def board(i: int) -> str:
    return f"b{i:05d}"


def host(i: int) -> str:
    return f"h{i:04d}"


# --- set-up ------------------------------------------------------------------

def write_lab(path: Path, boards: int, per_host: int) -> dict[str, list[str]]:
    hosts: dict[str, list[str]] = {}
    lines = []
    for i in range(boards):
        hosts.setdefault(host(i // per_host), []).append(board(i))
    for h in hosts:
        lines.append(f'[hosts.{h}]\nssh = "ops@{h}.invalid"\n')
    for h, targets in hosts.items():
        lines += [f'[targets.{t}]\nhost = "{h}"\ntags = ["load"]\n' for t in targets]
    path.write_text("\n".join(lines))
    return hosts


def make_keys(root: Path, hosts: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The controller's pair (``panio keys init``'s code), trusting a certificate named as each host; the hosts'
    one key, their store trusting the controller. (controller env, hosts' paths)"""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    from bench_agent.jobs.signing import CERT_ENV, KEY_ENV, STORE_ENV, Keys
    from controller import keys

    ctl = Keys(root / "controller" / "signing.key", root / "controller" / "signing.crt", root / "trusted")
    keys.create("controller", ctl)
    hosts_store = root / "hosts-trusted"
    hosts_store.mkdir(mode=0o700)
    (hosts_store / "controller.crt").write_bytes(ctl.cert.read_bytes())
    key = rsa.generate_private_key(public_exponent=65537, key_size=keys.KEY_BITS)
    key_path = root / "hosts.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    now = datetime.datetime.now(datetime.timezone.utc)
    for h in hosts:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, h),
                             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "panio")])
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=2)).sign(key, hashes.SHA256()))
        (ctl.store / f"{h}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return ({KEY_ENV: str(ctl.key), CERT_ENV: str(ctl.cert), STORE_ENV: str(ctl.store)},
            {"key": str(key_path), "store": str(hosts_store)})


def pg_admin(pg: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as c:
        c.execute(sql)


def pg_connections(conn, db: str) -> int:
    return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (db,)).fetchone()[0]


class Procs:
    """The processes this run started, by kind (for _proccpu), each in its own process group."""

    def __init__(self, root: Path) -> None:
        self.root, self.procs = root, []

    def start(self, kind: str, argv: list[str], env: dict, ready: str | None = None, timeout_s: float = 120):
        log = self.root / f"{kind}-{len(self.procs)}.log"
        proc = subprocess.Popen(argv, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append((kind, proc, log))
        deadline = time.monotonic() + timeout_s
        while ready and not re.search(ready, log.read_text()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{kind} did not start: {log.read_text()[-800:]}")
            time.sleep(0.1)
        return proc, log

    def pids(self) -> dict[int, str]:
        return {p.pid: kind for kind, p, _ in self.procs if p.poll() is None}

    def stop(self) -> None:
        for _, p, _ in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for _, p, _ in reversed(self.procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


# --- the load ----------------------------------------------------------------

class Submitter:
    """Posts board ``j % N``'s job at ``t0 + j / rate``, from ``threads`` keep-alive connections."""

    def __init__(self, url: str, token: str, boards: int, every_s: float, seconds: float, threads: int) -> None:
        self.url, self.token, self.boards = url, token, boards
        self.rate, self.total = boards / every_s, int(boards * seconds / every_s)
        self.next = 0
        self.lock = threading.Lock()
        self.sent: list[tuple[int, float, float]] = []  # (job id, submitted at, round trip s)
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def start(self) -> None:
        self.t0 = time.time() + 0.5
        for t in self.threads:
            t.start()

    def join(self) -> None:
        for t in self.threads:
            t.join()
        self.t_end = time.time()

    def _run(self) -> None:
        hostport = self.url.split("//", 1)[1]
        conn = http.client.HTTPConnection(hostport, timeout=60)
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        while True:
            with self.lock:
                j = self.next
                self.next += 1
            if j >= self.total or time.time() > self.t0 + 1.1 * self.total / self.rate + 5:
                return  # the API fell far behind the schedule: what was not sent by then is not offered late
            due = self.t0 + j / self.rate
            if due > time.time():
                time.sleep(due - time.time())
            body = json.dumps({"toml": JOB, "file": "noop.toml", "target": board(j % self.boards)})
            start = time.perf_counter()
            try:
                conn.request("POST", "/api/v1/jobs", body, headers)
                answer = conn.getresponse()
                data = answer.read()
                took = time.perf_counter() - start
                if answer.status != 201:
                    self.errors.append(f"{answer.status}: {data[:200]!r}")
                    continue
                with self.lock:
                    self.sent.append((json.loads(data)["job_id"], time.time(), took))
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                conn.close()
                conn = http.client.HTTPConnection(hostport, timeout=60)


class Sampler(threading.Thread):
    """Every second: the run database's connections and the load average."""

    def __init__(self, pg: str, db: str) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(f"{pg}/postgres", autocommit=True)
        self.db, self.conns, self.loads = db, [], []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            self.conns.append(pg_connections(self.conn, self.db) - 0)
            self.loads.append(os.getloadavg()[0])


# --- one run -----------------------------------------------------------------

def run(args) -> dict:
    from _proccpu import Tracker, spent
    from peerhelp import PrivateRedis

    tmp = tempfile.mkdtemp(prefix="panio-ctlload-")
    root = Path(tmp)
    db = f"panio_load_{uuid.uuid4().hex[:8]}"
    pg_admin(args.pg, f"CREATE DATABASE {db}")
    results = f"{args.pg}/{db}"
    redis = PrivateRedis(root)
    redis.start()
    procs = Procs(root)
    stop_files: list[Path] = []
    try:
        lab = root / "lab.toml"
        hosts = write_lab(lab, args.boards, args.boards_per_host)
        ctl_keys, host_keys = make_keys(root / "keys", list(hosts))
        prefix = f"l{uuid.uuid4().hex[:6]}:"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PANIO_") or k == "PANIO_RESULTS_POOL"}
        env.update(PANIO_BROKER=redis.url, PANIO_REDIS_PREFIX=prefix, PANIO_RESULTS_URL=results,
                   PANIO_LAB=str(lab), PANIO_STATE_DIR=str(root / "cstate"), HOME=str(root), **ctl_keys)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        token = subprocess.run([PANIO, "token", "add", "load", "--scope", "submitter", "--tag", "load", "--json"],
                               env=env, capture_output=True, text=True, check=True).stdout
        token = json.loads(token)["token"]
        _, dlog = procs.start("dashboard", [PANIO, "dashboard", "--port", "0"], env, r"http://\S+/")
        url = re.search(r"(http://\S+)/", dlog.read_text()).group(1)
        procs.start("recorder", [PANIO, "recorder", "--lab", str(lab)], env, "recorder: recording")
        procs.start("scheduler", [PANIO, "schedule", "serve"], env, None)
        # the hosts, a share of them a process
        names = list(hosts)
        n = max(1, min(args.sim_processes or (len(names) + 249) // 250, len(names)))
        sim_logs = []
        for k in range(n):
            cfg = root / f"sim-{k}.json"
            part = {h: hosts[h] for h in names[k::n]}
            cfg.write_text(json.dumps({"hosts": part, "redis": redis.url, "prefix": prefix, "state": str(root / "hosts"),
                                       "log": str(root / f"sim-{k}.runs"), **host_keys}))
            sim_logs.append(root / f"sim-{k}.runs")
            stop_files.append(Path(f"{cfg}.stop"))
            hosts_env = {k2: v for k2, v in env.items() if not k2.startswith("PANIO_")}
            procs.start("sim", [sys.executable, "-P", str(HERE / "_sim_hosts.py"), str(cfg)], hosts_env,
                        None)
        deadline = time.monotonic() + 300
        while not all(p.exists() and "# ready" in p.read_text() for p in sim_logs):
            if time.monotonic() > deadline:
                raise SystemExit("the simulated hosts did not start")
            time.sleep(0.2)
        controller_kinds = {"dashboard", "recorder", "scheduler", "redis"}

        def pids() -> dict[int, str]:
            return {**procs.pids(), redis.proc.pid: "redis"}

        tracker = Tracker(tmp, pids, pg_database=db).start()
        sampler = Sampler(args.pg, db)
        sampler.start()
        sub = Submitter(url, token, args.boards, args.job_every_s, args.minutes * 60, args.threads)
        a = tracker.mark()
        sub.start()
        sub.join()
        b = tracker.mark()
        window_s = b["at"] - a["at"]
        # drain: every submitted job recorded done, or the deadline
        ids = [j for j, _, _ in sub.sent]
        import psycopg

        with psycopg.connect(results, autocommit=True) as c:
            end = time.monotonic() + args.drain_s
            while time.monotonic() < end:
                left = c.execute("SELECT count(*) FROM panio_jobs WHERE state <> 'done'").fetchone()[0]
                if left == 0:
                    break
                time.sleep(1)
            rows = {r[0]: r[1:] for r in c.execute(
                "SELECT id, state, health, result, created_at, finished_at FROM panio_jobs WHERE id = ANY(%s)",
                (ids,))}
        sampler.stopping.set()
        sampler.join()
        tracker.stop()
        for f in stop_files:
            f.touch()
        runs: dict[int, list[tuple[float, float]]] = {}
        notes = []
        for p in sim_logs:
            for line in p.read_text().splitlines():
                if line.startswith("#"):
                    if not line.startswith(("# ready", "# stopped")):
                        notes.append(line)
                    continue
                job, _h, leased, finished = line.split()
                runs.setdefault(int(job), []).append((float(leased), float(finished)))
        cpu = spent(a, b)
        ctl = {k: round(v / window_s, 3) for k, v in cpu.items() if k in controller_kinds | {"results_db"}}
        sim_cores = round(cpu.get("sim", 0.0) / window_s, 3)
        complete = [j for j in ids if j in rows and rows[j][0] == "done" and rows[j][1] == "complete"]
        lost = len(ids) - len(complete)
        twice = sum(1 for v in runs.values() if len(v) > 1)
        waits = [runs[j][0][0] - rows[j][3] for j in ids if j in runs and j in rows]
        lags = [rows[j][4] - runs[j][0][1] for j in complete if j in runs and rows[j][4]]
        in_window = [j for j in complete if rows[j][4] and sub.t0 <= rows[j][4] <= sub.t_end]
        api = [t for _, _, t in sub.sent]
        out = {
            "boards": args.boards, "hosts": len(hosts), "boards_per_host": args.boards_per_host,
            "job_every_s": args.job_every_s, "minutes": args.minutes, "sim_processes": n,
            "offered_jobs_s": round(sub.rate, 2), "submitted_jobs_s": round(len(ids) / (sub.t_end - sub.t0), 2),
            "scheduled": sub.total, "submitted": len(ids), "submit_errors": len(sub.errors), "submit_error_sample": sub.errors[:3],
            "sustained_jobs_s": round(len(in_window) / (sub.t_end - sub.t0), 2),
            "lost": lost + len(sub.errors), "run_twice": twice,
            "wait_p50_s": round(percentile(waits, 50), 3) if waits else None,
            "wait_p99_s": round(percentile(waits, 99), 3) if waits else None,
            "recorded_after_p50_s": round(percentile(lags, 50), 3) if lags else None,
            "recorded_after_p99_s": round(percentile(lags, 99), 3) if lags else None,
            "api_p50_ms": round(percentile(api, 50) * 1000, 1) if api else None,
            "api_p99_ms": round(percentile(api, 99) * 1000, 1) if api else None,
            "controller_cores": round(sum(ctl.values()), 3), "controller_cores_by_kind": ctl,
            "sim_hosts_cores": sim_cores,
            "db_connections_max": max(sampler.conns) if sampler.conns else None,
            "results_pool": os.environ.get("PANIO_RESULTS_POOL", "default"),
            "load": [round(min(sampler.loads), 1), round(max(sampler.loads), 1)] if sampler.loads else [load(), load()],
            "hosts_notes": notes[:5], "window_s": round(window_s, 1),
        }
        return out
    finally:
        for f in stop_files:
            f.touch()
        procs.stop()
        redis.stop()
        if not args.keep:
            import shutil

            pg_admin(args.pg, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept: {tmp}, database {db}", file=sys.stderr)


def rows_of(r: dict) -> list[dict]:
    """The figures as _bench rows, each with its goal (issue 38's, for 1,000 boards, held at every size)."""
    loads, g = r["load"], GOALS_1000
    at = f" ({r['boards']} boards)"
    out = [
        value_row("jobs/s sustained" + at, r["sustained_jobs_s"], ">=", round(r["offered_jobs_s"] * 0.95, 2),
                  "jobs/s", loads, offered=r["offered_jobs_s"]),
        value_row("lost" + at, r["lost"], "<=", g["lost"], "jobs", loads),
        value_row("run twice" + at, r["run_twice"], "<=", g["twice"], "jobs", loads),
        value_row("queue wait p99" + at, r["wait_p99_s"] if r["wait_p99_s"] is not None else float("inf"), "<=",
                  g["wait_p99_s"], "s", loads, p50=r["wait_p50_s"]),
        value_row("controller CPU" + at, r["controller_cores"], "<=", g["cores"], "cores", loads,
                  by_kind=r["controller_cores_by_kind"]),
        value_row("database connections (max)" + at, r["db_connections_max"] or 0, "<=", g["db_connections"],
                  "connections", loads),
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boards", type=int, default=1000, help="simulated boards (default 1000; issue 38: 1000, 10000)")
    ap.add_argument("--boards-per-host", type=int, default=10, help="boards a simulated control host serves")
    ap.add_argument("--job-every-s", type=float, default=60.0, help="each board gets a job this often")
    ap.add_argument("--minutes", type=float, default=10.0, help="how long jobs are submitted")
    ap.add_argument("--drain-s", type=float, default=120.0, help="how long to wait for the last jobs after it")
    ap.add_argument("--sim-processes", type=int, default=0, help="processes the hosts run in (default: 250 a process)")
    ap.add_argument("--threads", type=int, default=16, help="the submitter's connections")
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432",
                    help="PostgreSQL server (a database is made for the run and dropped after)")
    ap.add_argument("--keep", action="store_true", help="keep the run's folder and database (their names on stderr)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout (the figures and the run)")
    args = ap.parse_args()
    # stopped from outside (a CI timeout, kill): still stop the controller's processes and drop the database
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    r = run(args)
    if not args.json:
        print(f"  {r['boards']} boards on {r['hosts']} hosts ({r['sim_processes']} processes), a job a board every "
              f"{r['job_every_s']:g} s for {r['minutes']:g} min: offered {r['offered_jobs_s']} jobs/s, sustained "
              f"{r['sustained_jobs_s']}; submitted {r['submitted']} of {r['scheduled']} ({r['submitted_jobs_s']} jobs/s; "
              f"{r['submit_errors']} refused or failed)")
        print(f"  queue wait p50 {r['wait_p50_s']} s p99 {r['wait_p99_s']} s; recorded after the host's verdict p50 "
              f"{r['recorded_after_p50_s']} s p99 {r['recorded_after_p99_s']} s; API submit p50 {r['api_p50_ms']} ms "
              f"p99 {r['api_p99_ms']} ms")
        print(f"  controller CPU {r['controller_cores']} cores {r['controller_cores_by_kind']}; simulated hosts "
              f"{r['sim_hosts_cores']} cores; DB connections max {r['db_connections_max']} (pool "
              f"{r['results_pool']}); load {r['load'][0]}-{r['load'][1]}")
        for note in r["hosts_notes"]:
            print(f"  host: {note}")
    emit(__file__, rows_of(r), args.json, {"run": r})


if __name__ == "__main__":
    main()
