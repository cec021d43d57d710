"""A compressed night: the scale harness's lab with every lab fault of docs/operations.md injected on a clock.

Two control hosts x two simulated boards (``benchmarks/scale.py``'s ``Run``: a real ``panio worker`` a host, its
own queue and state directory, a private Redis started without persistence, ``--results URL`` or SQLite), two
overlapping schedules every ``--every`` seconds (10) over all boards (``panio schedule serve``), a health check on
every board (``every_s = 300``; a bad board re-checked from ``retry_s = 20`` doubling up to 80 s, the night
compressed), retention pruning every minute, the dashboard and ``panio job list`` polled, and a webhook receiver
counting every notification (``[[notify]]`` in the lab file).

The faults, spread over the first three quarters of ``--minutes`` (each on a board of its own when it can):

  plug-off-long     the board's Shelly plug switched off through its HTTP API just after a job's power-cycle step,
                    held off (switched off again if a job's power-cycle turns it on; a minute and a quarter of a
                    10-minute night), switched on again
  plug-blip         the plug switched off just after a job's power-cycle step (its boot wait), on again 5 s later
  plug-unreachable  the plug's ``state_cmd`` fails (a wrapper in front of ``shellyplug`` exits 1) for a minute
  capture-stopped   ``panio serial stop BOARD --override`` as a job's power-cycle step starts, tried again on a
                    later job until one ends incomplete (up to 6 times); nobody restarts the capture by hand:
                    the board's health check starts it as its first step
  worker-killed     host-01's worker killed with SIGKILL while it runs a job, started again 5 s later
  redis-restart     the private redis-server stopped and started again (no persistence: every key is lost)
  results-db-away   the night's own results database (PostgreSQL) unreachable for 60 s: ``ALLOW_CONNECTIONS false``
                    and its backends terminated, as a stopped or unreachable server would be; then allowed again
  redis-restart-aof the private redis-server switched to AOF persistence (``CONFIG SET appendonly yes``), stopped
                    and started again with it ~5 s later: its data kept (leases, queues)
  board-panics      a board panics at every boot (``panio-sim inject --boot-line 'Kernel panic ...' --no-prompt``)
                    for an eighth of the night (at least 45 s), then boots again (as after a good image is flashed)

``--faults a,b`` injects only those (in this order). Without ``--results`` the night makes a PostgreSQL database
of its own on 127.0.0.1:5432 (dropped at the end; SQLite in the run's folder if that server does not answer,
and then no results-db-away). For the last three faults, and every fault, the verdict says: jobs lost or run
twice among those it hit, the longest a healthy board idled (from the fault's end for the lab's own services,
from its start for a board's) against the schedule's period and a backoff step, the boards set bad meanwhile
other than the fault's own (a board blamed for the lab), whether the scheduler was still alive, the suites'
verdicts sent and the notifications by event over the fault and the minute after it.

Nothing is done by hand after a fault. At the end (schedules removed, jobs drained, up to 3 minutes for the
boards to heal) it prints, per fault: when (seconds into the night), the board, the jobs it hit (those of the
board running during the fault, up to 5 s after it) and how they ended, each schedule's fire count a minute
and the jobs the other boards finished over the fault and at least the minute from its start; and whether the
lab recovered with no operator action: every board ``good`` at the end (or why not), nothing left queued or
running, the notifications received by event.

Run: .venv/bin/python benchmarks/night.py [--minutes 10] [--every 10] [--results URL] [--faults A,B] [--json] [--keep]
``--json`` prints one object (faults: [...], recovered, boards, stuck, notifications, jobs, ...). Exits 0 when
the lab recovered on its own, 1 when it did not, 2 when the harness itself failed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402  (the scale harness: processes, lab, load, sampling)
from jobhelp import Receiver  # noqa: E402  (tests/, put on the path by scale)

CHECK = """name = "board-health"
timeout_s = 90

[[steps]]
name = "capture runs"
run = "panio serial watch ${target}"

[[steps]]
name = "powered"
run = "panio power-state ${target}"
expect_output = "Power ON"

# A board can be anywhere when its check comes (a job cut off mid-boot, a capture restarted while U-Boot counts
# down, where typing stops the autoboot): the check boots it, as a lab's check would, then asks the shell.
[[steps]]
name = "boots"
run = "panio power-cycle ${target}"
timeout_s = 60

