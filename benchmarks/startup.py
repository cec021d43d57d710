"""Start-up cost of the CLI, as a ratio to a bare interpreter measured side by side.

Runs `python -c pass`, `panio --help` and `panio target list` interleaved
(round-robin, so machine noise hits all three alike) and prints each median
and its ratio to the bare interpreter. Goal: <= 3x.

    .venv/bin/python benchmarks/startup.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PANIO = str(Path(sys.executable).parent / "panio")


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    opts = ap.parse_args()
    # An installed panio runs from byte-compiled modules; measure that, not the compiler.
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "controller"), str(root / "bench_agent"), str(root / "skills")],
                   check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PANIO_LAB": os.path.join(tmp, "lab.toml"), "PANIO_STATE_DIR": tmp}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([PANIO, "init"], env=env, check=True, stdout=subprocess.DEVNULL)
        for i in range(5):
            subprocess.run([PANIO, "target", "add", f"t{i}"], env=env, check=True, stdout=subprocess.DEVNULL)
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "panio --help": [PANIO, "--help"],
            "panio target list": [PANIO, "target", "list"],
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for name, argv in cases.items():  # warm the page cache
            timed(argv, env)
        for _ in range(opts.rounds):
            for name, argv in cases.items():
                samples[name].append(timed(argv, env))
    base = statistics.median(samples["python -c pass"])
    print(f"{'case':<20} {'median ms':>10} {'ratio':>7}   ({opts.rounds} rounds, interleaved)")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"{name:<20} {med * 1000:>10.1f} {med / base:>7.2f}")
    worst = max(statistics.median(v) for v in samples.values()) / base
    print(f"goal: panio <= 3.0x python -c pass -> {'met' if worst <= 3.0 else 'NOT met'} ({worst:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
