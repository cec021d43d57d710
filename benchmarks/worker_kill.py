"""kill -9 of a worker mid-job: how soon the job it had already taken starts on another worker.

The doomed worker runs a long job on a target and holds a second job for the
same target (waiting for the lease). After its kill -9 the board is free once
the lease TTL runs out; the second job must start within TTL + 5 s (before
panio reconciled, it waited for Redis's visibility timeout, ~300 s). Also shows
how soon the killed job is settled (incomplete, its in-flight step an error)
with no client reading it.

Run: .venv/bin/python benchmarks/worker_kill.py [--ttl-s 3] [--rounds 3]
Needs: /usr/bin/redis-server (a private one on a free loopback port, no persistence).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's real-peer helpers

from jobhelp import wait_for  # noqa: E402
from peerhelp import PrivateRedis, Workers  # noqa: E402

PANIO = str(Path(sys.executable).parent / "panio")


def cli(env: dict, *args: str) -> str:
    return subprocess.run([PANIO, *args], env=env, check=True, capture_output=True, text=True).stdout


def one_round(tmp: Path, workers: Workers, env: dict, ttl_s: float) -> dict:
    import json

    store = workers.store()
    long = tmp / "long.toml"
    long.write_text(f"lease_ttl_s = {ttl_s}\n[[steps]]\nrun = 'ping ${{target}} --count 6000 --interval 0.05'\n")
    quick = tmp / "quick.toml"
    quick.write_text("[[steps]]\nrun = 'ping ${target} --count 1'\n")
    doomed = workers.start("h1")
    first = json.loads(cli(env, "job", "submit", str(long), "--target", "t1", "--json"))["job_id"]
    wait_for(lambda: store.job(first)["state"] == "running", timeout_s=60)
    second = json.loads(cli(env, "job", "submit", str(quick), "--target", "t1", "--json"))["job_id"]
    wait_for(lambda: store.job(second)["worker"], timeout_s=30)
    spare = workers.start("h1")
    workers.kill(doomed)
    killed_at = time.time()
    started = wait_for(lambda: store.job(second)["leased_at"], timeout_s=600, every_s=0.02)
    settled = wait_for(lambda: store.job(first)["finished_at"], timeout_s=600, every_s=0.02)
    wait_for(lambda: store.job(second)["state"] == "done", timeout_s=60)
    workers.kill(spare)
    return {"start_s": started - killed_at, "settle_s": settled - killed_at}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ttl-s", type=float, default=3.0, help="the long job's lease TTL (default 3)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="panio-kill-") as d:
        tmp = Path(d)
        redis = PrivateRedis(tmp)
        redis.start()
        workers = Workers(tmp, redis.url)
        env = {**__import__("os").environ, **workers.env, "PANIO_LAB": str(tmp / "lab.toml"),
               "PANIO_STATE_DIR": str(tmp / "state"), "HOME": str(tmp)}
        cli(env, "init")
        cli(env, "host", "add", "h1", "--ssh", "ops@h1.invalid")
        cli(env, "target", "add", "t1", "--host", "h1")
        try:
            rounds = [one_round(tmp, workers, env, args.ttl_s) for _ in range(args.rounds)]
        finally:
            workers.stop_all()
            redis.stop()
    bound = args.ttl_s + 5
    start, settle = [r["start_s"] for r in rounds], [r["settle_s"] for r in rounds]
    print(f"kill -9 of a worker mid-job ({args.rounds} rounds, lease TTL {args.ttl_s:g} s, visibility timeout 300 s)")
    print(f"  stranded job started after  median {statistics.median(start):6.2f} s  max {max(start):6.2f} s"
          f"   bound TTL + 5 = {bound:g} s   ratio max/bound {max(start) / bound:.2f}"
          f"   (before: ~300 s, the visibility timeout)")
    print(f"  killed job settled after    median {statistics.median(settle):6.2f} s  max {max(settle):6.2f} s"
          f"   bound TTL + 5 = {bound:g} s   (before: only when a client read it)")
    print("  verdict:", "OK" if max(start) <= bound and max(settle) <= bound else "OVER BOUND")


if __name__ == "__main__":
    main()