[[steps]]
name = "boots to a shell"
run = "panio serial wait ${target} --since-step --pattern '(?s)U-Boot.*root@sim:~# ' --timeout-ms 30000"
timeout_s = 40

[[steps]]
name = "console answers"
run = "panio serial transact ${target} 'uname -a' --until 'root@sim:~# ' --timeout-ms 15000"
expect_output = "Linux"
"""

PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
DB_AWAY_S, REDIS_DOWN_S = 60.0, 5.0
OWN_DB = "postgresql://postgres@127.0.0.1:5432/panio_night?connect_timeout=3"
FAULTS = ("plug-off-long", "plug-blip", "capture-stopped", "worker-killed", "plug-unreachable", "redis-restart",
          "results-db-away", "redis-restart-aof", "board-panics")
LAB_SERVICES = ("redis-restart", "results-db-away", "redis-restart-aof")  # the lab's own: measured from their end

WRAPPER = """#!/bin/sh
# the plug's state_cmd, unreachable while the flag file exists (the harness's plug-unreachable fault)
if [ -e "$1" ]; then echo "shellyplug: $2: connection refused" >&2; exit 1; fi
shift
exec "{shellyplug}" "$@"
"""


class Night(scale.Run):
    schedule_prefix = "night-"

    def __init__(self, args) -> None:
        args.hosts, args.boards = 2, 2
        self.own_db = None
        if args.results is None:  # a PostgreSQL database of the night's own, which results-db-away makes unreachable
            try:
                import _history

                self.own_db = args.results = _history.empty_like(OWN_DB, None)
            except Exception as e:  # no server there: SQLite, and no results-db-away
                print(f"night: no PostgreSQL at {OWN_DB} ({type(e).__name__}); SQLite results", file=sys.stderr)
        super().__init__(args)
        self.prefix = "night:"
        self.receiver = Receiver()
        self.faults: list[dict] = []
        self.fire_times: dict[str, list[float]] = {}
        self.plugs: dict[str, str] = {}

    # --- the lab: health checks, notifications, a plug that can become unreachable --------------------------

    def _spread_over_hosts(self) -> None:
        import tomlkit

        super()._spread_over_hosts()
        (self.dir / "check.toml").write_text(CHECK)
        wrapper = self.dir / "plug-state"
        wrapper.write_text(WRAPPER.format(shellyplug=scale.BIN / "shellyplug"))
        wrapper.chmod(0o755)
        doc = tomlkit.parse(self.lab.read_text())
        for name, table in doc["targets"].items():
            address = str(table["power"]["state_cmd"]).split()[2]  # "shellyplug -d ADDR state"
            self.plugs[name] = address
            table["power"]["state_cmd"] = f"{wrapper} {self.dir / (name + '.unreachable')} -d {address} state"
            check = tomlkit.table()
            check["job"] = "check.toml"
            check["every_s"], check["retry_s"], check["retry_max_s"] = 300, 20, 80
            table["health_check"] = check
        hook = tomlkit.aot()
        hook.append(tomlkit.item({"name": "night", "webhook": f"{self.receiver.url}/night"}))
        doc["notify"] = hook
        self.lab.write_text(tomlkit.dumps(doc))

    # --- the faults ------------------------------------------------------------------------------------------

    def drive(self) -> None:
        injector = threading.Thread(target=self._inject, daemon=True)
        self.night_t0 = time.time()
        injector.start()
        super().drive()
        injector.join(timeout=300)
        self._heal_wait()

    def _inject(self) -> None:
        span = self.args.minutes * 60
        every = {"plug-off-long": ("board0", self._plug_off_long), "plug-blip": ("board1", self._plug_blip),
                 "capture-stopped": ("board2", self._capture_stopped), "worker-killed": ("board3", self._worker_kill),
                 "plug-unreachable": ("board1", self._plug_unreachable), "redis-restart": (None, self._redis_restart),
                 "results-db-away": (None, self._db_away), "redis-restart-aof": (None, self._redis_restart_aof),
                 "board-panics": ("board2", self._board_panics)}
        plan = [(kind, *every[kind]) for kind in self.args.faults]
        for i, (kind, board, act) in enumerate(plan):
            at = self.night_t0 + span * (0.08 + 0.65 * i / len(plan))
            while time.time() < at:
                if self.stopping.wait(0.5):
                    return
            fault = {"fault": kind, "board": board, "start": time.time()}
            try:
                fault.update(act(board) or {})
            except Exception as e:  # the harness's own failure, reported with the fault
                fault["harness_error"] = f"{type(e).__name__}: {e}"
            fault["end"] = time.time()
            fault["scheduler_alive"] = self.scheduler.poll() is None
            self.faults.append(fault)
        while time.time() < self.night_t0 + span - 3:  # the boards' health as the night ends (schedules firing)
            if self.stopping.wait(0.5):
                return
        from bench_agent.health.state import HealthStore

        self.health_at_end = {t: {k: v.get(k) for k in ("health", "reason", "set_by")}
                              for t, v in HealthStore(self.results).all().items()}

    def _plug(self, board: str, on: bool) -> None:
        url = f"http://{self.plugs[board]}/rpc/Switch.Set?id=0&on={'true' if on else 'false'}"
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()

    def _running_on(self, board: str, after_step: str | None = None, within_s: float = 90) -> int | None:
        """A job of ``board`` that is running (past ``after_step`` when given), waited for up to ``within_s``:
        the fault should hit a job, past its power-cycle step (which would switch a plug back on)."""
        from bench_agent.results.store import ResultStore

        store, deadline = ResultStore(self.results), time.time() + within_s
        while time.time() < deadline:
            for j in store.active_jobs():
                if j["target"] != board or j["state"] != "running" or j["name"] != "scale-5-step":
                    continue
                if after_step is None:
                    return j["id"]
                steps = store.job(j["id"])["steps"]
                if any(st["name"] == after_step and st["status"] == "pass" for st in steps):
                    return j["id"]
            time.sleep(0.05)
        return None

    def _plug_off_long(self, board: str) -> dict:
        job = self._running_on(board, "power-cycle")
        self._plug(board, False)
        until, held = time.time() + min(90, self.args.minutes * 60 / 8), 0
        while time.time() < until:  # held off, as a switched-off strip is: a job's power-cycle cannot end it
            if self._plug_status(board):
                self._plug(board, False)
                held += 1
            time.sleep(0.5)
        self._plug(board, True)
        return {"while_job": job, "switched_off_again": held}

    def _plug_status(self, board: str) -> bool:
        with urllib.request.urlopen(f"http://{self.plugs[board]}/rpc/Switch.GetStatus?id=0", timeout=10) as r:
            return bool(json.loads(r.read())["output"])

    def _plug_blip(self, board: str) -> dict:
        job = self._running_on(board, "power-cycle")  # off while it waits for the boot, on before it gives up
        self._plug(board, False)
        time.sleep(5)
        self._plug(board, True)
        return {"while_job": job}

    def _plug_unreachable(self, board: str) -> dict:
        flag = self.dir / f"{board}.unreachable"
        flag.touch()
        time.sleep(min(60, self.args.minutes * 60 / 10))
        flag.unlink()
        return {}

    def _capture_stopped(self, board: str) -> dict:
        """Stop the capture under a job. With --override the host stops it under whichever job leases the board
        when the command reaches it (the job read here may have ended by then, or the board be free between two
        jobs); a stop that lands before that job's `serial watch` step or after its last console step misses it
        (the job passes): tried again on a later job, up to 6 times."""
        from bench_agent.results.store import ResultStore

        store, tries = ResultStore(self.results), []
        for _ in range(6):
            # as the job's power-cycle starts: the command takes a second or more to reach the host (a loaded
            # machine), by when the ~3 s job is in its console steps, not done
            job = self._running_on(board, "capture is running")
            r = self.panio("serial", "stop", board, "--override", "--reason", "the night harness stops the capture",
                           "--json", check=False, timeout=60)
            if r.returncode:
                return {"while_job": job, "tries": tries,
                        "harness_error": f"the capture was not stopped (exit {r.returncode}): {r.stderr.strip()[:200]}"}
            hit = (json.loads(r.stdout).get("override") or {}).get("job_id")
            ended = None
            for _ in range(240):  # how the overridden job ended (a minute at most)
                ended = store.job(hit) if hit else None
                if ended is None or ended["state"] == "done":
                    break
                time.sleep(0.25)
            tries.append({"while_job": job, "overrode_job": hit, "ended": ended and ended["health"]})
            if ended is not None and ended["health"] == "incomplete":
                break
        return {"while_job": tries[-1]["while_job"], "overrode_job": tries[-1]["overrode_job"], "tries": tries,
                "command": f"panio serial stop {board} --override (exit 0, {len(tries)} tries)"}

    def _worker_kill(self, board: str) -> dict:
        job = self._running_on(board)
        worker = next(p for p in reversed(self.procs) if p.log.name.startswith("worker-01") and p.poll() is None)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        time.sleep(5)
        self.start_worker(1, log="-restarted")
        return {"while_job": job}

    def _redis_restart(self, board: None) -> dict:
        self.redis.restart(down_s=1.0)
        return {}

    def _db_away(self, board: None) -> dict:
        """The night's own results database unreachable for DB_AWAY_S: no new connection allowed, every open one
        closed (the workers', the scheduler's, the dashboard's), then allowed again."""
        if not self.results.startswith("postgresql://"):
            return {"harness_error": "results-db-away needs PostgreSQL results (not injected)"}
        self._allow_connections(False)
        time.sleep(DB_AWAY_S)
        self._allow_connections(True)
        return {}

    def _allow_connections(self, allow: bool) -> None:
        import psycopg

        base, _, rest = self.results.rpartition("/")
        name = rest.split("?", 1)[0]
        with psycopg.connect(f"{base}/postgres", autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"true" if allow else "false"}')
            if not allow:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))

    def _redis_restart_aof(self, board: None) -> dict:
        """Redis made to keep its data (AOF, written as the server stops), then restarted, down REDIS_DOWN_S."""
        import redis

        r = redis.Redis.from_url(self.redis.url)
        r.config_set("appendonly", "yes")  # its AOF is written from the data it holds now (a rewrite)
        deadline = time.time() + 30
        while time.time() < deadline and (r.info("persistence").get("aof_rewrite_in_progress")
                                          or r.info("persistence").get("aof_rewrite_scheduled")):
            time.sleep(0.1)
        keys = r.dbsize()
        r.close()
        self.redis.aof = True  # started again with --appendonly yes: it loads what it wrote
        self.redis.restart(down_s=REDIS_DOWN_S)
        return {"keys_before": keys, "keys_after": redis.Redis.from_url(self.redis.url).dbsize()}

    def _board_panics(self, board: str) -> dict:
        """``board`` panics at every boot for a while (its jobs and checks boot it), then boots again."""
        h, i = divmod(int(board.removeprefix("board")), self.args.boards)
        where = ["--dir", str(self.sim_dir(h))]
        subprocess.run([scale.SIM, "inject", f"board{i}", *where, "--boot-line", PANIC, "--no-prompt"],
                       env=self.env, check=True, capture_output=True, timeout=60)
        time.sleep(max(45.0, self.args.minutes * 60 / 8))
        subprocess.run([scale.SIM, "inject", f"board{i}", *where, "--clear"], env=self.env, check=True,
                       capture_output=True, timeout=60)
        return {}

    def _sample(self) -> dict:
        """scale's sample (it reads the results database), waiting while results-db-away holds it away."""
        from bench_agent import outage

        return outage.patiently(super()._sample, outage.Outages(lambda line: None), give_up_s=DB_AWAY_S * 3)

    def _watch_fires(self) -> None:
        """Each firing of each schedule (``last_fired`` changing), besides scale's fire jitter."""
        from controller.jobs.schedules import ScheduleStore

        store, last = ScheduleStore(self.results), {}
        while not self.stopping.wait(0.25):
            try:
                for s in store.list():
                    if s["last_fired"] and last.get(s["name"]) != s["last_fired"]:
                        last[s["name"]] = s["last_fired"]
                        self.fire_times.setdefault(s["name"], []).append(s["last_fired"])
            except Exception:  # a busy database: the next look sees it
                pass

    def _heal_wait(self) -> None:
        """After the night: up to 3 minutes for every board to be `good` again, with nobody acting."""
        from bench_agent.health.state import HealthStore

        health, deadline = HealthStore(self.results), time.time() + 180
        while time.time() < deadline:
            now = health.all()
            if all(now.get(f"board{i}", {}).get("health") == "good" for i in range(self.boards)):
                break
            time.sleep(2)
        self.healed_after_s = round(time.time() - self.t1, 1)

    # --- what happened ---------------------------------------------------------------------------------------

    def night_verdict(self) -> dict:
        from bench_agent.health.state import HealthStore
        from bench_agent.results.store import ResultStore

        store = ResultStore(self.results)
        jobs = store.list_jobs(limit=10**7)
        health = HealthStore(self.results).all()
        twice = set(self._run_twice([j for j in jobs if j["state"] == "done" and j["name"] == "scale-5-step"]))
        faults = []
        for f in self.faults:
            a, b = f["start"], f["end"] + 5
            hit = [j for j in jobs if (f["board"] is None or j["target"] == f["board"]) and j["started_at"]
                   and j["started_at"] <= b and (j["finished_at"] or b) >= a]
            w = max(b, a + 60)  # the lab's pace: over the fault and at least the minute from its start
            others = [j for j in jobs if j["target"] != f["board"] and j["finished_at"] and a <= j["finished_at"] <= w
                      and j["name"] == "scale-5-step"]
            fires = {name: round(sum(a <= t <= w for t in ts) / ((w - a) / 60), 1)
                     for name, ts in self.fire_times.items()}
            overrode = next((j for j in jobs if f.get("overrode_job") and j["id"] == f["overrode_job"]), None)
            if overrode is not None:  # the job whose lease the capture stop overrode: how it ended
                f = {**f, "overrode_job_ended": {k: overrode[k] for k in ("health", "result", "reason")}}
            checks = self._fault_checks(f, jobs, twice)
            faults.append({**checks, **{k: v for k, v in f.items() if k not in ("start", "end")},
                           "at_s": round(a - self.night_t0, 1), "for_s": round(f["end"] - a, 1),
                           "jobs_hit": [{"id": j["id"], "name": j["name"], "target": j["target"],
                                         "health": j["health"], "result": j["result"],
                                         "reason": (j["reason"] or "")[:240]} for j in hit if j["name"] != "scale-probe"],
                           "fires_per_min": fires, "other_boards_finished": len(others),
                           "other_boards_passed": sum(j["result"] == "passed" for j in others)})
        boards = {f"board{i}": {k: health.get(f"board{i}", {}).get(k) for k in ("health", "reason", "set_by")}
                  for i in range(self.boards)}
        stuck = [{"id": j["id"], "name": j["name"], "target": j["target"], "state": j["state"]}
                 for j in store.active_jobs()]
        events: dict[str, int] = {}
        for _, body in self.receiver.posts:
            events[body.get("event", "?")] = events.get(body.get("event", "?"), 0) + 1
        real = [j for j in jobs if j["name"] != "scale-probe"]
        incomplete = [j for j in real if j["health"] == "incomplete"]
        log = self.scheduler.log.read_text(errors="replace")
        runs = sum(f"schedule {self.schedule_prefix}" in line and (": jobs" in line or ": failed" in line)
                   for line in log.splitlines())
        unwanted = [{"id": j["id"], "name": j["name"], "target": j["target"], "result": j["result"],
                     "reason": (j["reason"] or "")[:240]}
                    for j in real if j["state"] == "done" and j["health"] == "complete" and j["result"] != "passed"]
        not_good = {b: v for b, v in boards.items() if v["health"] != "good"}
        recovered = not not_good and not stuck and sum(events.values()) > 0
        return {"faults": faults, "boards": boards, "not_good": not_good, "stuck": stuck,
                "boards_as_the_night_ended": getattr(self, "health_at_end", None),
                "healed_after_s": getattr(self, "healed_after_s", None), "notifications": events,
                "jobs_total": len(real), "jobs_passed": sum(j["result"] == "passed" for j in real),
                "jobs_incomplete": len(incomplete), "health_checks": sum(j["name"] == "board-health" for j in real),
                "board_failures": unwanted, "recovered": recovered, "suite_runs": runs,
                "quiet_idle_s": self._quiet_idle(real),
                "fires": {k: len(v) for k, v in self.fire_times.items()}}

    def _quiet_idle(self, real: list[dict]) -> float:
        """The longest a board idled between two of its jobs away from every fault (and the minute after it):
        what a healthy board's idle is anyway, under this load and these schedules."""
        windows = [(f["start"], f["end"] + 60) for f in self.faults]
        longest = 0.0
        for i in range(self.boards):
            busy = sorted((j["started_at"], j["finished_at"]) for j in real
                          if j["target"] == f"board{i}" and j["started_at"] and j["finished_at"])
            end = None
            for s, e in busy:
                if end is not None and s > end and not any(a < s and end < b for a, b in windows):
                    longest = max(longest, s - end)
                end = e if end is None else max(end, e)
        return round(longest, 1)

    def _fault_checks(self, f: dict, jobs: list[dict], twice: set[int]) -> dict:
        """What issue 43 asks of the lab under fault ``f``: nothing lost or run twice among the jobs it hit, no
        healthy board idle longer than the schedule's period and a backoff step, no board blamed for the lab
        (set bad meanwhile, other than the fault's own board), the scheduler alive, the suites' verdicts sent
        and the notifications by event, over the fault and the minute after it."""
        from bench_agent.health.state import HealthStore
        from bench_agent.outage import BACKOFF_S

        a, end = f["start"], f["end"]
        after = min(end + 60, getattr(self, "t1", end + 60))
        real = [j for j in jobs if j["name"] != "scale-probe"]
        hit = [j for j in real if (f["board"] is None or j["target"] == f["board"]) and j["started_at"]
               and j["started_at"] <= end + 5 and (j["finished_at"] or end) >= a]
        lost = [j["id"] for j in hit if j["state"] != "done" or any(w in (j["reason"] or "") for w in (
            "worker lost", "lease lost"))]
        since = end if f["fault"] in LAB_SERVICES else a  # the lab's own services: how soon the boards resume
        idle = {}
        for i in range(self.boards):
            board = f"board{i}"
            if board == f["board"]:
                continue
            busy = sorted((j["started_at"], j["finished_at"] or after) for j in real
                          if j["target"] == board and j["started_at"])
            idle[board] = round(_longest_gap(busy, since, after if f["fault"] in LAB_SERVICES else max(end, since)), 1)
        limit = self.args.every_s + max(BACKOFF_S)
        store = HealthStore(self.results)
        blamed = sorted({e["target"] for i in range(self.boards) if f"board{i}" != f["board"]
                         for e in store.history(f"board{i}", limit=500)
                         if e["health"] == "bad" and a <= e["at"] <= after})
        told = [b for _, b in self.receiver.posts if a <= b.get("at", 0) <= after]
        events: dict[str, int] = {}
        for b in told:
            events[b["event"]] = events.get(b["event"], 0) + 1
        verdicts: dict[str, int] = {}
        for b in told:
            if b["event"] == "suite_finished":
                verdicts[b["verdict"]] = verdicts.get(b["verdict"], 0) + 1
        out = {"lost": lost, "run_twice": sorted(twice & {j["id"] for j in hit}), "idle_s": idle,
               "idle_limit_s": limit, "idle_ok": all(v <= limit for v in idle.values()), "blamed": blamed,
               "scheduler_alive_after": self.scheduler.poll() is None, "suite_verdicts": verdicts,
               "notifications": events}
        if f["board"] is not None:  # the board's own part: told as the board's (or skipped), never the lab's
            parts: dict[str, int] = {}
            for b in told:
                for j in b.get("jobs", []) if b["event"] == "suite_finished" else []:
                    if j["target"] == f["board"]:
                        parts[j["fault"] or "passed"] = parts.get(j["fault"] or "passed", 0) + 1
            checks = sorted((j["started_at"], j["finished_at"] or after) for j in real
                            if j["target"] == f["board"] and j["name"] == "board-health" and j["started_at"]
                            and a <= j["started_at"] <= after)
            out.update(board_parts=parts, job_failed=sum(b["event"] == "job_failed" and b.get("target") == f["board"]
                                                         for b in told),
                       checks_overlapping=sum(x[1] > y[0] for x, y in zip(checks, checks[1:])))
        return out

    def down(self) -> None:
        super().down()
        if self.own_db:
            import _history

            _history.drop_empty(self.own_db)
        self.receiver.server.shutdown()
        self.receiver.server.server_close()


