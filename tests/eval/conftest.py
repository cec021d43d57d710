"""Eval-suite fixtures: run the real `panio-eval` executable in a throwaway environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
HERE = Path(__file__).parent


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def eval_env(tmp_path: Path) -> dict:
    (tmp_path / "home").mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home"), "PANIO_STATE_DIR": str(tmp_path / "state"),
           "PANIO_LAB": str(tmp_path / "nolab.toml")}
    env.pop("PANIO_DEBUG", None)
    return env


@pytest.fixture
def panio_eval(eval_env: dict, tmp_path: Path):
    def run(*args: str, env: dict | None = None, timeout: float = 120) -> Ran:
        p = subprocess.run([str(BIN / "panio-eval"), *args], capture_output=True, text=True,
                           env=env or eval_env, cwd=tmp_path, timeout=timeout, stdin=subprocess.DEVNULL)
        return Ran(p.returncode, p.stdout, p.stderr)

    return run


@pytest.fixture
def fake_agents(tmp_path: Path) -> Path:
    """A directory with claude/codex/gemini/pi executables that run the scripted fake agent."""
    d = tmp_path / "agents"
    d.mkdir()
    for name in ("claude", "codex", "gemini", "pi", "myagent"):
        fmt = "cmd" if name == "myagent" else name
        exe = d / name
        exe.write_text(f"#!/bin/sh\nFAKE_AGENT_FORMAT={fmt} exec {sys.executable} {HERE / 'fake_agent.py'} \"$@\"\n")
        exe.chmod(0o755)
    return d
