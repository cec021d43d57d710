"""The suite's `panio` runs (tests/forkserver.py) behave as a new interpreter's would: the same exit codes, output
and errors, the run's environment, working directory and standard input, a timeout that kills, no state left
from one run to the next."""

from __future__ import annotations

import subprocess

import pytest

import forkserver
from conftest import PANIO


def both(panio, *args: str, input: str | None = None) -> tuple[tuple, tuple]:
    forked = forkserver.run([PANIO, *args], panio.env, 60, input)
    p = subprocess.run([PANIO, *args], capture_output=True, text=True, env=panio.env, timeout=60, input=input,
                       stdin=None if input is not None else subprocess.DEVNULL)
    return forked, (p.returncode, p.stdout, p.stderr)


@pytest.mark.parametrize("args", [("--help",), ("target", "list"), ("target", "list", "--json"), ("nosuch",),
                                  ("target", "add", "Bad Name"), ("config", "show")])
def test_a_forked_run_prints_and_exits_as_a_new_interpreter(panio, args):
    panio("init")
    forked, real = both(panio, *args)
    assert forked == real


INIT = ('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", '
        '"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}\n')


def test_each_run_has_its_own_environment_and_input(panio, tmp_path):
    panio("init")
    other = dict(panio.env, PANIO_LAB=str(tmp_path / "other.toml"))
    code, out, err = forkserver.run([PANIO, "target", "list"], other, 60, None)
    assert code != 0 and "other.toml" in err  # this run's lab, not the one the run before had
    forked, real = both(panio, "mcp", input=INIT)  # the MCP server answers what it reads on stdin
    assert forked[:2] == real[:2] and '"id":1' in forked[1].replace(" ", "")
    assert forked[2].splitlines()[0] == real[2].splitlines()[0]  # the next line says how long it served


def test_a_run_past_its_timeout_is_killed(panio):
    panio("init")
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run([PANIO, "dashboard", "--port", "0"], panio.env, 2.0, None)  # serves until stopped
