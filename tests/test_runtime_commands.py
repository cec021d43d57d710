"""Every runtime command is one plan and one body (or prints only what the lab says), on the CLI and in a job.

A job step runs the body of the command its line names (``controller.jobs.spec``
plans it, ``bench_agent.commands`` runs it), so each command listed in
``RUNTIME`` must have a plan (``@runtime``) or be ``@static``; a handler
without either is a command a job cannot run. And what a step records — what
users' ``expect_output`` regexes match — is what the CLI prints for the same
command line: checked here on the simulated bench, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess

from conftest import PANIO
from simbench import shell_ready


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return found[0].choices if found else {}


def runtime_handlers() -> dict[str, object]:
    """``"serial send"``, ``"power-cycle"``... -> the argparse handler, for every command ``RUNTIME`` lists."""
    from controller.cli.commands import RUNTIME
    from controller.cli.main import build_parser

    top = _subparsers(build_parser(full=True))
    out = {}
    for name, subs in RUNTIME.items():
        leaves = _subparsers(top[name])
        if not leaves:
            assert subs is None, f"{name} has no subcommands, yet RUNTIME lists {subs}"
            out[name] = top[name].get_default("func")
            continue
        for sub in subs if subs is not None else leaves:
            assert sub in leaves, f"RUNTIME lists `{name} {sub}`, which the CLI does not have"
            out[f"{name} {sub}"] = leaves[sub].get_default("func")
    return out


def test_every_runtime_command_has_a_plan_or_is_static():
    handlers = runtime_handlers()
    assert len(handlers) > 40 and "video shot" in handlers and "doctor" in handlers
    neither = sorted(name for name, h in handlers.items()
                     if getattr(h, "plan", None) is None and not getattr(h, "static", False))
    assert not neither, f"runtime commands a job step cannot run (no plan, not static): {', '.join(neither)}"


LAB = """\
[hosts.bench1]
ssh = "nobody@127.0.0.1"

