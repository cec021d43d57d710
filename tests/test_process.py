"""bench_agent.process: the one way panio runs a child (hooks, actions, job steps, MCP commands, eval agents)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from bench_agent.process import Child, module_argv, panio_argv, pid_alive, run
from jobhelp import wait_gone


def _pids(path) -> list[int]:
    deadline = time.monotonic() + 60
    while not path.exists() or len(path.read_text().split()) < 2:
        assert time.monotonic() < deadline, "the child never wrote its pids"
        time.sleep(0.02)
    return [int(p) for p in path.read_text().split()]


def test_deadline_stops_the_child_and_a_grandchild_in_its_own_session(tmp_path):
    pids = tmp_path / "pids"
    # The grandchild escapes the group with setsid, as a hook that daemonizes would: /proc still finds it.
    script = f"setsid sleep 60 & echo $! >> {pids}; echo $$ >> {pids}; echo started; wait"
    started = time.monotonic()
    done = run(["sh", "-c", script], deadline_s=2.0)
    assert done.timed_out and done.code is None and done.out == "started\n"
    assert time.monotonic() - started < 30  # the deadline, and the grace, not the sleep's 60 s
    wait_gone(*_pids(pids))


def test_a_child_that_ignores_term_is_killed_after_the_grace_and_reaped(tmp_path):
    import threading

    ready = threading.Event()
    child = Child([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                   "print('ready', flush=True); time.sleep(60)"], on_line=lambda line: ready.set())
    assert ready.wait(60), "the child never started"  # its start-up is not the deadline's to measure
    started = time.monotonic()
    done = child.wait(0.5)
    assert done.timed_out and done.out == "ready\n"
    assert 0.5 + 1.5 < time.monotonic() - started < 30  # TERM ignored, KILL after the grace (not never)
    assert child.proc.returncode == -signal.SIGKILL
    assert not os.path.exists(f"/proc/{child.pid}")  # reaped: no zombie left behind


def test_output_is_streamed_line_by_line_and_stderr_kept_apart(tmp_path):
    seen: list[tuple[float, str]] = []
    child = Child(["sh", "-c", "echo one; echo oops >&2; sleep 1.5; echo two"],
                  on_line=lambda line: seen.append((time.monotonic(), line)))
    done = child.wait(60)
    assert done.code == 0 and done.out == "one\ntwo\n" and done.err == "oops\n"
    assert [line for _, line in seen] == ["one", "two"] and seen[1][0] - seen[0][0] > 0.75  # as it came


def test_should_stop_names_the_reason_and_input_is_fed():
    done = Child(["cat"], input=b"typed\n").wait(10)
    assert done.code == 0 and done.out == "typed\n"
    calls = []
    done = Child(["sleep", "30"]).wait(10, lambda: "canceled" if len(calls.append(1) or calls) > 3 else None)
    assert done.stopped == "canceled" and done.code is None


def test_panio_children_never_run_a_project_package_from_the_callers_cwd(tmp_path):
    """A user's project with its own `controller/` package must never stand in for panio's."""
    for pkg in ("controller", "controller/cli", "bench_agent"):
        (tmp_path / pkg).mkdir(exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "controller" / "cli" / "main.py").write_text("print('IMPOSTOR')\n")
    (tmp_path / "bench_agent" / "agent.py").write_text("print('IMPOSTOR')\n")
    r = subprocess.run([*panio_argv(), "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.stdout.startswith("panio ") and "IMPOSTOR" not in r.stdout
    unsafe = subprocess.run([sys.executable, "-m", "controller.cli.main", "--version"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert "IMPOSTOR" in unsafe.stdout  # what -P prevents
    assert module_argv("bench_agent.agent")[:2] == [sys.executable, "-P"]


def test_a_job_run_from_a_project_with_its_own_controller_package_runs_panio(panio, tmp_path):
    project = tmp_path / "project"
    (project / "controller" / "cli").mkdir(parents=True)
    for pkg in ("controller", "controller/cli"):
        (project / pkg / "__init__.py").write_text("")
    (project / "controller" / "cli" / "main.py").write_text("print('IMPOSTOR'); raise SystemExit(0)\n")
    (project / "job.toml").write_text("target = 'pico'\n[[steps]]\nrun = 'ping ${target}'\nexpect_output = 'seq=1'\n")
    panio("init")
    panio("target", "add", "pico")
    from conftest import PANIO

    r = subprocess.run([PANIO, "job", "run", "job.toml"], cwd=project, env=panio.env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all steps passed" in r.stdout  # the step printed seq=1: panio's ping ran, not the impostor


def test_a_signal_while_the_readers_start_stops_the_child(tmp_path, monkeypatch):
    """SIGTERM (SystemExit) landing while Child starts its reader threads: under load that window is
    milliseconds wide, and the hook used to outlive panio (tests/test_termination.py caught it)."""
    import threading

    pidfile = tmp_path / "pid"
    real_start = threading.Thread.start

    def start_then_terminated(thread):
        real_start(thread)
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text().strip():  # the child is running
            assert time.monotonic() < deadline
            time.sleep(0.01)
        raise SystemExit(143)

    monkeypatch.setattr(threading.Thread, "start", start_then_terminated)
    with pytest.raises(SystemExit):
        Child(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"])
    monkeypatch.undo()
    assert not pid_alive(int(pidfile.read_text()))  # stopped and reaped before the signal was raised


def test_a_sigterm_inside_popen_waits_until_the_child_can_be_stopped(tmp_path, monkeypatch):
    """The signal lands after the fork, before Popen returns (seen under load): panio's handler holds it, and
    Child raises it once the child is stopped, instead of leaving the child running."""
    from controller.cli.main import _terminated

    pidfile = tmp_path / "pid"
    real_popen = subprocess.Popen

    def popen_then_sigterm(*args, **kw):
        proc = real_popen(*args, **kw)
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside "Popen"
        return proc

    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        monkeypatch.setattr(subprocess, "Popen", popen_then_sigterm)
        with pytest.raises(SystemExit) as exit:
            Child(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert exit.value.code == 143
    assert not pid_alive(int(pidfile.read_text()))  # stopped and reaped before the signal was raised
