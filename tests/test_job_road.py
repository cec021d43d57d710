"""The job road: steps run as operations in the runner's process (issue 21).

Real parts: simulated boards on real PTYs with panio's real capture
supervisor, real hook processes, the embedded runner of `panio job run`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from pathlib import Path

from jobhelp import job_file

from bench_agent.process import pid_alive
from bench_agent.sim.console import PROMPT

LINES = 12_000
LINE_BYTES = 73  # bench_agent.sim.console.flood_bytes: numbered 73-byte lines


def test_a_long_boot_log_is_kept_whole_in_the_job_artifact(bench, panio, tmp_path):
    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    assert bench.wait_for("pico", PROMPT, timeout_ms=30000)["status"] == "matched"
    body = f"""
target = "pico"
[[steps]]
name = "a long log"
run = "panio serial transact ${{target}} 'flood {LINES * LINE_BYTES}' --until '{PROMPT}$' --max-bytes 1048576 --timeout-ms 120000"
timeout_s = 180
"""
    r = panio("job", "run", job_file(tmp_path, body), "--json", timeout=300)
    job = r.json()
    assert (job["health"], job["result"]) == ("complete", "passed"), r.out
    panio("job", "artifacts", str(job["id"]), "--out", str(tmp_path / "arts"))
    log = (tmp_path / "arts" / "serial-console.log").read_text()
    numbers = [int(m.group(1)) for m in re.finditer(r"#\d+ (\d{8}) ", log)]
    assert numbers[:1] == [0] and numbers[-1] == LINES - 1
    assert sorted(set(numbers)) == list(range(LINES)), "a line of the board's output is missing from the artifact"


HANG = r"""
import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(3600)
"""


def test_a_hung_state_hook_is_stopped_with_what_it_started_and_blamed_on_the_lab(bench, panio, tmp_path):
    sim = bench.board("pico")["console"]
    hook = tmp_path / "hang.py"
    hook.write_text(HANG)
    pidfile = tmp_path / "hook.pid"
    state_cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(hook))} {shlex.quote(str(pidfile))}"
    panio("power", "set", "-t", "pico", "--on-cmd", "true", "--off-cmd", "true", "--state-cmd", state_cmd,
          "--timeout-s", "600")
    panio("serial", "watch", "pico")
    sim.power_on()
    body = """
target = "pico"
[[steps]]
name = "never prints"
run = "panio serial transact ${target} 'echo hi' --until 'never-printed' --timeout-ms 200"
"""
    started = time.monotonic()
    panio.env["PANIO_PROBE_TIMEOUT_S"] = "2"  # the lab probe's bound (20 s by default)
    r = panio("job", "run", job_file(tmp_path, body), "--json", check=False, timeout=300)
    job = json.loads(r.out)
    assert job["health"] == "incomplete", r.out
    assert "power state cannot be read" in job["reason"] and "did not answer within 2 s" in job["reason"]
    assert time.monotonic() - started < 120
    pid = int(pidfile.read_text())
    assert not pid_alive(pid), "the hung state_cmd outlived the lab probe"


def test_a_step_is_an_operation_call_in_the_payload(panio, tmp_path):
    """`job check` compiles each step; the payload names a runtime command and plain data, no command line
    is run by a child panio on the worker."""
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/null")
    from controller.jobs import spec
    from controller.lab import load

    body = """
target = "pico"
[[steps]]
run = "panio serial status ${target}"
capture = { epoch = '"epoch": (\\d+)' }
[[steps]]
run = "panio serial wait ${target} --epoch ${epoch} --since 0 --pattern 'login:'"
"""
    os.environ["PANIO_STATE_DIR"] = panio.env["PANIO_STATE_DIR"]
    job = spec.load(Path(job_file(tmp_path, body)))
    steps = spec.plan_steps(spec.compile_steps(job), load(str(panio.lab)), "pico")
    first, second = steps[0]["run"], steps[1]["run"]
    assert first["op"] == "serial.status" and first["args"]["iface"]["device"] == "/dev/null"
    assert second == {"op": "serial.wait", "args": second["args"]}  # no type beside it: the spec has it
    assert second["args"]["epoch"] == "${epoch}" and second["args"]["pattern"] == "login:"


def test_a_captured_number_becomes_what_its_operations_spec_says_when_the_step_runs(bench, panio, tmp_path):
    """`--timeout-ms ${t}`: the payload carries `${t}`, and when the step runs the captured text becomes the
    whole number serial.transact's spec says its timeout_ms is (the operation refuses a text); a captured
    text that is no whole number is refused naming the flag, as the command line would refuse it."""
    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    assert bench.wait_for("pico", PROMPT, timeout_ms=30000)["status"] == "matched"
    body = f"""
