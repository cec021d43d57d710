"""The hardware tier: a scenario's reference runs as a panio job on a bench, graded on what happened.

A scenario with a ``[hardware]`` table lists job steps (its reference commands with
``${target}``, plus ``expect_output`` on the physical outcome: the console shows the
banner or the reply, the power state reads back). By default the bench is the
simulated board (``panio-sim up --boards 1``: a PTY console and a Shelly plug, in a
private state directory); ``--lab LAB --target NAME`` runs it on the operator's bench
instead, with the operator's own daemons (the CLI's state directory: a capture already
running is used and left running; what the run starts, it stops). The job's own verdict
(``panio job run`` exit 0 = complete and passed) is the grade.

**The board is described, not assumed.** Steps name the board's look as
``${profile.KEY}``, read from the target's ``[targets.T.profile]`` (docs/lab-file.md;
``panio-sim up`` writes one for its boards): ``prompt`` (regex of its shell prompt),
``screen_text``, ``setup_key`` (a step naming it runs once per key), ``setup_cue``,
``setup_text``. A step with ``bench = "sim"`` runs only on the simulated bench (R6's
clicks in panio's own setup menu), ``bench = "lab"`` only on the operator's. A scenario
that cannot run on the target says so, with the reason (a profile key or a channel it
lacks, or no hardware form at all): status ``cannot_run``, never left out.

A ``[hardware.sim]`` table shapes the simulated bench for one scenario: ``boot_s`` and
``countdown_s`` (R6 needs a countdown long enough to stop autoboot and open setup),
``boards``, ``qemu = true`` (add the QEMU board ``qemu0``, a real kernel), ``netboot =
true`` (that board boots over the network from panio's TFTP server), and ``target``
(which of the bench's boards the job drives; default ``board0``, or ``qemu0`` when the
bench has no simulated board), ``android = true`` (add ``tablet0``, the simulated Android
device, reached through Debian's adb on a private adb server port of the run's own; the
target when the bench has no simulated board).

Pending until panio has ``job run`` and the ``panio-sim`` executable exists.
"""

from __future__ import annotations

import json
import os
import re
import shlex
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
    status: str  # pass | fail | pending | cannot_run (this target lacks what the scenario needs: detail says what)
    detail: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"scenario": self.scenario, "status": self.status, "detail": self.detail}


# A table with ``shell = true`` starts from a known state: capture on, the board off, and the
# shell prompt of the boot that follows. The cursor is noted while the board is off, so a prompt of
# an earlier boot (one still running when the capture started) cannot count. Typing while the board
# still counts down to autoboot would stop it in U-Boot.
SHELL_PREAMBLE = [
    {"name": "capture the console", "run": "panio serial watch ${target}"},
    {"name": "power off", "run": "panio power off ${target}", "timeout_s": 60},
    {"name": "note the cursor before the boot", "run": "panio serial status ${target}",
     "capture": {"boot_epoch": '"epoch": (\\d+)', "boot_cursor": '"cursor": (\\d+)'}},
    {"name": "power on", "run": "panio power on ${target}", "timeout_s": 60},
    {"name": "boots to a shell", "timeout_s": 40,
     "run": "panio serial wait ${target} --epoch ${boot_epoch} --since ${boot_cursor} "
            "--pattern ${profile.prompt} --timeout-ms 30000"},
]
# A board that cannot be switched off and on (only a cycle hook, or no power control at all) is asked for
# no power: the scenario types into the shell that is running now. The cursor is noted first, then an
# empty line is sent, and only a prompt printed after it counts (an old prompt in the log cannot).
RUNNING_SHELL = [
    {"name": "capture the console", "run": "panio serial watch ${target}"},
    {"name": "note the cursor", "run": "panio serial status ${target}",
     "capture": {"boot_epoch": '"epoch": (\\d+)', "boot_cursor": '"cursor": (\\d+)'}},
    {"name": "wake the running shell", "run": "panio serial send ${target} ''"},
    {"name": "the running shell answers", "timeout_s": 20,
     "run": "panio serial wait ${target} --epoch ${boot_epoch} --since ${boot_cursor} "
            "--pattern ${profile.prompt} --timeout-ms 10000"},
]
PROFILE_RE = re.compile(r"\$\{profile\.(\w+)\}")
STEP_KEYS = ("run", "expect_output", "reject_output")


