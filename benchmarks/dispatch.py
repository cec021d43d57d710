"""Dispatch benchmarks: a no-op operation in-process, over a kept SSH channel and over Celery, each beside
its raw floor in alternating rounds; a side-effect operation through the whole dispatch (its lease checked
in a real Redis lease store) beside the side effect alone; no-op jobs per second with leases and results;
how long after a worker's kill -9 its target is leasable again.

Run: .venv/bin/python benchmarks/dispatch.py [--n 2000] [--jobs 200] [--only ssh|lease] [--json]
Needs: redis-server, /usr/sbin/sshd. Starts and stops its own Redis (so the Redis commands a dispatch
makes can be counted), sshd and workers. Every interpreter is this venv's, never a shim on PATH.

The side-effect row: `serial.send` of one line to a target whose console a capture daemon holds (a PTY
whose far end swallows the line), through ``controller.dispatch.call`` with ``PANIO_REDIS_URL`` set: the
controller checks the target's lease in Redis, the host checks it again (``lease_guard``), then the
daemon writes the line. Its floor is the daemon's own ``send`` request, the same bytes on the same
socket, with no lease check and no dispatch. The lease checks per dispatch are counted and printed beside
the figure: the Redis commands from the private server's statistics, and the reads the host answered
from memory (``bench_agent.leases.cache``: kept true by Redis's invalidation messages); a row that
made neither measured no lease check. A third side in the same rotating rounds is a side effect behind a
lease read from Redis every time: an HGETALL of the lease on the store's kept connection, then the same
send request; its rows say what one Redis round trip costs here, and what panio adds beside it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's real-sshd helper

import _bench  # noqa: E402 - beside this script
import keyhelp  # noqa: E402 - the test suite's signing keys (tests/ is on the path above)
from _pty_responder import running, serve  # noqa: E402

PANIO = str(Path(sys.executable).parent / "panio")
REDIS_URL = "redis://127.0.0.1:6379/5"  # replaced by the private server's URL in main()
ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line); sys.stdout.flush()\n"


def per_call_ms(func, n: int) -> float:
    for _ in range(min(50, n)):
        func()
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n // 5):
            func()
        samples.append((time.perf_counter() - start) * 1000 / (n // 5))
    return statistics.median(samples)


def side_by_side(floor, via, n: int, rounds: int = 40) -> tuple[float, float, float]:
    """Median ms per call of ``floor`` and ``via``, measured in alternating rounds so both see the same load
    (the first side swapping each round),
    and the median of each round's ratio (a pair of rounds close in time shares the machine's mood)."""
    for _ in range(min(50, n)):
        floor(), via()
    per_round = max(1, n // rounds)
    samples: tuple[list[float], list[float]] = ([], [])
    for i in range(rounds):
        sides = ((floor, samples[0]), (via, samples[1]))
        for func, out in sides[::1 if i % 2 == 0 else -1]:  # ABBA...: neither side always runs first
            start = time.perf_counter()
            for _ in range(per_round):
                func()
            out.append((time.perf_counter() - start) * 1000 / per_round)
    ratios = [v / f for f, v in zip(*samples)]
    SPREADS.append([round(q, 3) for q in _bench.quartiles(sorted(ratios))])  # the last call's, for its row
    return statistics.median(samples[0]), statistics.median(samples[1]), statistics.median(ratios)


def wait_for(pred, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.05)


def bench_local(lab, n: int) -> dict:
    from bench_agent import ops
    from controller import dispatch

    transport = dispatch.Dispatcher(lab).transport_for(None)
    req = {"op": "system.ping", "args": {"payload": 1}, "deadline_s": None}
    raw, via, ratio = side_by_side(lambda: ops.call("system.ping", {"payload": 1}), lambda: transport.call(req), n)
    return {"raw_ms": raw, "panio_ms": via, "ratio": ratio,
            "dispatch_ms": per_call_ms(lambda: dispatch.call(lab, "near", "system.ping", {"payload": 1}), n)}


def redis_commands() -> int:
    import redis

    return int(redis.Redis.from_url(REDIS_URL).info("stats")["total_commands_processed"])


def lease_reads_from_memory() -> int:
    """The lease checks this process answered from its invalidated cache (``bench_agent.leases.cache``)."""
    from bench_agent.leases import guard as lease_guard

    return sum(store.cache.hits for store in lease_guard._REDIS.values())


def bench_side_effect(lab, link: str, rounds: int, per_round: int) -> dict:
    """`serial.send` through the whole dispatch (lease checked in Redis, controller and host) vs the daemon's
    own send request; paired rounds, and the Redis commands each dispatch made."""
    from bench_agent import ops
    from bench_agent.paths import lab_state_dir, using_lab
    from bench_agent.serial import client
    from controller import dispatch

    iface = {"name": "console", "device": link, "baud": 115200}
    key = dispatch.Dispatcher(lab).lab_key  # the host keeps the capture under the lab's key, as dispatch asks it
    with using_lab(key):
        ops.call("serial.watch", {"target": "near", "interfaces": [iface]})
        state = lab_state_dir()
    data = base64.b64encode(b"x\r").decode()
    store = dispatch.Dispatcher(lab)._lease_store()
    store.holder("near")  # its connection made, as the dispatch's is after its first call

    def floor() -> float:
        start = time.perf_counter()
        for _ in range(per_round):
            client.request("near", {"op": "send", "iface": "console", "data_b64": data, "pace_ms": 0}, state=state)
        return (time.perf_counter() - start) / per_round

    lease_key = store._key("near")

    def floor_and_lease() -> float:
        """The architecture floor of a side effect behind a lease check read from Redis every time: the side
        effect and one Redis round trip (an HGETALL of the target's lease on the store's kept connection)."""
        start = time.perf_counter()
        for _ in range(per_round):
            store.call(store.r.hgetall, lease_key)
            client.request("near", {"op": "send", "iface": "console", "data_b64": data, "pace_ms": 0}, state=state)
        return (time.perf_counter() - start) / per_round

    def panio() -> float:
        start = time.perf_counter()
        for _ in range(per_round):
            dispatch.call(lab, "near", "serial.send", {"target": "near", "iface": iface, "text": "x"})
        return (time.perf_counter() - start) / per_round

    try:
        before, hits = redis_commands(), lease_reads_from_memory()
        panio()
        per_dispatch = (redis_commands() - before - 1) / per_round  # less the INFO that read the count
        from_memory = (lease_reads_from_memory() - hits) / per_round
        pairs, lease_pairs = three_sides(floor, floor_and_lease, panio, rounds)
    finally:
        with using_lab(key):
            ops.call("serial.stop", {"target": "near"})
    row = _bench.row("side-effect dispatch (lease check in Redis) / the side effect alone", pairs, "<=", 1.3,
                     unit="ms", scale=1000, redis_commands_per_dispatch=round(per_dispatch, 2),
                     lease_reads_from_memory_per_dispatch=round(from_memory, 2))
    if per_dispatch + from_memory < 1:
        row["met"] = False  # no lease was read: the row measures nothing it claims
    # What a check read from Redis at every side effect costs (the architecture before the check was answered
    # from memory), and the dispatch beside it: with the check from memory it costs less than that round trip.
    floor_row = _bench.row("side effect + one bare Redis round trip (a check read from Redis every time) / the "
                           "side effect alone", lease_pairs["floor"], "<=", 1.3, unit="ms", scale=1000)
    over_floor = _bench.row("side-effect dispatch / side effect + one bare Redis round trip", lease_pairs["panio"],
                            "<=", 1.0, unit="ms", scale=1000)
    return [row, over_floor, floor_row]


def three_sides(floor, middle, panio, rounds: int) -> tuple[dict, dict]:
    """Rounds of the three sides, the order rotating each round (after one warm-up of each): the pairs of
    panio / floor, and the pairs of middle / floor and panio / middle (``{"floor": pairs, "panio": pairs}``)."""
    floor(), middle(), panio()
    sides, out, loads = (floor, middle, panio), ([], [], []), [_bench.load()]
    for i in range(rounds):
        for k in [(i + j) % 3 for j in range(3)]:
            out[k].append(sides[k]())
        loads.append(_bench.load())
    load = [min(loads), max(loads)]

    def pairs(a: list[float], b: list[float]) -> dict:
        return {"floor": a, "panio": b, "ratios": [y / x for x, y in zip(a, b)], "load": load}

    return pairs(out[0], out[2]), {"floor": pairs(out[0], out[1]), "panio": pairs(out[1], out[2])}


def both(lab, target: str, host: str | None, n: int) -> dict:
    """The transport alone, and the whole dispatch (which also checks the target's lease in Redis)."""
    from controller import dispatch

    req = {"op": "system.ping", "args": {"payload": 1}, "deadline_s": None}
    transport = dispatch.Dispatcher(lab).transport_for(host)
    return {"panio_ms": per_call_ms(lambda: transport.call(req), n),
            "dispatch_ms": per_call_ms(lambda: dispatch.call(lab, target, "system.ping", {"payload": 1}), n)}


def bench_ssh(lab, sshd, n: int) -> dict:
    import paramiko

    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect("127.0.0.1", port=sshd.port, username=sshd.user)
    chan = client.get_transport().open_session()
    chan.exec_command(f"{sys.executable} -c {_shq(ECHO)}")
    f = chan.makefile("rb")

    def echo() -> None:
        chan.sendall(b'{"v": 1, "id": 1, "op": "system.ping", "args": {"payload": 1}}\n')
        json.loads(f.readline())

    from controller import dispatch

    transport = dispatch.Dispatcher(lab).transport_for("bench")
    req = {"op": "system.ping", "args": {"payload": 1}, "deadline_s": None}
    raw, via, ratio = side_by_side(echo, lambda: transport.call(req), n)
    client.close()
    return {**both(lab, "far", "bench", n), "raw_ms": raw, "panio_ms": via, "ratio": ratio, "load": _bench.load(),
            "spread": SPREADS[-1]}


def _shq(text: str) -> str:
    import shlex

    return shlex.quote(text)


# The raw floor signs its messages like panio does (Celery's auth serializer, the same keys), so the ratio
# is panio's own cost, not the signatures' (an RSA-2048 signature takes ~5 ms on this 2-core machine).
RAW_WORKER = """
import sys
from celery import Celery
app = Celery("raw", broker=sys.argv[1], backend=sys.argv[1])
app.conf.update(worker_prefetch_multiplier=1, broker_transport_options={"global_keyprefix": sys.argv[2]},
                result_backend_transport_options={"global_keyprefix": sys.argv[2]}, worker_hijack_root_logger=False)
from bench_agent.jobs import signing
signing.apply(app, signing.required())
@app.task(name="raw.noop")
def noop(x):
    return x
app.worker_main(["worker", "-Q", "raw", "--pool", "threads", "-c", "1", "--without-gossip", "--without-mingle",
                 "--without-heartbeat", "--loglevel", "WARNING"])
"""


def bench_celery(lab, env: dict, tmp: Path, n: int) -> dict:
    from celery import Celery

    from bench_agent.jobs import signing
    from controller import dispatch

    prefix = f"bench-raw-{uuid.uuid4().hex[:6]}:"
    RAW_PREFIXES.append(prefix)
    raw_worker = subprocess.Popen([sys.executable, "-c", RAW_WORKER, REDIS_URL, prefix], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True,
                                  env={**os.environ, **keyhelp.worker_env()})
    app = Celery("raw", broker=REDIS_URL, backend=REDIS_URL)
    app.conf.update(broker_transport_options={"global_keyprefix": prefix},
                    result_backend_transport_options={"global_keyprefix": prefix})
    signing.apply(app, signing.required())
    worker = start_worker(env, tmp, "celhost", concurrency=1)
    try:
        app.send_task("raw.noop", args=[1], queue="raw").get(timeout=60)
        dispatch.call(lab, "viacel", "system.ping", {"payload": 1})
        transport = dispatch.Dispatcher(lab).transport_for("celhost")
        req = {"op": "system.ping", "args": {"payload": 1}, "deadline_s": None}
        raw, via, ratio = side_by_side(lambda: app.send_task("raw.noop", args=[1], queue="raw").get(timeout=10),
                                       lambda: transport.call(req), n, rounds=20)
        full = per_call_ms(lambda: dispatch.call(lab, "viacel", "system.ping", {"payload": 1}), n)
    finally:
        os.killpg(raw_worker.pid, signal.SIGTERM)
        raw_worker.wait(timeout=20)
        stop_worker(worker)
    return {"raw_ms": raw, "panio_ms": via, "ratio": ratio, "dispatch_ms": full}


def start_worker(env: dict, tmp: Path, host: str, concurrency: int = 4) -> subprocess.Popen:
    log = tmp / f"worker-{host}-{uuid.uuid4().hex[:4]}.log"
    proc = subprocess.Popen([PANIO, "worker", "--host", host, "--lab", env["PANIO_LAB"], "--concurrency",
                             str(concurrency)],
                            env={**os.environ, **env, **keyhelp.worker_env(), "PANIO_STATE_DIR": str(tmp / "w")},
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: "ready." in log.read_text())
    return proc


def stop_worker(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait(timeout=30)


def bench_jobs(env: dict, tmp: Path, jobs: int) -> dict:
    """No-op jobs (no steps) through queue, lease, claim and results: what panio adds per job."""
    from bench_agent.jobs.worker import make_app, submit
    from controller import backends

    store = backends.results_store()
    worker = start_worker(env, tmp, "jobhost", concurrency=4)
    app = make_app(env["PANIO_BROKER"], env["PANIO_REDIS_PREFIX"])
    try:
        ids = []
        start = time.perf_counter()
        for i in range(jobs):
            target = f"t{i % 4}"
            payload = {"name": "noop", "target": target, "steps": [], "timeout_s": None, "lease_wait_s": 60,
                       "lease_ttl_s": 30, "target_config": {}}
            job_id = store.create_job("noop", target, "jobhost", payload)
            submit(app, {**payload, "job_id": job_id}, "jobhost")
            ids.append(job_id)
        wait_for(lambda: all(j["state"] == "done" for j in store.list_jobs(limit=jobs)), timeout_s=300)
        elapsed = time.perf_counter() - start
    finally:
        stop_worker(worker)
    return {"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed}


def bench_kill(env: dict, tmp: Path, ttl_s: float = 3.0) -> dict:
    from bench_agent.leases.redis_store import RedisLeaseStore
    from bench_agent.jobs.worker import make_app, submit
    from controller import backends

    store, leases = backends.results_store(), RedisLeaseStore(env["PANIO_REDIS_URL"], env["PANIO_REDIS_PREFIX"])
    worker = start_worker(env, tmp, "killhost", concurrency=1)
    # one long step, as `job check` plans `panio ping victim --count 100000 --interval 0.05`
    step = {"name": "long", "argv": ["ping", "victim", "--count", "100000", "--interval", "0.05"],
            "command": "panio ping victim --count 100000 --interval 0.05", "timeout_s": 3600, "expect_exit": [0],
            "run": {"op": "system.ping", "args": {"target": "victim", "host": "killhost", "count": 100000,
                                                  "interval_s": 0.05, "json": False}}}
    payload = {"name": "long", "target": "victim", "steps": [step], "timeout_s": None, "lease_wait_s": 5,
               "lease_ttl_s": ttl_s, "target_config": {}, "via": "broker"}
    job_id = store.create_job("long", "victim", "killhost", payload)
    submit(make_app(env["PANIO_BROKER"], env["PANIO_REDIS_PREFIX"]), {**payload, "job_id": job_id}, "killhost")
    wait_for(lambda: leases.current("victim") is not None)
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
    killed = time.monotonic()
    while leases.try_acquire("victim", {"holder": "bench"}, 5) is None:
        time.sleep(0.01)
    return {"ttl_s": ttl_s, "leasable_after_s": time.monotonic() - killed}


def start_redis(tmp: Path) -> subprocess.Popen:
    """A private redis-server on a free loopback port (its statistics count only this benchmark's commands)."""
    import socket

    global REDIS_URL
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL)
    REDIS_URL = f"redis://127.0.0.1:{port}/0"
    import redis

    wait_for(lambda: _pings(redis.Redis.from_url(REDIS_URL)), timeout_s=30)
    return proc


def _pings(r) -> bool:
    try:
        return bool(r.ping())
    except Exception:  # noqa: BLE001 - not up yet
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="round trips per measurement")
    ap.add_argument("--jobs", type=int, default=200, help="no-op jobs for the jobs/s measurement")
    ap.add_argument("--only", choices=("ssh", "lease"),
                    help="measure one route only (ssh: the SSH transport and its floor; lease: the side-effect row)")
    ap.add_argument("--json", action="store_true", help="print one JSON object (the rows) instead of the table")
    ap.add_argument("--responder", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.responder:
        serve(args.responder, lambda fd, line: None)  # the console's far end: swallows what is sent
        return
    from sshd import Sshd

    tmp = Path(tempfile.mkdtemp(prefix="panio-bench-"))
    redis_proc = start_redis(tmp)
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    env = {"PANIO_BROKER": REDIS_URL, "PANIO_REDIS_URL": REDIS_URL, "PANIO_REDIS_PREFIX": prefix,
           "PANIO_RESULTS_URL": f"sqlite:///{tmp / 'results.db'}", "PANIO_STATE_DIR": str(tmp / "state"),
           "HOME": str(tmp / "home"), "PANIO_LAB": str(tmp / "lab.toml"), **keyhelp.controller_env()}
    os.environ.update(env)
    sshd = Sshd(tmp / "sshd", tmp / "home")
    link = str(tmp / "tty")
    try:
        lab = make_lab(tmp, sshd)
        results = {"python": sys.executable, "cores": os.cpu_count()}
        if args.only in (None, "ssh"):
            results["ssh"] = bench_ssh(lab, sshd, args.n)
        if args.only in (None, "lease"):
            with running(__file__, link):
                subprocess.run([PANIO, "serial", "add", "console", "-t", "near", "--device", link], check=True,
                               capture_output=True)
                from controller.lab import load

                results["side_effect"] = bench_side_effect(load(tmp / "lab.toml"), link, 40, max(20, args.n // 40))
        if args.only is None:
            results["in_process"] = bench_local(lab, args.n)
            results["celery"] = bench_celery(lab, env, tmp, max(200, args.n // 5))
            results["jobs"] = bench_jobs(env, tmp, args.jobs)
            results["kill"] = bench_kill(env, tmp)
    finally:
        sshd.stop()
        redis_proc.terminate()
        redis_proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, args.json)


def make_lab(tmp: Path, sshd):
    from controller.lab import load

    (tmp / "lab.toml").write_text(
        f'[hosts.bench]\nssh = "{sshd.user}@127.0.0.1"\nport = {sshd.port}\npython = "{sys.executable}"\n'
        '[hosts.celhost]\nssh = "ops@celhost.invalid"\ntransport = "celery"\n'
        '[hosts.jobhost]\nssh = "ops@jobhost.invalid"\n[hosts.killhost]\nssh = "ops@killhost.invalid"\n'
        '[targets.near]\n[targets.far]\nhost = "bench"\n[targets.viacel]\nhost = "celhost"\n'
        + "".join(f'[targets.t{i}]\nhost = "jobhost"\n' for i in range(4)) + '[targets.victim]\nhost = "killhost"\n')
    subprocess.run([PANIO, "host", "trust", "bench"], check=True, capture_output=True)
    return load(tmp / "lab.toml")


RAW_PREFIXES: list[str] = []
SPREADS: list[list[float]] = []  # side_by_side's 25th-75th percentile of its paired ratios, call by call
SSH_TARGET_X = 1.3  # an operation over the kept channel costs at most this much more than echoing a line on it


def report(r: dict, as_json: bool) -> None:
    rows = []
    if "ssh" in r:
        ssh = r["ssh"]
        rows.append({"figure": "SSH transport / echo on a kept channel", "ratio": round(ssh["ratio"], 3),
                     "spread": ssh["spread"], "op": "<=", "goal": SSH_TARGET_X,
                     "met": ssh["ratio"] <= SSH_TARGET_X, "load": [ssh["load"], ssh["load"]],
                     "panio": round(ssh["panio_ms"], 4), "floor": round(ssh["raw_ms"], 4), "unit": "ms",
                     "rounds": 40})
    if "side_effect" in r:
        rows += r["side_effect"]
    if not as_json:
        print(f"python {r['python']}, {r['cores']} cores")
        print(f"{'route':<12}{'raw floor':>12}{'transport':>12}{'x floor':>9}{'dispatch':>12}  (system.ping)")
        for route in [name for name in ("in_process", "ssh", "celery") if name in r]:
            raw, via, full = r[route]["raw_ms"], r[route]["panio_ms"], r[route]["dispatch_ms"]
            print(f"{route:<12}{raw:>10.3f}ms{via:>10.3f}ms{r[route]['ratio']:>8.2f}x{full:>10.3f}ms")
        if "side_effect" in r:
            row = r["side_effect"][0]
            print(f"side effect: lease checks per dispatch: {row['redis_commands_per_dispatch']:g} read from Redis, "
                  f"{row['lease_reads_from_memory_per_dispatch']:g} answered from memory (kept true by Redis's "
                  "invalidations)")
        if "jobs" in r:
            j, k = r["jobs"], r["kill"]
            print(f"no-op jobs: {j['jobs']} in {j['seconds']:.2f} s = {j['jobs_per_s']:.0f} jobs/s (leases + results)")
            print(f"kill -9 of a worker mid-job: target leasable again after {k['leasable_after_s']:.2f} s "
                  f"(TTL {k['ttl_s']:g} s)")
    _bench.emit(__file__, rows, as_json, {"routes": r})


if __name__ == "__main__":
    main()
