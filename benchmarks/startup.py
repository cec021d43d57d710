"""Start-up cost of the CLI, each command paired with a bare interpreter in alternating rounds.

    .venv/bin/python benchmarks/startup.py [--rounds 30] [--json]

Each round runs the floor and the command back to back (the order swapping
every round) and takes their ratio; a row is the median of those ratios, with
the 25th-75th percentile, the load average, and the issue's goal:

  panio --help                   / python -c pass    <= 1.3x
  panio target list              / python -c pass    <= 2x
  panio config show              / python -c pass    <= 2x
  panio serial log T --tail 5    / python -c pass    <= 2.5x  (a real log of 100 lines)
  panio mcp answering initialize / importing the MCP SDK alone (the modules
                                   panio's server uses)  <= 1.3x

All from byte-compiled modules (compileall first), as an installed panio runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench  # beside this script

ROOT = Path(__file__).resolve().parent.parent
PANIO = str(Path(sys.executable).parent / "panio")
SDK_IMPORT = ("import mcp_types; from mcp.server.lowlevel import Server; from mcp.server.stdio import stdio_server; "
              "from mcp.shared.exceptions import MCPError")
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}) + "\n"


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - start


def mcp_initialize(env: dict) -> float:
    """From `panio mcp`'s start until its answer to ``initialize`` is read (then stdin closes and it exits)."""
    start = time.perf_counter()
    proc = subprocess.Popen([PANIO, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    proc.stdin.write(INITIALIZE.encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    proc.wait(30)
    assert answer.get("id") == 1 and "result" in answer, answer
    return elapsed


def make_lab(tmp: str, env: dict) -> None:
    subprocess.run([PANIO, "init"], env=env, check=True, stdout=subprocess.DEVNULL)
    for i in range(5):
        subprocess.run([PANIO, "target", "add", f"t{i}"], env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([PANIO, "serial", "add", "console", "-t", "t0", "--device", "/dev/ttyS0"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    # a real log, written as the capture daemon writes it (its writer, 100 lines), in the lab's own state dir
    code = ("import os, time\nfrom bench_agent.paths import set_process_lab\nfrom bench_agent.serial import files\n"
            "from bench_agent.serial.logstore import DATA, LogWriter\nfrom controller.lab import load\n"
            "set_process_lab(load(os.environ['PANIO_LAB']).key)\n"
            "p = files.log_path('t0', 'console'); p.parent.mkdir(parents=True, exist_ok=True)\nw = LogWriter(p)\n"
            "for i in range(100): w.append(DATA, 1, b'line %d of the boot log\\r\\n' % i, time.time_ns())\n"
            "w.close()\n")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--json", action="store_true", help="print one JSON object (the rows) instead of the table")
    opts = ap.parse_args()
    env = _bench.byte_compiled_env()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env.update(PANIO_LAB=os.path.join(tmp, "lab.toml"), PANIO_STATE_DIR=tmp)
        make_lab(tmp, env)
        bare = [sys.executable, "-c", "pass"]
        cases = [("start-up of panio --help / python -c pass", ["--help"], 1.3),
                 ("start-up of panio target list / python -c pass", ["target", "list"], 2.0),
                 ("start-up of panio config show / python -c pass", ["config", "show"], 2.0),
                 ("start-up of panio serial log T --tail 5 / python -c pass", ["serial", "log", "t0", "--tail", "5"], 2.5)]
        for figure, argv, goal in cases:
            pairs = _bench.paired(lambda: timed(bare, env), lambda a=argv: timed([PANIO, *a], env), opts.rounds)
            rows.append(_bench.row(figure, pairs, "<=", goal, unit="ms", scale=1000))
        sdk = [sys.executable, "-c", SDK_IMPORT]
        pairs = _bench.paired(lambda: timed(sdk, env), lambda: mcp_initialize(env), max(10, opts.rounds // 3))
        rows.append(_bench.row("start-up of panio mcp to initialize / importing the MCP SDK", pairs, "<=", 1.3, unit="ms",
                               scale=1000))
    _bench.emit(__file__, rows, opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