def switchable(power: dict | None) -> bool:
    """The board can be switched off and on (``power off``/``power on`` work): both hooks are configured.
    None: panio's simulated board, which can."""
    return power is None or bool(power.get("on_cmd") and power.get("off_cmd"))


def preamble(power: dict | None) -> list[dict]:
    """How a ``shell = true`` scenario reaches a shell on this board: a known-state boot where the board can be
    switched off and on, else the shell running now (no power asked for)."""
    return SHELL_PREAMBLE if switchable(power) else RUNNING_SHELL


def steps_of(sc: Scenario, own_bench: bool, power: dict | None = None) -> tuple[list[dict], list[dict]]:
    """(the steps this bench runs, the steps left out for the other kind of bench). ``power``: the target's
    power table ({} when it has none; None: panio's simulated board)."""
    hw = sc.hardware or {}
    steps = (preamble(power) if hw.get("shell") else []) + list(hw.get("steps", []))
    here = "sim" if own_bench else "lab"
    return ([st for st in steps if st.get("bench", here) == here], [st for st in steps if st.get("bench", here) != here])


def profile_keys(steps: list[dict]) -> list[str]:
    return list(dict.fromkeys(k for st in steps for f in STEP_KEYS for k in PROFILE_RE.findall(str(st.get(f, "")))))


CHANNEL_OF = {"serial": "serial", "video": "video", "hid": "hid", "netboot": "netboot", "netif": "netboot",
              "power": "power", "power-cycle": "power", "power-state": "power"}


def channels_needed(steps: list[dict]) -> list[str]:
    """The channels the steps drive: the command group of each ``panio GROUP …`` line."""
    out = []
    for st in steps:
        words = st.get("run", "").split()
        if len(words) > 1 and words[1] in CHANNEL_OF:
            out.append(CHANNEL_OF[words[1]])
    return list(dict.fromkeys(out))


def why_not(sc: Scenario, name: str, table: dict, steps: list[dict]) -> str | None:
    """Why the scenario cannot run on this target (None: it can)."""
    lacking = [ch for ch in channels_needed(steps) if not table.get(ch)]
    if lacking:
        return (f"target {name} has no {' or '.join(lacking)} channel ({sc.id} drives "
                f"{', '.join(channels_needed(steps))})")
    profile = table.get("profile") or {}
    missing = [k for k in profile_keys(steps) if k not in profile]
    if not missing:
        return None
    if not profile:
        return (f"target {name} has no [targets.{name}.profile]: {sc.id} needs its {', '.join(missing)} "
                "(describe the board: docs/lab-file.md)")
    if "setup_key" in missing:
        return f"target {name}'s profile names no setup_key: a board without a setup menu ({sc.id} opens it)"
    return f"target {name}'s profile has no {', '.join(missing)} ({sc.id} needs it: docs/lab-file.md)"


def bind(steps: list[dict], profile: dict) -> list[dict]:
    """Steps with ``${profile.KEY}`` filled in: one quoted word in ``run``, the raw regex elsewhere; a step
    naming ``setup_key`` runs once per key."""
    out = []
    for st in steps:
        keys = profile.get("setup_key")
        variants = ([keys] if isinstance(keys, str) else list(keys or [])) if "${profile.setup_key}" in st.get(
            "run", "") else [None]
        for i, key in enumerate(variants):
            values = {**profile, **({"setup_key": key} if key is not None else {})}
            new = dict(st)
            if len(variants) > 1:
                new["name"] = f"{st.get('name', 'step')} ({i + 1}/{len(variants)}: {key})"
            for f in STEP_KEYS:
                if f in new:
                    quote = shlex.quote if f == "run" else str
                    new[f] = PROFILE_RE.sub(lambda m: quote(str(values[m.group(1)])), str(new[f]))
            out.append(new)
    return out