target = "pico"
[[steps]]
run = "panio serial transact ${{target}} 'echo wait=5000 bad=5s' --until '{PROMPT}$'"
capture = {{ t = 'wait=(\\d+)', bad = 'bad=(\\w+)' }}
[[steps]]
name = "a whole number"
run = "panio serial transact ${{target}} 'echo ok' --until '{PROMPT}$' --timeout-ms ${{t}}"
[[steps]]
name = "no whole number"
run = "panio serial transact ${{target}} 'echo ok' --until '{PROMPT}$' --timeout-ms=${{bad}}"
expect_exit = 2
expect_output = "--timeout-ms got '5s' from a captured variable: it must be a whole number"
"""
    r = panio("job", "run", job_file(tmp_path, body), "--json", timeout=120)
    job = r.json()
    assert (job["health"], job["result"]) == ("complete", "passed"), r.out
    steps = panio("job", "status", str(job["id"]), "--json").json()["steps"]
    assert steps[0]["captured"] == {"t": "5000", "bad": "5s"}
    assert [s["status"] for s in steps] == ["pass", "pass", "pass"], steps


def test_a_capture_stopped_during_a_step_is_worded_as_panios_capture_and_is_the_labs(bench, panio, tmp_path):
    """Issue 27, item 3: not "the serial device ... went away" when it was panio's own capture that stopped."""
    import signal
    import subprocess

    from conftest import PANIO
    from jobhelp import stop, wait_for

    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    body = """
target = "pico"
[[steps]]
name = "waits for a prompt that never comes"
run = "panio serial wait ${target} --since-step --pattern 'no-such-prompt' --timeout-ms 60000"
timeout_s = 90
"""
    pid = bench.discovery("pico")["pid"]
    threads = len(os.listdir(f"/proc/{pid}/task"))
    proc = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, body), "--json"], env=panio.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the supervisor answers each connection in a thread of its own: one more thread is the step's wait
        wait_for(lambda: len(os.listdir(f"/proc/{pid}/task")) > threads, 30, 0.02)
        os.kill(pid, signal.SIGTERM)  # stopped behind panio's back (the job's lease refuses `serial stop`)
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    job = json.loads(out)
    assert job["health"] == "incomplete", out
    assert "panio's serial capture of 'pico' stopped" in job["reason"], job["reason"]
    assert "went away" not in job["reason"], job["reason"]
    assert job["error"]["error"] == "not_running" and "panio serial watch pico" in job["error"]["hint"]


PLUG_JOB = """
target = "board0"
[[steps]]
run = "panio serial watch ${target}"
[[steps]]
name = "power-cycle"
run = "panio power-cycle ${target}"
[[steps]]
name = "boots to a shell"
run = "panio serial wait ${target} --since-step --pattern 'root@sim:~# ' --timeout-ms 14000"
timeout_s = 60
"""