[targets.pico]
[[targets.pico.serial]]
name = "console"
device = "/dev/ttyUSB0"
[targets.pico.power]
cycle_cmd = "true"
state_cmd = "true"
[targets.pico.video]
device = "/dev/video0"
[targets.pico.hid]
device = "/dev/ttyUSB2"
[targets.pico.adb]
serial = "ABC123"
[targets.pico.netboot]
interface = "lo"
[targets.pico.actions.flash]
command = "true"
"""

# One command line per runtime command: each plans, for a job on pico, to a body that exists.
SAMPLES = {
    "serial watch": "serial watch pico", "serial stop": "serial stop pico", "serial log": "serial log pico",
    "serial send": "serial send pico hi", "serial transact": "serial transact pico hi --until x",
    "serial wait": "serial wait pico --since-step --pattern x", "serial evidence": "serial evidence pico",
    "serial status": "serial status pico", "serial reset": "serial reset pico", "serial dtr": "serial dtr pico --ms 500",
    "serial devices": "serial devices", "power on": "power on pico", "power off": "power off pico",
    "power-cycle": "power-cycle pico", "power-state": "power-state pico --json", "action run": "action run pico flash",
    "action list": "action list pico", "ping": "ping pico", "netboot tftp-root": "netboot tftp-root pico",
    "netboot start": "netboot start pico", "netboot stop": "netboot stop pico --force",
    "netboot status": "netboot status pico --tail 5",
    "netboot stage": "netboot stage pico /srv/builds/Image --as kernel8.img", "netif mode": "netif mode ffx pico",
    "netif down-hard": "netif down-hard pico", "netif status": "netif status pico --no-probe",
    "video show": "video show pico", "video watch": "video watch pico", "video stop": "video stop pico",
    "video shot": "video shot pico -o - --json", "video read": "video read pico --region 0,0,10,10",
    "video wait": "video wait pico --text login:", "hid show": "hid show pico", "hid send": "hid send pico key F2",
    "hid serve": "hid serve pico", "hid stop": "hid stop pico", "adb show": "adb show pico",
    "target show": "target show pico", "target list": "target list", "host show": "host show bench1",
    "host list": "host list", "config show": "config show", "doctor": "doctor", "discover": "discover --json",
    "configure": "configure pi2",
}


def test_every_runtime_command_plans_to_a_body_for_a_job(tmp_path, monkeypatch):
    from bench_agent import commands
    from controller.jobs import spec
    from controller.lab import load

    (tmp_path / "lab.toml").write_text(LAB)
    monkeypatch.setenv("PANIO_STATE_DIR", str(tmp_path / "state"))
    lab = load(str(tmp_path / "lab.toml"))
    assert set(SAMPLES) == set(runtime_handlers()), "give each runtime command a sample line here"
    for name, line in SAMPLES.items():
        run = spec._plan(line.split(), spec._lenient_parser(), lab, "pico")
        assert run["op"] != "system.fail", f"`{line}` failed to plan: {run['args']['error']}"
        assert json.loads(json.dumps(run["args"])) == run["args"], f"`{line}`: args are not plain data"
        commands.body(run["op"])  # registered, in the group the name says


def test_a_job_step_reaches_only_its_targets_host(tmp_path):
    from controller.jobs import spec
    from controller.lab import load

    (tmp_path / "lab.toml").write_text(LAB + '\n[targets.far]\nhost = "bench1"\n')
    lab = load(str(tmp_path / "lab.toml"))
    doctor = spec._plan(["doctor"], spec._lenient_parser(), lab, "pico")
    assert [t["name"] for t in doctor["args"]["targets"]] == ["pico"]  # not far: its host is not the step's
    for line in ("doctor far", "discover --host bench1", "configure pi2 --host bench1"):
        run = spec._plan(line.split(), spec._lenient_parser(), lab, "pico")
        assert run["op"] == "system.fail" and "in a job step would run on pico's host" in \
            run["args"]["error"]["message"], line


# -- a step's output is the CLI's --------------------------------------------------------------------


def cli_output(env: dict, argv: list[str]) -> tuple[int, str]:
    """What the CLI prints for ``argv``, stdout and stderr in one stream, as a job step records it."""
    p = subprocess.run([PANIO, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, timeout=60, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout


def test_job_steps_print_what_the_cli_prints(video_bench, video_console, tmp_path):
    shell_ready(video_bench, video_console)  # booted, at the prompt: the screen stays as it is while nothing types
    video_bench("netboot", "set", "-t", "board0", "--interface", "lo", "--server", "panio", "--tftp-port", "6969")
    shot = tmp_path / "shot.png"
    lines = [
        (["power-state", "board0"], 0),
        (["power-state", "board0", "--json"], 0),
        (["video", "shot", "board0", "-o", str(shot), "--stable", "--stable-ms", "300"], 0),
        (["video", "show", "board0"], 0),
        (["hid", "send", "board0", "moveabs", "100", "200"], 0),
        (["hid", "send", "board0", "--json", "moveabs", "100", "200"], 0),
        (["hid", "send", "board0"], 2),
        (["netboot", "status", "board0"], 0),
        (["netboot", "tftp-root", "board0", "--json"], 0),
        (["netif", "status", "board0", "--no-probe"], 0),
        (["video", "wait", "board0", "--text", "NEVER-THERE", "--timeout", "300"], 22),
    ]
    steps = "".join(f'[[steps]]\nrun = {json.dumps(shlex.join(argv))}\nexpect_exit = {code}\n' for argv, code in lines)
    job = tmp_path / "same.toml"
    job.write_text(f'name = "same"\ntarget = "board0"\n{steps}')
    job_id = video_bench("job", "run", str(job), "--json", timeout=180).json()["id"]
    recorded = video_bench("job", "logs", str(job_id), "--json").json()
    assert [s["status"] for s in recorded] == ["pass"] * len(lines)
    for (argv, code), step in zip(lines, recorded):
        got_code, printed = cli_output(video_bench.env, argv)
        assert got_code == code, (argv, printed)
        timed = re.compile(r'"elapsed_ms": \d+')  # a timeout says how long it waited: the one fact that varies
        assert timed.sub("", step["output"]) == timed.sub("", printed), f"panio {' '.join(argv)}"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # written by the body, where the step ran