def job_toml(sc: Scenario, profile: dict | None = None, own_bench: bool = True, drop: tuple[str, ...] = (),
             power: dict | None = None) -> str:
    """The job file for a scenario's hardware table (target given on the command line), for a board described by
    ``profile`` (default: panio's simulated board's) and powered by ``power`` (its power table; None: the
    simulated board's), leaving out the ``run`` lines in ``drop``."""
    hw = sc.hardware or {}
    lines = [f"name = {json.dumps('eval-' + sc.id)}", f"description = {json.dumps(sc.title)}",
             f"timeout_s = {int(hw.get('timeout_s', 120))}", ""]
    steps = bind(steps_of(sc, own_bench, power)[0], SIM_PROFILE if profile is None else profile)
    for i, step in enumerate([st for st in steps if st.get("run") not in drop], 1):
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


# panio's simulated board as ``panio-sim up`` describes it (bench_agent.sim.board.SimBoard.profile)
SIM_PROFILE = {"prompt": "root@sim:~# ", "screen_text": "(?i)simulated board", "setup_key": ["ENTER", "F2"],
               "setup_cue": "Hit any key", "setup_text": "Setup Utility"}
SIM_DEFAULTS = {"boards": 1, "boot_s": 0.3, "countdown_s": 0.3, "qemu": False, "netboot": False, "android": False}


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
    if sim["android"]:
        argv.append("--android")
    default = "board0" if int(sim["boards"]) > 0 else "tablet0" if sim["android"] else "qemu0"
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
    if not real_bench and sim.get("android") and shutil.which("adb") is None:
        out.append("adb (scripts/system-deps.sh installs it)")
    return out


def connect_androids(sim: str, env: dict) -> None:
    """`adb connect` the bench's simulated Android devices on this run's adb server."""
    r = subprocess.run([sim, "status", "--json"], env=env, capture_output=True, text=True, timeout=30)
    try:
        boards = json.loads(r.stdout) if r.returncode == 0 else []
    except ValueError:
        boards = []
    for b in boards if isinstance(boards, list) else boards.get("boards", []):
        if isinstance(b, dict) and b.get("kind") == "android":
            subprocess.run(["adb", "connect", b["serial"]], env=env, capture_output=True, timeout=30)


def private_adb_server(env: dict) -> int | None:
    """Start an adb server on a free loopback port for this run (its port in ``env``); None if it would not."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = subprocess.run(["adb", "-P", str(port), "start-server"], env=env, capture_output=True, timeout=60)
    if r.returncode != 0:
        return None
    env["ANDROID_ADB_SERVER_PORT"] = str(port)
    return port


def no_form(sc: Scenario) -> str:
    """Why a scenario without a ``[hardware]`` table runs on no board."""
    if sc.tier == "t1":
        return "cannot run: a config scenario, graded on the lab file it leaves; nothing runs on a board"
    return "cannot run: its catalog entry has no [hardware] steps (its reference does not run as a job yet)"


def _panio(lab: Path, env: dict, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([real_panio(), "--lab", str(lab), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def target_table(lab: Path, target: str, env: dict) -> tuple[dict, str | None]:
    """The target's lab table as ``panio target show --json`` prints it, or why not."""
    r = _panio(lab, env, "target", "show", target, "--json")
    if r.returncode != 0:
        return {}, f"cannot run: {(r.stderr.strip().splitlines() or ['target show failed'])[0]}"
    return json.loads(r.stdout), None


def running(lab: Path, target: str, env: dict) -> set[str]:
    """Kinds of the target's daemons running now (``panio daemons --json``, of the CLI's own state directory)."""
    r = _panio(lab, env, "daemons", "--json")
    try:
        rows = json.loads(r.stdout) if r.returncode == 0 else []
    except ValueError:
        rows = []
    return {d["kind"] for d in rows if d.get("target") == target and d.get("state") == "running" and d.get("kind")}