def test_a_plug_switched_off_and_on_again_during_the_boot_wait_is_the_labs(panio, tmp_path, receiver):
    """Issue 27, item 2: the plug is switched off through the simulated Shelly API while the job waits for the
    boot, and back on shortly before the wait gives up. Asked afterwards, the lab looks fine (the plug is on);
    what the runner saw during the step makes it the lab's: incomplete, and the notification says so."""
    import subprocess
    import urllib.request

    from conftest import BIN, PANIO
    from jobhelp import stop, wait_for

    directory = tmp_path / "sim"
    sim = str(BIN / "panio-sim")
    subprocess.run([sim, "up", "--dir", str(directory), "--boot-s", "6", "--countdown-s", "0.3"], env=panio.env,
                   check=True, capture_output=True, timeout=60)
    panio.env["PANIO_LAB"] = str(directory / "lab.toml")
    with (directory / "lab.toml").open("a") as f:
        f.write(f'\n[[notify]]\nwebhook = "{receiver.url}/w"\n')
    plug = json.loads((directory / "sim.pids").read_text())[0]["plug"]

    def switch(on: bool) -> None:
        with urllib.request.urlopen(f"http://{plug}/rpc/Switch.Set?id=0&on={str(on).lower()}", timeout=10) as r:
            assert r.status == 200

    from bench_agent.errors import NotConfigured
    from bench_agent.results.store import ResultStore

    results = Path(panio.env["PANIO_STATE_DIR"]) / "results.db"

    def step3() -> dict | None:
        if not results.exists():
            return None
        try:  # read here, not with `panio job status`: quick even on a loaded machine (the board boots in 6 s)
            steps = ResultStore(f"sqlite:///{results}").job(1)["steps"]
        except NotConfigured:  # not recorded yet
            return None
        return steps[2] if len(steps) > 2 else None

    proc = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, PLUG_JOB), "--json"], env=panio.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (step3() or {}).get("status") == "running" or proc.poll() is not None, 60, 0.05)
        assert proc.poll() is None, proc.communicate()
        began = time.monotonic()
        switch(False)  # mid-boot (the board takes 6 s to boot)
        # back on 3 s before the 14 s wait gives up: too late for the board to reach its prompt in time
        wait_for(lambda: time.monotonic() - began >= 11 or proc.poll() is not None, 30)
        switch(True)
        out, err = proc.communicate(timeout=90)
    finally:
        stop(proc)
        subprocess.run([sim, "down", "--dir", str(directory)], env=panio.env, capture_output=True, timeout=60)
    assert proc.returncode == 4, (out, err)  # unreachable: the lab failed; not 14 (the board)
    job = json.loads(out)
    assert job["health"] == "incomplete" and job["result"] is None, job["reason"]
    assert "powered off during the step" in job["reason"] and "it reads on now" in job["reason"], job["reason"]
    assert any(c["check"] == "lab: power" for c in job["steps"][2]["checks"])
    wait_for(lambda: [b for b in receiver.bodies("/w") if b["event"] == "job_incomplete"], 60)
    told = [b for b in receiver.bodies("/w") if b["event"] in ("job_incomplete", "job_failed")]
    assert [b["event"] for b in told] == ["job_incomplete"] and "powered off during the step" in told[0]["text"]


ONCE_OFF = r"""
import pathlib, sys
seen = pathlib.Path(sys.argv[1])
print("on" if seen.exists() else "off")  # off at the first read, on from the second: a plug switched on again
seen.touch()
"""


def test_a_power_read_off_by_the_step_itself_is_the_labs_though_the_power_is_back_on(panio, tmp_path):
    """The compressed night's race: a health check's `panio power-state` reads the plug off, and the plug is
    switched on again before the lab is asked. What the step itself read makes the failure the lab's."""
    hook = tmp_path / "once_off.py"
    hook.write_text(ONCE_OFF)
    seen = tmp_path / "read-once"
    panio("init")
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--on-cmd", "true", "--off-cmd", "true", "--state-cmd",
          f"{shlex.quote(sys.executable)} {shlex.quote(str(hook))} {shlex.quote(str(seen))}")
    body = """
target = "pico"
[[steps]]
name = "powered"
run = "panio power-state ${target}"
expect_output = "Power ON"
"""
    r = panio("job", "run", job_file(tmp_path, body), "--json", check=False, timeout=120)
    assert r.code == 4, r.out  # unreachable: the lab failed; not 14 (the board)
    job = json.loads(r.out)
    assert job["health"] == "incomplete" and job["result"] is None, job["reason"]
    assert "powered off during the step (the step read it off itself)" in job["reason"], job["reason"]
    assert "it reads on now" in job["reason"], job["reason"]  # the probe asked again, after the step
    checks = {c["check"]: c["ok"] for c in job["steps"][0]["checks"]}
    assert checks["output matches /Power ON/"] is False and checks["lab: power"] is False, checks