def _longest_gap(busy: list[tuple[float, float]], start: float, end: float) -> float:
    """The longest stretch of [start, end] that no interval of ``busy`` (sorted by start) covers."""
    longest, at = 0.0, start
    for s, e in busy:
        if e <= at:
            continue
        if s >= end:
            break
        longest, at = max(longest, s - at), max(at, e)
    return max(longest, end - at, 0.0)


def _faults(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAULTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or 'none given'}: the faults are {', '.join(FAULTS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    scale.run_arguments(p, minutes=10, every_s=10)
    # the scale harness's run, shaped as the night needs it: a process a board (its faults hit single boards),
    # both schedules from their first period, as many jobs a worker as it has boards
    p.add_argument("--faults", type=_faults, default=list(FAULTS), metavar="A,B",
                   help=f"the faults to inject, in this order (default: all: {','.join(FAULTS)})")
    p.set_defaults(board_processes=True, schedules=2, first_s=None, concurrency=None)
    args = p.parse_args(argv)
    if args.minutes < 2 or args.every_s < 5:
        p.error("--minutes at least 2 (six faults need room), --every at least 5")
    run = Night(args)
    try:
        run.up()
        run.drive()
        out = {**run.night_verdict(), **{k: v for k, v in run.verdict().items() if k in (
            "lost", "run_twice", "overlapping_leases", "job_wall_p50_s", "fire_jitter_p99_s", "redis_per_job_keys",
            "dashboard_p50_s", "job_list_p50_s")}}
    except Exception as e:
        print(f"night: the harness failed: {type(e).__name__}: {e} (folder {run.dir})", file=sys.stderr)
        run.down()
        return 2
    run.down()
    out.update(folder=str(run.dir), minutes=args.minutes, every_s=args.every_s, load=os.getloadavg(),
               cores=os.cpu_count(), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               results=run.results.split(":")[0])
    (run.dir / "night.json").write_text(json.dumps(out, indent=1))  # with --keep, the record beside the logs
    if not args.keep:
        import shutil

        shutil.rmtree(run.dir, ignore_errors=True)
    if args.json:
        print(json.dumps(out))
        return 0 if out["recovered"] else 1
    print(f"compressed night, {out['date']}: 2 hosts x 2 boards, {args.minutes:g} min, two schedules every "
          f"{args.every_s:g} s, {out['results']} results (load average {out['load'][0]:.1f} / {out['load'][1]:.1f} "
          f"on {out['cores']} cores)")
    for f in out["faults"]:
        print(f"  {f['at_s']:>6.0f} s  {f['fault']:<17} {f['board'] or 'all':<7} {f['for_s']:.0f} s; fires/min "
              f"{f['fires_per_min']}; other boards finished {f['other_boards_finished']} "
              f"({f['other_boards_passed']} passed){'; ' + f['harness_error'] if 'harness_error' in f else ''}")
        for j in f["jobs_hit"]:
            print(f"           job {j['id']} {j['name']} on {j['target']}: {j['health']}, {j['result']}: "
                  f"{j['reason'][:160]}")
        print(f"           lost {len(f['lost'])}, run twice {len(f['run_twice'])}; longest idle of a healthy board "
              f"{max(f['idle_s'].values(), default=0):g} s (limit {f['idle_limit_s']:g} s: "
              f"{'ok' if f['idle_ok'] else 'NO'}; {f['idle_s']}); boards blamed: {', '.join(f['blamed']) or 'none'}; "
              f"scheduler {'alive' if f['scheduler_alive'] and f['scheduler_alive_after'] else 'DEAD'}")
        print(f"           suite verdicts {f['suite_verdicts'] or 'NONE'}; notifications {f['notifications']}"
              + (f"; {f['board']}'s part {f['board_parts']}, job_failed {f['job_failed']}, health checks "
                 f"overlapping {f['checks_overlapping']}" if "board_parts" in f else ""))
    print(f"  jobs {out['jobs_total']} ({out['jobs_passed']} passed, {out['jobs_incomplete']} incomplete, "
          f"{out['health_checks']} health checks), board failures {len(out['board_failures'])}, lost {out['lost']}, "
          f"run twice {out['run_twice']}, overlapping leases {out['overlapping_leases']}")
    ended = out["boards_as_the_night_ended"] or {}
    for b, v in out["boards"].items():
        e = ended.get(b, {})
        print(f"  {b}: {v['health']} ({v['reason']}, by {v['set_by']}); as the night ended: {e.get('health')} "
              f"({e.get('reason')})")
    print(f"  stuck queued/running: {len(out['stuck'])}; notifications: {out['notifications']}; suite verdicts sent "
          f"{out['notifications'].get('suite_finished', 0)} of {out['suite_runs']} suite runs; longest idle of a "
          f"board away from the faults {out['quiet_idle_s']:g} s")
    print(f"  recovered with no operator action: {'yes' if out['recovered'] else 'NO'}"
          f" (every board good {out['healed_after_s']} s after the schedules stopped)")
    return 0 if out["recovered"] else 1


if __name__ == "__main__":
    sys.exit(main())
