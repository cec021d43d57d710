"""The scale harness: N control hosts x M boards under one controller, with the load a lab puts on it.

Every host is a real ``panio worker --host host-NN`` process on its own queue with its own state directory;
every board is a simulated board (``panio-sim up --no-screen --one-process``: a console on a PTY behind a
Shelly-protocol plug; one process serves a host's M boards, about 13 MiB PSS for 10; ``--board-processes``:
one process a board, with screen and HID rig, about 14 MiB PSS each) whose serial capture the worker starts
(``panio serial watch``, one supervisor process a board). ``benchmarks/procmem.py`` says what each kind of
process costs (RSS, PSS, private), and every sample here records it. One Redis (broker and leases, a private one), one results database
(``--results``, default SQLite in the run's folder), one ``panio schedule serve``, one ``panio dashboard``.

The load, as a lab makes it: two schedules (``every`` apart) each fire a suite over all boards (tag
``sim``), so every board gets two jobs a period that contend for its lease; each job is the 5-step job of
docs/scale.md (power-cycle, wait for the boot, transact twice, power state) behind a capture check. The
dashboard's ``/`` is polled every 5 s and ``panio job list`` every 10 s, as operators would; retention
(``panio job prune --older-than 30d``) runs every minute.

Recorded per minute: jobs/s, queue wait (the later of the job's creation and its board's lease coming
free, to the job taking the lease) p50/p99, job wall time, fire jitter (a slot's due time to its firing),
Redis memory, ops/s and connections, results-database size and write latency (a probe row), worker and
scheduler RSS, dashboard and ``job list`` latency. At the end, after the last jobs drained: lost (a job
that never finished, or ended incomplete), run twice (a job's marker seen twice on its board's console),
overlapping leases (two jobs of a board whose lease windows overlap, or fences out of order), and the
Redis keys left (no per-job key may stay).

CPU time by kind of process (``_proccpu.py``: /proc/PID/stat of the boards, captures, workers, their power
hooks, the scheduler, the dashboard, Redis and a PostgreSQL results database's backends; the operators'
commands by their rusage): ``cpu_s_per_job`` from the second firing to the drain over the jobs finished in
between, ``idle_cpu_s_per_s`` a process before the first job, ``idle_after_cpu_s_per_s`` after the drain.

Run: .venv/bin/python benchmarks/scale.py --hosts 10 --boards 10 --minutes 5 [--results URL] [--json]
``--json`` prints one object (jobs, lost, run_twice, overlapping_leases, queue_wait_p99_s,
fire_jitter_p99_s, jobs_per_s, minutes: [...], ...). Exits 0 unless the harness itself failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
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

import _history  # noqa: E402  (benchmarks/: --results, the database's size)
import _proccpu  # noqa: E402
import procmem  # noqa: E402
import keyhelp  # noqa: E402
from dashhelp import DashboardProc  # noqa: E402
from peerhelp import PrivateRedis  # noqa: E402

BIN = Path(sys.executable).parent
PANIO, SIM = str(BIN / "panio"), str(BIN / "panio-sim")
PROMPT = "root@sim:~# "
JOB = f"""name = "scale-5-step"
timeout_s = 120

[[steps]]
name = "capture is running"
run = "panio serial watch ${{target}}"

[[steps]]
name = "power-cycle"
run = "panio power-cycle ${{target}}"
timeout_s = 60

[[steps]]
name = "boots to a shell"
run = \"\"\"panio serial wait ${{target}} --since-step --pattern 'U-Boot[\\\\s\\\\S]*root@sim:~# ' --timeout-ms 30000\"\"\"
timeout_s = 40

[[steps]]
name = "marks the run"
run = "panio serial transact ${{target}} 'echo run-${{job_id}}-mark' --until '{PROMPT}' --timeout-ms 10000"
expect_output = "run-"

[[steps]]
name = "console answers"
run = "panio serial transact ${{target}} 'uname -a' --until '{PROMPT}' --timeout-ms 10000"
expect_output = "Linux"

