"""A job through the controller API beside the same job through the broker directly (issue 38's goal: ≤ 1.5×).

Both sides run the same `panio job run JOB` on a one-step job (``panio ping ${target}``: no road takes a job
without steps, see jobs_throughput.py) to a real ``panio worker --host local`` on a private redis-server,
results in SQLite, messages signed:

- broker: the command holds the broker, the results database and the controller's signing key (today's CI);
- API: ``--controller URL`` with a submitter token and nothing else, to a real ``panio dashboard`` that holds
  them (its process checks, records and publishes the job; the command polls ``GET /api/v1/jobs/ID``).

Each measurement is the command's wall time, process start-up included, as a CI step sees it; the two sides
alternate (``_bench.paired``) and the figure is the median of the paired ratios (API / broker).

Run: .venv/bin/python benchmarks/api_submit.py [--rounds R] [--json]   (about a minute on the shared machine)
Needs /usr/bin/redis-server. Starts and stops its own redis-server, worker and dashboard.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's real-peer helpers

from _bench import emit, paired, row  # noqa: E402
from peerhelp import PrivateRedis, Workers  # noqa: E402

PANIO = str(Path(sys.executable).parent / "panio")
JOB = "name = 'smoke'\ntarget = 'pico'\n[[steps]]\nname = 'ping'\nrun = 'ping ${target} --count 1'\n"
GOAL = 1.5


def _timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return took


def _panio(env: dict, *args: str) -> str:
    p = subprocess.run([PANIO, *args], env=env, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"panio {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def _dashboard(env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([PANIO, "dashboard", "--port", "0"], env=env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r"http://\S+/", log.read_text())
        if found:
            return proc, found.group(0).rstrip("/")
        time.sleep(0.1)
    raise SystemExit(f"the dashboard did not start: {log.read_text()[-500:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="panio-api-bench-") as tmp:
        root = Path(tmp)
        redis = PrivateRedis(root)
        redis.start()
        workers = Workers(root, redis.url)
        controller = {**os.environ, **workers.env, "PANIO_STATE_DIR": str(root / "state"), "HOME": str(root),
                      "PANIO_LAB": str(workers.lab)}
        controller.pop("PANIO_DEBUG", None)
        _panio(controller, "init")
        _panio(controller, "target", "add", "pico")
        token = _panio(controller, "token", "add", "bench", "--scope", "submitter", "--target", "pico",
                       "--json").split('"token": "')[1].split('"')[0]
        job = root / "smoke.toml"
        job.write_text(JOB)
        workers.start("local")
        dash, url = _dashboard(controller, root / "dashboard.log")
        ci = {k: v for k, v in os.environ.items() if not k.startswith("PANIO_")}
        ci.update(PANIO_CONTROLLER=url, PANIO_TOKEN=token, HOME=str(root / "ci"),
                  PANIO_STATE_DIR=str(root / "ci" / "state"))
        try:
            pairs = paired(lambda: _timed([PANIO, "job", "run", str(job)], controller),
                           lambda: _timed([PANIO, "job", "run", str(job)], ci), args.rounds)
        finally:
            os.killpg(dash.pid, 15)
            dash.wait(timeout=20)
            workers.stop_all()
            redis.stop()
    rows = [row("job run --controller / job run through the broker (one-step job)", pairs, "<=", GOAL,
                unit="ms", scale=1000)]
    if not args.json:
        print(f"  {args.rounds} pairs; one `panio ping` step to `panio worker --host local`; private redis-server; "
              f"SQLite results; {os.cpu_count()} cores")
    emit(__file__, rows, args.json)


if __name__ == "__main__":
    main()
