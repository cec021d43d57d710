"""The hardware tier: a scenario's reference runs as a panio job on a bench, graded on what happened.

A scenario with a ``[hardware]`` table lists job steps (its reference commands with
``${target}``, plus ``expect_output`` on the physical outcome: the console shows the
banner or the reply, the power state reads back). By default the bench is the
simulated board (``panio-sim up --boards 1``: a PTY console and a Shelly plug);
``--lab LAB --target NAME`` runs it on a real bench instead. The job's own verdict
(``panio job run`` exit 0 = complete and passed) is the grade.

A ``[hardware.sim]`` table shapes the simulated bench for one scenario: ``boot_s`` and
``countdown_s`` (R6 needs a countdown long enough to stop autoboot and open setup),
``boards``, ``qemu = true`` (add the QEMU board ``qemu0``, a real kernel), ``netboot =
true`` (that board boots over the network from panio's TFTP server), and ``target``
(which of the bench's boards the job drives; default ``board0``, or ``qemu0`` when the
bench has no simulated board).

Pending until panio has ``job run`` and the ``panio-sim`` executable exists.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from scenarios.drift import Guard
from scenarios.sandbox import real_panio
from scenarios.scenario import Scenario


@dataclass
class HwResult:
    scenario: str
    status: str  # pass | fail | pending
    detail: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"scenario": self.scenario, "status": self.status, "detail": self.detail}


# A table with ``shell = true`` starts from a known state: capture on, a power-cycle, and the
# board's shell prompt seen after the new boot's banner (a prompt from before the cycle does
# not count). Typing while the board still counts down to autoboot would stop it in U-Boot.
SHELL_PREAMBLE = [
    {"name": "capture the console", "run": "panio serial watch ${target}"},
    {"name": "note the cursor before the cycle", "run": "panio serial status ${target}",
     "capture": {"boot_epoch": '"epoch": (\\d+)', "boot_cursor": '"cursor": (\\d+)'}},
    {"name": "power-cycle", "run": "panio power-cycle ${target}", "timeout_s": 60},
    {"name": "boots to a shell", "timeout_s": 40,
     "run": "panio serial wait ${target} --epoch ${boot_epoch} --since ${boot_cursor} "
            "--pattern 'U-Boot[\\s\\S]*root@sim:~# ' --timeout-ms 30000"},
]


def job_toml(sc: Scenario) -> str:
    """The job file for a scenario's hardware table (target given on the command line)."""
    hw = sc.hardware or {}
    lines = [f"name = {json.dumps('eval-' + sc.id)}", f"description = {json.dumps(sc.title)}",
             f"timeout_s = {int(hw.get('timeout_s', 120))}", ""]
    steps = (SHELL_PREAMBLE if hw.get("shell") else []) + list(hw.get("steps", []))
    for i, step in enumerate(steps, 1):
        lines.append("[[steps]]")
        lines.append(f"name = {json.dumps(step.get('name', f'step {i}'))}")
        for key in ("run", "expect_output", "reject_output", "timeout_s", "expect_exit"):
            if key in step:
                lines.append(f"{key} = {json.dumps(step[key])}")
        if step.get("capture"):
            pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in step["capture"].items())
            lines.append(f"capture = {{ {pairs} }}")
        lines.append("")
    return "\n".join(lines)


SIM_DEFAULTS = {"boards": 1, "boot_s": 0.3, "countdown_s": 0.3, "qemu": False, "netboot": False}


def sim_args(sc: Scenario) -> tuple[list[str], str]:
    """``panio-sim up`` arguments for this scenario's bench, and the target its job drives."""
    sim = {**SIM_DEFAULTS, **(sc.hardware or {}).get("sim", {})}
    unknown = set(sim) - set(SIM_DEFAULTS) - {"target"}
    if unknown:
        raise ValueError(f"{sc.id}: unknown [hardware.sim] key(s) {sorted(unknown)}")
    argv = ["--boards", str(int(sim["boards"])), "--boot-s", str(float(sim["boot_s"])),
            "--countdown-s", str(float(sim["countdown_s"]))]
    if sim["qemu"] or sim["netboot"]:
        argv.append("--qemu")
    if sim["netboot"]:
        argv.append("--qemu-netboot")
    default = "board0" if int(sim["boards"]) > 0 else "qemu0"
    return argv, str(sim.get("target", default))


def sim_exe() -> str | None:
    beside = Path(real_panio()).parent / "panio-sim"
    return str(beside) if beside.exists() else shutil.which("panio-sim")


def missing(guard: Guard, real_bench: bool, sc: Scenario | None = None) -> list[str]:
    out = [] if guard.live.find(["job", "run"]) else ["job run"]
    if not real_bench and sim_exe() is None:
        out.append("panio-sim")
    sim = ((sc.hardware or {}).get("sim", {}) if sc else {})
    if not real_bench and (sim.get("qemu") or sim.get("netboot")) and shutil.which("qemu-system-x86_64") is None:
        out.append("qemu-system-x86 (scripts/system-deps.sh installs it)")
    return out


def run(sc: Scenario, root: Path, guard: Guard, lab: Path | None = None, target: str | None = None) -> HwResult:
    need = missing(guard, lab is not None, sc)
    if need:
        return HwResult(sc.id, "pending", [f"needs: {', '.join(need)}"])
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PANIO_STATE_DIR": str(root / "state")}
    job = root / f"{sc.id}.toml"
    job.write_text(job_toml(sc))
    sim = None if lab is not None else sim_exe()
    try:
        if sim:
            argv, target = sim_args(sc)
            up = subprocess.run([sim, "up", *argv], env=env, capture_output=True, text=True, timeout=180)
            if up.returncode != 0:
                return HwResult(sc.id, "fail", [f"panio-sim up exited {up.returncode}: {up.stderr.strip()}"])
            lab = Path(subprocess.run([sim, "status", "--lab"], env=env, capture_output=True, text=True,
                                      timeout=30).stdout.strip())
        r = subprocess.run([real_panio(), "--lab", str(lab), "job", "run", str(job), "--target", target or "board0"],
                           env=env, capture_output=True, text=True, timeout=int((sc.hardware or {}).get("timeout_s", 120)) + 60)
        status = "pass" if r.returncode == 0 else "fail"
        return HwResult(sc.id, status, [f"job run exited {r.returncode}"] + r.stderr.strip().splitlines()[:2])
    finally:
        # A job that failed midway skipped its own `serial stop`: stop every daemon of this private
        # state dir, so no capture outlives the run.
        subprocess.run([real_panio(), "daemons", "stop", "--all", "--force"], env=env, capture_output=True, timeout=60)
        _end_leftovers(root / "state")
        if sim:
            subprocess.run([sim, "down"], env=env, capture_output=True, timeout=60)


def _end_leftovers(state: Path, grace_s: float = 5.0) -> None:
    """End, by pid, any daemon process still started with this private ``--state-dir`` (only this run's)."""
    import signal
    import time

    from bench_agent.daemons.registry import _daemon_processes

    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = _daemon_processes(state)
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace_s
        while left and _daemon_processes(state) and time.monotonic() < end:
            time.sleep(0.05)


def run_all(scenarios: list[Scenario], root: Path, lab: Path | None = None, target: str | None = None) -> list[HwResult]:
    guard = Guard()
    return [run(sc, root / sc.id, guard, lab, target) for sc in scenarios if sc.hardware]
