"""`make test` keeps out of the home of the user who runs it (tests/sessionhome.py)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path


def test_the_suite_runs_in_a_home_of_its_own_and_panio_defaults_land_there():
    home = Path(os.environ["HOME"]).resolve()
    assert home != Path(pwd.getpwuid(os.getuid()).pw_dir).resolve()
    assert home == Path(os.environ["PANIO_TEST_HOME"]).resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("PANIO_STATE_DIR", "PANIO_LAB", "PANIO_RESULTS_URL")}
    p = subprocess.run([sys.executable, "-c", "from bench_agent.paths import state_dir; from controller.paths import "
                        "resolve_lab_path; print(state_dir()); print(resolve_lab_path(None)[0])"],
                       capture_output=True, text=True, env=env, check=True)
    state, lab = (Path(line).resolve() for line in p.stdout.split())
    assert state.is_relative_to(home) and lab.is_relative_to(home), p.stdout


def test_what_is_kept_between_runs_is_kept_outside_the_sessions_home():
    home = Path(os.environ["HOME"]).resolve()  # removed when the session ends
    for kept in ("PANIO_TEST_CACHE", "PANIO_QEMU_CACHE"):
        assert not Path(os.environ[kept]).resolve().is_relative_to(home), kept