[[steps]]
name = "reports power on"
run = "panio power-state ${{target}}"
expect_output = "Power ON"
"""


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


class Run:
    """One harness run: its processes, its folder, what it sampled."""

    def __init__(self, args) -> None:
        self.args = args
        self.dir = Path(tempfile.mkdtemp(prefix="panio-scale-"))
        self.redis = PrivateRedis(self.dir)
        self.results = args.results or f"sqlite:///{self.dir / 'results.db'}"
        self.lab = self.dir / "lab.toml"
        self.prefix = "scale:"
        self.procs: list[subprocess.Popen] = []
        self.samples: list[dict] = []
        self.fires: list[float] = []
        self.latency: dict[str, list[tuple[float, float]]] = {"dashboard": [], "job_list": []}
        self.op_cpu: dict[str, list[float]] = {}  # an operator command's kind -> each run's CPU s (rusage)
        self.op_lock = threading.Lock()
        self.cpu_marks: dict[str, dict] = {}
        self.stopping = threading.Event()
        self.boards = args.hosts * args.boards

    @property
    def env(self) -> dict:
        return {**os.environ, "PANIO_LAB": str(self.lab), "PANIO_STATE_DIR": str(self.dir / "state"),
                "PANIO_RESULTS_URL": self.results, "PANIO_BROKER": self.redis.url, "PANIO_REDIS_PREFIX": self.prefix,
                "HOME": str(self.dir), **keyhelp.controller_env()}

    def panio(self, *argv: str, timeout: float = 120, check: bool = True,
              kind: str | None = None) -> subprocess.CompletedProcess:
        """``panio ARGV``; with ``kind`` its CPU time (the child's rusage as it is reaped) counts to ``kind``."""
        if kind is None:
            return subprocess.run([PANIO, *argv], env=self.env, capture_output=True, text=True, timeout=timeout,
                                  check=check)
        proc = subprocess.Popen([PANIO, *argv], env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        got: dict[str, str] = {}
        readers = [threading.Thread(target=lambda n, f: got.__setitem__(n, f.read()), args=(n, f), daemon=True)
                   for n, f in (("out", proc.stdout), ("err", proc.stderr))]
        for th in readers:
            th.start()
        deadline = time.monotonic() + timeout
        for th in readers:
            th.join(max(0.0, deadline - time.monotonic()))
        timed_out = any(th.is_alive() for th in readers)
        if timed_out:
            proc.kill()
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here, not by Popen: its rusage is the child's CPU
        proc.returncode = os.waitstatus_to_exitcode(status)
        with self.op_lock:
            self.op_cpu.setdefault(kind, []).append(usage.ru_utime + usage.ru_stime)
        if timed_out:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, got.get("out", ""), got.get("err", ""))
        if check:
            done.check_returncode()
        return done

    # --- bringing it up ----------------------------------------------------

    def up(self) -> None:
        import redis

        self.redis.start()
        self.redis_empty = redis.Redis.from_url(self.redis.url).info("memory")["used_memory"]
        from concurrent.futures import ThreadPoolExecutor

        light = [] if self.args.board_processes else ["--no-screen", "--one-process"]
        env = self.env  # made once: its keys are generated on first use, not from four threads at once
        with ThreadPoolExecutor(4) as pool:  # a bench a host (`panio-sim up` starts at most 16 boards)
            list(pool.map(lambda h: subprocess.run(
                [SIM, "up", "--boards", str(self.args.boards), "--boot-s", "0.2", "--countdown-s", "0.3", *light,
                 "--dir", str(self.sim_dir(h))], env=env, check=True, capture_output=True,
                timeout=60 + 5 * self.args.boards), range(self.args.hosts)))
        self._spread_over_hosts()
        (self.dir / "job.toml").write_text(JOB)
        (self.dir / "suite.toml").write_text('name = "scale"\njobs = ["job.toml"]\ntags = ["sim"]\n')
        workers = [self.start_worker(h, wait=False) for h in range(self.args.hosts)]  # they start side by side
        for proc in workers:
            self._ready(proc, "ready.", deadline=time.monotonic() + 120 + 3 * self.args.hosts)
        for name in self.schedule_names:
            self.panio("schedule", "add", f"{self.schedule_prefix}{name}", "--suite", str(self.dir / "suite.toml"),
                       "--every", f"{self.args.every_s:g}s")
        if self.args.first_s is not None:
            self._first_fire_in(self.args.first_s)
        self.scheduler = self._start([PANIO, "schedule", "serve"], "scheduler", {}, ready="scheduler running")
        self.dashboard = DashboardProc(self.env, self.dir / "dashboard.log")
        self.redis_up = redis.Redis.from_url(self.redis.url).info("memory")["used_memory"]  # before any job
        database = self.results.rpartition("/")[2].split("?")[0] if self.results.startswith("postgresql") else None
        self.cpu = _proccpu.Tracker(str(self.dir), self._own_pids, database).start()

    def _own_pids(self) -> dict[int, str]:
        """The processes the harness started whose CPU the tracker reads by pid (their command lines need not
        name the run's folder): workers, the scheduler, the dashboard, Redis."""
        own = {p.pid: "worker" if p.log.name.startswith("worker-") else p.log.stem for p in self.procs}
        if getattr(self, "dashboard", None):
            own[self.dashboard.proc.pid] = "dashboard"
        if self.redis.proc:
            own[self.redis.proc.pid] = "redis"
        return own

    def _cpu_mark(self) -> dict:
        """Every kind's CPU seconds so far: the run's processes (/proc), the operators' commands (rusage), the
        harness itself (its own threads: sampling, polling, this tracker)."""
        import resource

        mark = self.cpu.mark()
        with self.op_lock:
            mark["ops"] = {k: (len(v), sum(v)) for k, v in self.op_cpu.items()}
        me = resource.getrusage(resource.RUSAGE_SELF)
        mark["harness"] = me.ru_utime + me.ru_stime
        return mark

    schedule_prefix = "scale-"

    @property
    def schedule_names(self) -> tuple[str, ...]:
        return ("a", "b")[:self.args.schedules]

    def _first_fire_in(self, first_s: float) -> None:
        """The schedules' first slot ``first_s`` from now instead of a period from now (a smoke at a long
        period still fires once): their ``next_due`` set before the scheduler starts."""
        from controller.jobs.schedules import ScheduleStore

        store = ScheduleStore(self.results)
        with store.engine.begin() as c:
            c.execute(store.t.update().where(store.t.c.name.startswith(self.schedule_prefix))
                      .values(next_due=time.time() + first_s))

    def start_worker(self, h: int, log: str = "", wait: bool = True) -> subprocess.Popen:
        """Host ``h``'s `panio worker` (its own queue and state directory); again after it was killed (``log``:
        another log's name suffix, so the killed one's log stays)."""
        return self._start([PANIO, "worker", "--host", f"host-{h:02d}", "--lab", str(self.lab), "--concurrency",
                            str(self.args.concurrency or self.args.boards)], f"worker-{h:02d}{log}",
                           {**keyhelp.worker_env(), "PANIO_STATE_DIR": str(self.dir / f"w{h:02d}")},
                           ready="ready." if wait else None)

    def sim_dir(self, host: int) -> Path:
        return self.dir / f"sim-{host:02d}"

    def _spread_over_hosts(self) -> None:
        """One lab: host ``h``'s bench's ``board{i}`` becomes ``board{h * M + i}`` on ``host-h``, which its own
        worker serves (transport celery, so the harness's `serial log` reaches it too)."""
        import tomlkit

        doc, targets, hosts = tomlkit.document(), tomlkit.table(), tomlkit.table()
        for h in range(self.args.hosts):
            host = tomlkit.table()
            host["ssh"] = f"ops@host-{h:02d}.invalid"
            host["transport"] = "celery"
            hosts[f"host-{h:02d}"] = host
            bench = tomlkit.parse((self.sim_dir(h) / "lab.toml").read_text())
            for i in range(self.args.boards):
                table = bench["targets"][f"board{i}"]
                table["host"] = f"host-{h:02d}"
                targets[f"board{h * self.args.boards + i}"] = table
        doc["hosts"], doc["targets"] = hosts, targets
        self.lab.write_text(tomlkit.dumps(doc))

    def _start(self, argv: list[str], name: str, extra: dict, ready: str | None) -> subprocess.Popen:
        """Start ``argv`` logging to ``name``.log; wait for ``ready`` in its log (None: do not wait)."""
        log = self.dir / f"{name}.log"
        proc = subprocess.Popen(argv, env={**self.env, **extra}, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        proc.log = log
        self.procs.append(proc)
        if ready is not None:
            self._ready(proc, ready, time.monotonic() + 120)
        return proc

    @staticmethod
    def _ready(proc: subprocess.Popen, ready: str, deadline: float) -> None:
        while ready not in proc.log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{proc.log.stem} did not start:\n{proc.log.read_text()[-2000:]}")
            time.sleep(0.1)

    def down(self) -> None:
        if getattr(self, "dashboard", None):
            self.dashboard.stop()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        for h in range(self.args.hosts):
            if self.sim_dir(h).exists():
                subprocess.run([SIM, "down", "--dir", str(self.sim_dir(h))], env=self.env, capture_output=True,
                               timeout=120)
        self._stop_captures()
        self.redis.stop()

    def _stop_captures(self) -> None:
        """The capture supervisors the workers started (they outlive a worker by design): stopped by pid."""
        for path in Path("/proc").iterdir():
            if not path.name.isdigit():
                continue
            try:
                cmdline = (path / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "bench_agent.serial.supervisor" in cmdline and str(self.dir) in cmdline:
                try:
                    os.kill(int(path.name), signal.SIGTERM)
                except ProcessLookupError:
                    pass

    # --- load and sampling -------------------------------------------------

    def drive(self) -> None:
        threads = [threading.Thread(target=f, daemon=True) for f in (self._poll_dashboard, self._poll_job_list,
                                                                     self._prune, self._watch_fires)]
        for th in threads:
            th.start()
        self.t0 = time.time()
        marks = self.cpu_marks
        marks["t0"] = self._cpu_mark()
        first_due = self._first_due()
        end = self.t0 + self.args.minutes * 60
        # steady from the second firing when the run has one (a period and more before its end): the first
        # pays the workers' first-job imports and starts the captures, once
        steady_from = first_due - 1 + (self.args.every_s if first_due + self.args.every_s + 5 < end else 0)
        next_sample = self.t0
        while time.time() < end:
            now = time.time()
            if "warm" not in marks and now >= first_due - 1:  # the first firing: each worker's first jobs
                marks["warm"] = self._cpu_mark()  # (their imports) and each board's first capture start
            elif "idle" not in marks and "warm" not in marks and now >= self.t0 + 2:
                marks["idle"] = self._cpu_mark()  # idle: everything up, polled, before the first job
            if "steady" not in marks and now >= steady_from:  # the CPU the jobs cost: from here to the drain
                marks["steady"] = self._cpu_mark()
            if time.time() >= next_sample:
                self.samples.append(self._sample())
                next_sample += min(60.0, self.args.minutes * 60 / 2)
            time.sleep(0.5)
        self.t1 = time.time()
        for name in self.schedule_names:
            self.panio("schedule", "rm", f"{self.schedule_prefix}{name}")
        self._drain()
        marks["drained"] = self._cpu_mark()
        time.sleep(self.args.idle_after_s)  # idle again, the captures now running
        marks["idle_after"] = self._cpu_mark()
        self.cpu.stop()
        self.samples.append(self._sample())
        self.stopping.set()
        for th in threads:
            th.join(timeout=60)

    def _first_due(self) -> float:
        """When the schedules first fire (the end of the idle window)."""
        from controller.jobs.schedules import ScheduleStore

        due = [s["next_due"] for s in ScheduleStore(self.results).list()
               if s["name"].startswith(self.schedule_prefix) and s["next_due"]]
        return min(due) if due else self.t0

    def _drain(self) -> None:
        from bench_agent.results.store import ResultStore

        store = ResultStore(self.results)
        deadline = time.time() + max(180, 0.6 * self.boards)  # 2 cores run ~3 jobs/s: 1,000 boards' jobs take minutes
        while time.time() < deadline and store.active_jobs():
            time.sleep(1)

    def _poll_dashboard(self) -> None:
        while not self.stopping.wait(5):
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(self.dashboard.url + "/", timeout=60) as r:
                    r.read()
                self.latency["dashboard"].append((time.time(), time.monotonic() - t0))
            except OSError:
                self.latency["dashboard"].append((time.time(), float("inf")))

    def _poll_job_list(self) -> None:
        while not self.stopping.wait(10):
            t0 = time.monotonic()
            self.panio("job", "list", check=False, kind="job_list")
            self.latency["job_list"].append((time.time(), time.monotonic() - t0))

    def _prune(self) -> None:
        while not self.stopping.wait(60):
            self.panio("job", "prune", "--older-than", "30d", check=False, timeout=600, kind="prune")

    def _watch_fires(self) -> None:
        """Each firing of a schedule: its slot's due time to the moment the scheduler claimed it."""
        from controller.jobs.schedules import ScheduleStore

        store, due = ScheduleStore(self.results), {}
        while not self.stopping.wait(0.25):
            for s in store.list():
                was = due.get(s["name"])
                if was is not None and s["next_due"] != was and s["last_fired"]:
                    self.fires.append(s["last_fired"] - was)
                due[s["name"]] = s["next_due"]

    def _sample(self) -> dict:
        import redis

        from bench_agent.results.store import ResultStore

        info = redis.Redis.from_url(self.redis.url).info()
        store = ResultStore(self.results)
        t0 = time.monotonic()
        probe = store.create_job("scale-probe", "board0", None, {"steps": []})
        store.finish(probe, "canceled", None, "write-latency probe")
        write_s = time.monotonic() - t0
        workers = [p for p in self.procs if p.log.name.startswith("worker-")]
        return {"at": time.time(), "redis_used_memory": info["used_memory"],
                "redis_ops_per_s": info["instantaneous_ops_per_sec"], "redis_clients": info["connected_clients"],
                "redis_commands": info["total_commands_processed"],
                "redis_keys": sum(v.get("keys", 0) for k, v in info.items() if k.startswith("db")),
                "db_bytes": _history.db_size(self.results), "db_write_s": write_s,
                "worker_rss_mib": sum(rss_mib(p.pid) for p in workers),
                "scheduler_rss_mib": rss_mib(self.scheduler.pid),
                "memory_mib": procmem.measure(str(self.dir))}  # per kind: RSS / PSS / private

    # --- what happened ----------------------------------------------------

    def verdict(self) -> dict:
        from bench_agent.results.store import ResultStore

        store = ResultStore(self.results)
        jobs = [j for j in store.list_jobs(limit=10**7, name="scale-5-step")]
        done = [j for j in jobs if j["state"] == "done"]
        # a job skipped as its suite started (its board bad, or busy with its schedule's previous run) was never
        # run: not lost
        lost = [j for j in jobs if j["state"] != "done" or (j["health"] != "complete" and j["result"] != "skipped")]
        overlapping, waits = overlaps_and_waits(done)
        walls = [j["finished_at"] - j["started_at"] for j in done if j["started_at"]]
        twice = self._run_twice(done)
        span = max(self.t1 - self.t0, 1)
        out = {"hosts": self.args.hosts, "boards_per_host": self.args.boards, "boards": self.boards,
               "minutes": self.args.minutes, "every_s": self.args.every_s, "results": self.results.split(":")[0],
               "jobs": len(jobs), "done": len(done), "passed": sum(j["result"] == "passed" for j in done),
               "lost": len(lost), "lost_ids": [j["id"] for j in lost][:20], "run_twice": len(twice),
               "run_twice_ids": twice[:20], "overlapping_leases": len(overlapping),
               "jobs_per_s": round(len([j for j in done if j["finished_at"] <= self.t1]) / span, 3),
               "queue_wait_p50_s": pct(waits, 0.5), "queue_wait_p99_s": pct(waits, 0.99),
               "job_wall_p50_s": pct(walls, 0.5), "job_wall_p99_s": pct(walls, 0.99),
               "fire_jitter_p50_s": pct(self.fires, 0.5), "fire_jitter_p99_s": pct(self.fires, 0.99),
               "fires": len(self.fires),
               "dashboard_p50_s": pct([s for _, s in self.latency["dashboard"]], 0.5),
               "dashboard_p99_s": pct([s for _, s in self.latency["dashboard"]], 0.99),
               "job_list_p50_s": pct([s for _, s in self.latency["job_list"]], 0.5),
               "job_list_p99_s": pct([s for _, s in self.latency["job_list"]], 0.99),
               "load": os.getloadavg()[0], "samples": self.samples, "minutes_table": self._per_minute(done, waits)}
        if len(self.samples) > 1 and done:  # every Redis command of the run (broker, leases, pings) over its jobs
            out["redis_commands_per_job"] = round((self.samples[-1]["redis_commands"]
                                                   - self.samples[0]["redis_commands"]) / len(done), 1)
        if self.samples:  # the sample whose processes took the most memory together
            out["memory_mib"] = max((smp["memory_mib"] for smp in self.samples),
                                    key=lambda m: sum(k["pss_total"] for k in m.values()))
        out["markers_seen"] = len(self.markers)  # jobs whose run the consoles show (each once, or run_twice)
        out["boards_unread"] = self.unread
        out["readback_disagrees"] = self.readback_disagrees
        out.update(self._redis_after(len(done)))
        out.update(self._cpu(done))
        return out

    def _cpu(self, done: list[dict]) -> dict:
        """CPU seconds a job, by kind of process, from the second firing (the first when the run has no second)
        to the drain (``cpu_s_per_job``: all their CPU over the jobs finished in between; ``cpu_s_per_job_net``:
        less what the same processes spend idle over that time; ``first_firing``: the CPU of the first, apart),
        and idle CPU seconds a second per process, before the first job (``idle_cpu_s_per_s``) and after the
        drain with the captures running (``idle_after_cpu_s_per_s``). ``hooks``: the power hooks a worker ran
        (its reaped children). The operators' commands (``job_list``, ``prune``) count as one process."""
        m = self.cpu_marks
        a, b = m.get("steady", m["t0"]), m["drained"]
        jobs = sum(1 for j in done if a["at"] <= j["finished_at"] <= b["at"])
        window = b["at"] - a["at"]

        def kinds(x: dict, y: dict) -> dict[str, float]:
            got = _proccpu.spent(x, y)
            for kind, (_, cpu) in y["ops"].items():
                got[kind] = cpu - x["ops"].get(kind, (0, 0.0))[1]
            return got

        def idle(x: dict | None, y: dict) -> dict[str, float]:
            if x is None or y["at"] - x["at"] < 3:
                return {}
            return {k: round(s / (y["at"] - x["at"]) / max(1, y["alive"].get(k, 1)), 5)
                    for k, s in sorted(kinds(x, y).items())}

        gross = kinds(a, b)
        idle_before = idle(m.get("idle"), m["warm"]) if "warm" in m else {}
        idle_after = idle(m["drained"], m["idle_after"])
        alive = {k: b["alive"].get(k, 1) for k in gross}  # an operator command: one at a time
        out = {"cpu_jobs": jobs, "cpu_window_s": round(window, 1), "cpu_processes": b["alive"],
               "idle_window_s": round(m["warm"]["at"] - m["idle"]["at"], 1) if "idle" in m and "warm" in m else None,
               "idle_after_window_s": round(m["idle_after"]["at"] - m["drained"]["at"], 1),
               "idle_cpu_s_per_s": idle_before, "idle_after_cpu_s_per_s": idle_after,
               "harness_cpu_s_per_job": round((b["harness"] - a["harness"]) / max(jobs, 1), 4),
               "operator_cpu_s_per_call": {k: round((c - a["ops"].get(k, (0, 0.0))[1])
                                                    / (n - a["ops"].get(k, (0, 0))[0]), 3)
                                           for k, (n, c) in b["ops"].items() if n > a["ops"].get(k, (0, 0))[0]}}
        if "warm" in m and m["warm"] is not a:  # the first firing's CPU, apart: once a worker, once a capture
            w = m["warm"]
            out["first_firing"] = {"jobs": sum(1 for j in done if w["at"] <= j["finished_at"] < a["at"]),
                                   "cpu_s": {k: round(v, 2) for k, v in sorted(kinds(w, a).items())}}
        if jobs:
            out["cpu_s_per_job"] = {k: round(s / jobs, 4) for k, s in sorted(gross.items())}
            rate = {**idle_after, **idle_before}  # before the first job where measured; captures: after the drain
            out["cpu_s_per_job_net"] = {k: round(max(0.0, s - rate.get(k, 0.0) * alive[k] * window) / jobs, 4)
                                        for k, s in sorted(gross.items())}
        return out

    def _per_minute(self, done: list[dict], waits: list[float]) -> list[dict]:
        rows = []
        for m in range(int(-(-(self.t1 - self.t0) // 60))):
            a, b = self.t0 + 60 * m, self.t0 + 60 * (m + 1)
            inside = [j for j in done if a <= j["finished_at"] < b]
            w = [j["_wait"] for j in inside if "_wait" in j]
            lat = {k: [s for t, s in v if a <= t < b] for k, v in self.latency.items()}
            rows.append({"minute": m + 1, "jobs_per_s": round(len(inside) / 60, 3), "queue_wait_p50_s": pct(w, 0.5),
                         "queue_wait_p99_s": pct(w, 0.99), "dashboard_p50_s": pct(lat["dashboard"], 0.5),
                         "job_list_p50_s": pct(lat["job_list"], 0.5)})
        return rows

    def _run_twice(self, done: list[dict]) -> list[int]:
        """Jobs whose marker (``echo run-ID-mark``) their board's console shows more than once."""
        from concurrent.futures import ThreadPoolExecutor

        seen = self.markers = {}
        self.readback_disagrees = []
        self.unread = []  # boards whose console log could not be read: their jobs are not proven once-only
        with ThreadPoolExecutor(4) as pool:
            for marks in pool.map(self._marks, range(self.boards)):
                for job in marks:
                    seen[job] = seen.get(job, 0) + 1
        return sorted(job for job, n in seen.items() if n > 1)

    def _marks(self, i: int) -> list[int]:
        """The job ids in the ``run-ID-mark`` lines of board ``i``'s console, as often as each appears: through
        ``panio serial log`` (over Celery, as an operator reads it); above 100 boards from the capture's log files
        in the host's state directory (the same files: 1,000 `panio` processes would take minutes of CPU here)."""
        if self.boards > 100:
            return self._marks_on_disk(i)
        marks = self._marks_by_panio(i)
        if sorted(marks) != sorted(self._marks_on_disk(i)):  # the disk read stands for this one above 100 boards
            self.readback_disagrees.append(f"board{i}")
        return marks

    def _marks_by_panio(self, i: int) -> list[int]:
        marks, first = [], 0
        while True:  # 5,000 lines a read (the operation's bound), oldest first
            r = self.panio("serial", "log", f"board{i}", "--from", str(first), "--to", str(first + 4999),
                           "--json", check=False, timeout=120)
            if r.returncode != 0:
                self.unread.append((f"board{i}", r.stderr.strip()[:200]))
                return marks
            got = json.loads(r.stdout)
            for line in got.get("lines", []):
                m = re.fullmatch(r"run-(\d+)-mark", line.get("text", "").strip())
                if m:
                    marks.append(int(m.group(1)))
            first += 5000
            if got.get("last_seq") is None or first > got["last_seq"]:
                return marks

    def _marks_on_disk(self, i: int) -> list[int]:
        from bench_agent.serial import files, query

        h = i // self.args.boards
        logs = [files.log_path(f"board{i}", "console", lab) for lab in (self.dir / f"w{h:02d}" / "labs").glob("*")]
        logs = [p for p in logs if p.exists()]
        if not logs:
            self.unread.append((f"board{i}", "no capture log on disk"))
            return []
        marks, first = [], 0
        while True:
            lines, info = query.line_window(logs[0], first=first, last=first + query.MAX_LINES - 1)
            marks += [int(m.group(1)) for line in lines
                      if (m := re.fullmatch(rb"run-(\d+)-mark", line.get("data", b"").strip()))]
            first += query.MAX_LINES
            if info.get("last_seq") is None or first > info["last_seq"]:
                return marks

    def _redis_after(self, finished: int) -> dict:
        """Memory and keys after the drain: what stays per board, and whether any key names a job."""
        import redis

        r = redis.Redis.from_url(self.redis.url)
        keys = [k.decode(errors="replace") for k in r.scan_iter(count=1000)]
        shapes: dict[str, int] = {}
        for k in keys:
            shape = re.sub(r"board\d+", "board<N>", re.sub(r"\d{2,}", "<n>", re.sub(r":lab:[^:]+:", ":lab:<LAB>:", k)))
            shapes[shape] = shapes.get(shape, 0) + 1
        per_job = [k for k in keys if re.search(r"(job|task)[-:_]?\d+|celery-task-meta", k)]
        used = r.info("memory")["used_memory"]
        grown = used - self.redis_empty
        return {"redis_keys_after": len(keys), "redis_key_shapes": shapes, "redis_per_job_keys": len(per_job),
                "redis_per_job_key_examples": per_job[:5], "redis_used_memory_after": used,
                "redis_used_memory_empty": self.redis_empty,
                "redis_bytes_per_board": round(grown / self.boards),  # all that stays, over the empty server
                "redis_bytes_per_finished_job": round((used - self.redis_up) / max(finished, 1), 1)}


def overlaps_and_waits(done: list[dict]) -> tuple[list[tuple[int, int]], list[float]]:
    """Pairs of jobs of one board whose lease windows overlap (or whose fences run backwards), and each job's
    queue wait: from the later of its creation and its board's previous job finishing, to its lease."""
    by_target: dict[str, list[dict]] = {}
    for j in done:
        if j["leased_at"]:
            by_target.setdefault(j["target"], []).append(j)
    bad, waits = [], []
    for jobs in by_target.values():
        jobs.sort(key=lambda j: j["leased_at"])
        free_at = None
        for prev, job in zip([None, *jobs], jobs):
            if prev is not None:
                if job["leased_at"] < prev["finished_at"] - 0.05 or (job["fence"] or 0) <= (prev["fence"] or 0):
                    bad.append((prev["id"], job["id"]))
                free_at = prev["finished_at"]
            ready = max(job["created_at"], free_at or 0)
            job["_wait"] = max(0.0, job["leased_at"] - ready)
            waits.append(job["_wait"])
    return bad, waits


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_arguments(p: argparse.ArgumentParser, minutes: float, every_s: float) -> None:
    """The flags of a run of this harness's lab (``scale.py`` and ``night.py``), with their defaults."""
    p.add_argument("--minutes", type=float, default=minutes, help=f"how long the schedules fire (default {minutes:g})")
    p.add_argument("--every", dest="every_s", type=float, default=every_s,
                   help=f"each of the two schedules fires every S seconds (default {every_s:g})")
    _history.add_results(p, "results database (default: SQLite in the run's folder)", required=False)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--keep", action="store_true", help="leave the run's folder (logs) in place")
    p.add_argument("--idle-after-s", type=float, default=20.0, metavar="S",
                   help="after the drain, measure S seconds of idle CPU, the captures running (default 20)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=10, help="control hosts, each a `panio worker` (default 10)")
    p.add_argument("--boards", type=int, default=10, help="boards per host (default 10)")
    p.add_argument("--board-processes", action="store_true",
                   help="one simulated board a process, with screen and HID rig (default: one process a host's boards)")
    run_arguments(p, minutes=5, every_s=60)
    p.add_argument("--schedules", type=int, choices=(1, 2), default=2,
                   help="schedules firing the suite (default 2: two jobs a board a period, contending for its lease)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="jobs a worker runs at once (default: its boards; fewer when 100 hosts share 2 cores)")
    p.add_argument("--first-s", type=float, metavar="S",
                   help="the schedules' first firing S seconds after they are added (default: one period)")
    args = p.parse_args(argv)
    if min(args.hosts, args.boards) < 1 or args.boards > 16 or args.minutes <= 0 or args.every_s < 5:
        p.error("--hosts at least 1, --boards 1..16 (a simulated bench's), --minutes more than 0, --every at least 5")
    run = Run(args)
    try:
        run.up()
        run.drive()
        out = run.verdict()
    finally:
        run.down()
    out["folder"] = str(run.dir)
    if not args.keep:
        import shutil

        shutil.rmtree(run.dir, ignore_errors=True)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{args.hosts} hosts x {args.boards} boards, {args.minutes:g} min, two schedules every {args.every_s:g} s "
          f"(load average {out['load']:.1f} on {os.cpu_count()} cores)")
    for k in ("jobs", "passed", "lost", "run_twice", "overlapping_leases", "jobs_per_s", "queue_wait_p50_s",
              "queue_wait_p99_s", "job_wall_p50_s", "fire_jitter_p99_s", "dashboard_p50_s", "job_list_p50_s",
              "markers_seen", "redis_commands_per_job", "redis_keys_after", "redis_per_job_keys", "redis_bytes_per_board",
              "redis_bytes_per_finished_job"):
        print(f"  {k:<22} {out.get(k)}")
    print("  redis key shapes after: " + ", ".join(f"{k} x{n}" for k, n in out["redis_key_shapes"].items()))
    for row in out["minutes_table"]:
        print("  minute {minute}: {jobs_per_s} jobs/s, queue wait p50 {queue_wait_p50_s} p99 {queue_wait_p99_s}, "
              "dashboard {dashboard_p50_s}, job list {job_list_p50_s}".format(**row))
    for kind, m in out.get("memory_mib", {}).items():
        print(f"  memory {kind:<10} x{m['count']}: PSS {m['pss_median']} MiB each (private {m['private_median']}, "
              f"RSS {m['rss_median']}), {m['pss_total']} MiB together")
    if out.get("cpu_s_per_job"):
        print(f"  CPU by kind over {out['cpu_jobs']} jobs in {out['cpu_window_s']} s (idle: {out['idle_window_s']} s "
              f"before the first job, {out['idle_after_window_s']} s after the drain):")
        print(f"    {'kind':<11} {'processes':>9} {'CPU-s/job':>10} {'net of idle':>11} {'idle CPU-s/s':>13} "
              f"{'after drain':>12}")
        for kind, s in out["cpu_s_per_job"].items():
            print(f"    {kind:<11} {out['cpu_processes'].get(kind, '-'):>9} {s:>10.4f} "
                  f"{out['cpu_s_per_job_net'][kind]:>11.4f} {out['idle_cpu_s_per_s'].get(kind, '-'):>13} "
                  f"{out['idle_after_cpu_s_per_s'].get(kind, '-'):>12}")
        print(f"    harness itself {out['harness_cpu_s_per_job']} CPU-s/job; an operator command: "
              f"{out['operator_cpu_s_per_call']} CPU-s each")
    last = out["samples"][-1] if out["samples"] else {}
    print(f"  last sample: {json.dumps(last)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
