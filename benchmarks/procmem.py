"""What a harness's processes really cost: RSS, PSS and private memory per kind, from /proc/PID/smaps_rollup.

RSS counts every shared page (the interpreter, libraries, a forked parent's pages) in full in every process;
PSS divides each shared page among the processes sharing it, so PSS summed over processes is what they take
together; Private (clean + dirty) is what one more such process adds.

    python benchmarks/procmem.py FOLDER [--json]

classifies the processes whose command line names FOLDER (a `scale.py --keep` run's folder, say) as
simulated boards, capture supervisors, workers (a Celery worker's forked children included), the scheduler
and the dashboard, and prints each kind's count and per-process median and total RSS / PSS / Private (MiB).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

KINDS = (("sim", ("bench_agent.sim.board", "bench_agent.sim.host")), ("supervisor", ("bench_agent.serial.supervisor",)),
         ("worker", (" worker ",)), ("scheduler", ("schedule serve",)), ("dashboard", ("dashboard",)))


def rollup(pid: int) -> dict[str, float] | None:
    """RSS, PSS and Private of ``pid`` in MiB (None: gone, or not ours to read)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    kb = {}
    for line in text.splitlines()[1:]:
        key, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            kb[key] = int(rest.split()[0])
    return {"rss": kb.get("Rss", 0) / 1024, "pss": kb.get("Pss", 0) / 1024,
            "private": (kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)) / 1024}


def kind_of(cmdline: str) -> str | None:
    for kind, marks in KINDS:
        if any(m in cmdline for m in marks):
            return kind
    return None


def measure(folder: str) -> dict[str, dict]:
    """Per kind: count, and median and total of each of rss / pss / private (MiB)."""
    per: dict[str, list[dict]] = {}
    for path in Path("/proc").iterdir():
        if not path.name.isdigit():
            continue
        try:
            cmdline = " ".join(path.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0"))
        except OSError:
            continue
        if folder not in cmdline:
            continue
        kind, mem = kind_of(cmdline), rollup(int(path.name))
        if kind and mem:
            per.setdefault(kind, []).append(mem)
    out = {}
    for kind, mems in sorted(per.items()):
        out[kind] = {"count": len(mems)} | {
            f"{k}_{agg}": round(f([m[k] for m in mems]), 1)
            for k in ("rss", "pss", "private") for agg, f in (("median", statistics.median), ("total", sum))}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    got = measure(a.folder)
    if a.json:
        print(json.dumps(got))
        return 0
    print(f"{'kind':<11} {'n':>4}  {'RSS med':>8} {'PSS med':>8} {'Priv med':>8}  {'RSS sum':>8} {'PSS sum':>8}")
    for kind, m in got.items():
        print(f"{kind:<11} {m['count']:>4}  {m['rss_median']:>8} {m['pss_median']:>8} {m['private_median']:>8}  "
              f"{m['rss_total']:>8} {m['pss_total']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