def run(sc: Scenario, root: Path, guard: Guard, lab: Path | None = None, target: str | None = None) -> HwResult:
    if not sc.hardware:
        return HwResult(sc.id, "cannot_run", [no_form(sc)])
    need = missing(guard, lab is not None, sc)
    if need:
        return HwResult(sc.id, "pending", [f"needs: {', '.join(need)}"])
    root.mkdir(parents=True, exist_ok=True)
    own = lab is None
    # The simulated bench is this run's own (a private state directory); an operator's bench runs on the
    # operator's daemons: the environment as the CLI sees it, so its running captures are the ones used.
    env = {**os.environ, "PANIO_STATE_DIR": str(root / "state")} if own else dict(os.environ)
    job = root / f"{sc.id}.toml"
    sim = sim_exe() if own else None
    before: set[str] = set()
    ran = False  # the job started: on an operator's bench, what it started is stopped after it
    adb_port = None
    try:
        if sim:
            argv, target = sim_args(sc)
            if "--android" in argv and (adb_port := private_adb_server(env)) is None:
                return HwResult(sc.id, "fail", ["could not start a private adb server"])
            up = subprocess.run([sim, "up", *argv], env=env, capture_output=True, text=True, timeout=180)
            if up.returncode != 0:
                return HwResult(sc.id, "fail", [f"panio-sim up exited {up.returncode}: {up.stderr.strip()}"])
            lab = Path(subprocess.run([sim, "status", "--lab"], env=env, capture_output=True, text=True,
                                      timeout=30).stdout.strip())
            if adb_port is not None:  # as a lab's host has its devices attached before a job runs
                connect_androids(sim, env)
        if lab is None or target is None:
            return HwResult(sc.id, "fail", ["no bench: give --lab and --target, or install panio-sim"])
        table, err = target_table(lab, target, env)
        steps, left_out = steps_of(sc, own, table.get("power") or {})
        why = err or why_not(sc, target, table, steps)
        if why:
            return HwResult(sc.id, "cannot_run", [why if why.startswith("cannot run") else f"cannot run: {why}"])
        if not own:
            before = running(lab, target, env)
        drop = tuple(f"panio {kind} stop ${{target}}" for kind in sorted(before))
        job.write_text(job_toml(sc, table.get("profile") or {}, own, drop, table.get("power") or {}))
        ran = True
        r = _panio(lab, env, "job", "run", str(job), "--target", target,
                   timeout=int((sc.hardware or {}).get("timeout_s", 120)) + 60)
        detail = [f"job run exited {r.returncode}"] + r.stderr.strip().splitlines()[:2]
        if left_out and not own:
            detail.append(f"left out {len(left_out)} step(s) written for panio's simulated board: "
                          + "; ".join(st.get("name", st.get("run", "")) for st in left_out))
        if before:
            detail.append(f"used {target}'s running {', '.join(sorted(before))} daemon(s) and left them running")
        return HwResult(sc.id, "pass" if r.returncode == 0 else "fail", detail)
    finally:
        if own:
            # A job that failed midway skipped its own `serial stop`: stop every daemon of this private
            # state dir, so no capture outlives the run.
            subprocess.run([real_panio(), "daemons", "stop", "--all", "--force"], env=env, capture_output=True,
                           timeout=60)
            _end_leftovers(root / "state")
            if sim:
                subprocess.run([sim, "down"], env=env, capture_output=True, timeout=60)
            if adb_port is not None:
                subprocess.run(["adb", "-P", str(adb_port), "kill-server"], env=env, capture_output=True, timeout=60)
        elif ran and lab is not None and target is not None:
            # the operator's daemons stay as they were: stop only what this run started
            for kind in sorted(running(lab, target, env) - before):
                _panio(lab, env, kind, "stop", target)


def _end_leftovers(state: Path, grace_s: float = 5.0) -> None:
    """End, by pid, any daemon process still started with this private ``--state-dir`` or a lab's under it
    (only this run's)."""
    import signal
    import time

    from bench_agent.daemons.registry import _daemon_processes

    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = _daemon_processes(state, every_lab=True)
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace_s
        while left and _daemon_processes(state, every_lab=True) and time.monotonic() < end:
            time.sleep(0.05)


def run_all(scenarios: list[Scenario], root: Path, lab: Path | None = None, target: str | None = None) -> list[HwResult]:
    guard = Guard()
    return [run(sc, root / sc.id, guard, lab, target) for sc in scenarios]  # none left out: cannot_run says why
