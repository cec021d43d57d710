"""Triage's goal (issue 28): on 20 seeded failures with a known injected cause, the first divergent line or step
names the cause in at least 18 of 20, with no rule written for any case.

A simulated board (``panio-sim up``) runs a boot job once to pass, then, for each case, ``panio-sim inject``
seeds one fault, the job runs again (and fails), ``panio job triage ID --json`` reads it, and the fault is
cleared. Five kinds of cause, four cases each (different texts, lines, versions, delays):

    boot_line   an extra line among the kernel's (a panic, an oops, a BUG)
    drop_line   a driver line that never comes
    version     another kernel version string
    boot_delay  the kernel stalls after "Starting kernel ..." (the boot misses its 4 s budget)
    no_prompt   the board hangs before its shell prompt

A case counts as named when the triage's own report says it, read the same way for every case of a kind:
the first divergent line holds the injected line or version (an extra or changed line) or the dropped one
(a missing line); a late line waited at least 80 % of the injected delay; the lines never reached begin with
the prompt. The triage itself has no notion of these kinds.

Run: .venv/bin/python benchmarks/triage_causes.py [--per-cause N] [--json]   (about 3 minutes for all 20)
Starts and stops its own simulated board and serial capture, in a temporary folder.
Exits non-zero on an error only, not when the goal is missed (it prints NOT met beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent
PANIO, SIM = str(BIN / "panio"), str(BIN / "panio-sim")
GOAL = 18 / 20
PROMPT = "root@sim:~#"
JOB = r'''name = "seeded"
timeout_s = 90

[[steps]]
name = "capture is running"
run = "panio serial watch ${target}"

[[steps]]
name = "power-cycle"
run = "panio power-cycle ${target}"

[[steps]]
name = "boots within 4 s"
run = """panio serial wait ${target} --since-step --pattern 'U-Boot[\\s\\S]*root@sim:~# ' --timeout-ms 4000"""
timeout_s = 10
expect_output = '"status": "matched"'
reject_output = "Kernel panic|Oops|BUG:"
continue_on_failure = true

[[steps]]
name = "reaches its shell"
run = """panio serial wait ${target} --since-job --pattern 'U-Boot[\\s\\S]*root@sim:~# ' --timeout-ms 12000"""
timeout_s = 20
expect_output = '"status": "matched"'

[[steps]]
name = "drivers probed"
run = """panio serial wait ${target} --since-job --pattern 'mmc0: new[\\s\\S]*usb 1-1: new[\\s\\S]*eth0: Link is Up' --timeout-ms 1000"""
expect_output = '"status": "matched"'

[[steps]]
name = "kernel version"
run = "panio serial transact ${target} 'uname -r' --until 'root@sim:~# ' --timeout-ms 5000"
expect_output = '6\.1\.0-sim'
'''
CASES = {
    "boot_line": ["Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(179,2)",
                  "Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b",
                  "Internal error: Oops: 17 [#1] SMP ARM", "BUG: scheduling while atomic: swapper/0/0/0x00000002"],
    "drop_line": ["mmc0: new", "usb 1-1: new", "eth0: Link is Up", "SDHC card"],
    "version": ["6.1.1-sim", "6.2.0-rc1", "5.15.0-sim", "6.1.0-custom"],
    "boot_delay": ["5", "6", "7", "8"],
    "no_prompt": ["", "", "", ""],
}
FLAGS = {"boot_line": "--boot-line", "drop_line": "--drop-line", "version": "--version",
         "boot_delay": "--boot-delay-s", "no_prompt": "--no-prompt"}


def named(kind: str, value: str, t: dict) -> bool:
    """Does the triage report name the injected cause? (One reading per kind, the same for its four cases.)"""
    first = t.get("first_divergence") or {}
    logs = t.get("logs") or []
    if kind in ("boot_line", "version"):
        return first.get("kind") in ("extra", "changed") and value in first.get("line", "")
    if kind == "drop_line":
        return first.get("kind") == "missing" and value in first.get("line", "")
    if kind == "boot_delay":
        return any((d.get("late") or {}).get("wait_s", 0) >= 0.8 * float(value) for d in logs)
    return any(d.get("never_reached") and PROMPT in d["never_reached"][0] for d in logs) and not first.get(
        "source", "").startswith("serial-")


def run(env: dict, directory: Path, per_cause: int, say) -> list[dict]:
    def panio(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([PANIO, *args], capture_output=True, text=True, env=env, timeout=300)
        if check and p.returncode:
            raise SystemExit(f"panio {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p

    def sim(*args: str) -> None:
        subprocess.run([SIM, *args, "--dir", str(directory / "sim")], check=True, env=env, capture_output=True,
                       timeout=120)

    job = directory / "seeded.toml"
    job.write_text(JOB)
    # Two passes: the first starts the capture, maybe while the board's first boot (from `panio-sim up`) is
    # half printed; the second, a whole boot under a running capture, is the pass every failure is compared with.
    panio("job", "run", str(job), "--target", "board0")
    panio("job", "run", str(job), "--target", "board0")
    results = []
    for kind, values in CASES.items():
        for value in values[:per_cause]:
            sim("inject", "board0", *([FLAGS[kind], value] if value else [FLAGS[kind]]))
            try:
                r = panio("job", "run", str(job), "--target", "board0", check=False)
            finally:
                sim("inject", "board0", "--clear")
            err = json.loads(r.stderr.strip().splitlines()[-1]) if r.returncode else {}
            if r.returncode != 14:
                results.append({"kind": kind, "value": value, "named": False, "why": f"exit {r.returncode}: {err}"})
                continue
            t = json.loads(panio("job", "triage", str(err["job"]), "--json").stdout)
            ok = named(kind, value, t)
            results.append({"kind": kind, "value": value, "job": err["job"], "named": ok, "summary": t["summary"]})
            say(f"{'named ' if ok else 'MISSED'} {kind:<10} {value!r:<40.40} {t['summary'][:150]}")
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-cause", type=int, default=4, choices=range(1, 5), help="cases per kind of cause (1-4)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="panio-triage-") as tmp:
        d = Path(tmp)
        (d / "home").mkdir()
        env = {**os.environ, "PANIO_STATE_DIR": str(d / "state"), "HOME": str(d / "home"),
               "PANIO_LAB": str(d / "sim" / "lab.toml")}
        env.pop("PANIO_BROKER", None)
        env.pop("PANIO_RESULTS_URL", None)
        subprocess.run([SIM, "up", "--dir", str(d / "sim"), "--boot-s", "0.2", "--countdown-s", "0.3"], check=True,
                       env=env, capture_output=True, timeout=120)
        try:
            results = run(env, d, a.per_cause, (lambda s: None) if a.json else print)
        finally:
            subprocess.run([SIM, "down", "--dir", str(d / "sim")], env=env, capture_output=True, timeout=120)
    hits, total = sum(r["named"] for r in results), len(results)
    load = os.getloadavg()[0]
    met = hits >= GOAL * total
    if a.json:
        print(json.dumps({"named": hits, "total": total, "goal": f">= {GOAL:.0%}", "met": met, "load": load,
                          "cases": results}, indent=2))
    else:
        print(f"triage named the injected cause in {hits} of {total} seeded failures (goal >= {GOAL * total:g} of "
              f"{total}: {'met' if met else 'NOT met'}; load average {load:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
