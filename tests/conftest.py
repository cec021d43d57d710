"""Shared fixtures: run the real `panio` executable against a throwaway lab."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

import sessionhome  # noqa: I001  first: the suite's own HOME and XDG directories, before anything reads them
import forkserver

BIN = Path(sys.executable).parent
PANIO = str(BIN / "panio")
EXEC = os.environ.get("PANIO_TEST_EXEC") == "1"  # every `panio` a new interpreter, not a fork of the zygote


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def error(self) -> dict:
        """The JSON error object: the last line of stderr."""
        return json.loads(self.err.strip().splitlines()[-1])

    def json(self):
        return json.loads(self.out)


class Panio:
    def __init__(self, tmp: Path) -> None:
        self.lab = tmp / "lab.toml"
        self.env = {**os.environ, "PANIO_LAB": str(self.lab), "PANIO_STATE_DIR": str(tmp / "state"),
                    "HOME": str(tmp / "home")}
        self.env.pop("PANIO_DEBUG", None)

    @property
    def lab_key(self) -> str:
        """The key (``Lab.key``) of the lab it runs with (``PANIO_LAB``; these labs have no ``[lab] name``): what
        keys its state and leases."""
        from bench_agent.paths import lab_key_of

        return lab_key_of(self.env["PANIO_LAB"])

    @property
    def state(self) -> Path:
        """The lab's state directory on this machine (``bench_agent.paths.lab_state_dir``): its captures' logs,
        discovery files, sockets and file leases."""
        return Path(self.env["PANIO_STATE_DIR"]) / "labs" / self.lab_key

    def __call__(self, *args: str, check: bool = True, timeout: float = 60, input: str | None = None) -> Result:
        if EXEC:
            p = subprocess.run([PANIO, *args], capture_output=True, text=True, env=self.env, timeout=timeout,
                               input=input, stdin=None if input is not None else subprocess.DEVNULL)
            r = Result(p.returncode, p.stdout, p.stderr)
        else:  # the same run, forked from a Python that has the libraries imported (tests/forkserver.py)
            r = Result(*forkserver.run([PANIO, *args], self.env, timeout, input))
        if check and r.code != 0:
            raise AssertionError(f"panio {' '.join(args)} exited {r.code}\nstdout: {r.out}\nstderr: {r.err}")
        return r

    def fails(self, *args: str, code: int, timeout: float = 60) -> Result:
        r = self(*args, check=False, timeout=timeout)
        assert r.code == code, f"expected exit {code}, got {r.code}\nstdout: {r.out}\nstderr: {r.err}"
        lines = r.err.strip().splitlines()
        assert len(lines) == 2, f"expected one human line and one JSON line, got: {r.err!r}"
        assert lines[0].startswith("panio: ")
        assert "Traceback" not in r.err
        assert r.error["exit"] == code
        return r


def cpu_s(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pytest_unconfigure(config: pytest.Config) -> None:
    sessionhome.finish()


# Fixtures the tests share: ``receiver`` (jobhelp), ``prefix`` (peerhelp), ``fresh`` (freshhost). Registered
# here, not imported by each module, where the test's parameter would shadow the import (pyflakes F811).
pytest_plugins = ["jobhelp", "peerhelp", "freshhost", "slowfirst"]  # slowfirst: the longest test files start first


@pytest.fixture(autouse=True)
def _process_lab_restored():
    """A command run in this process (``load_lab``: MCP in-process, the pytest plugin) makes its lab the
    process's lab (``bench_agent.paths.set_process_lab``); a later test in the same xdist worker must not find
    its state, captures and leases under that lab's directory."""
    from bench_agent import paths

    before = paths._PROCESS_LAB[0]
    yield
    paths._PROCESS_LAB[0] = before


@pytest.fixture
def panio(tmp_path: Path) -> Panio:
    (tmp_path / "home").mkdir()
    return Panio(tmp_path)


def lab(panio: Panio) -> dict:
    """The lab file as parsed data."""
    return tomllib.loads(panio.lab.read_text())


@pytest.fixture
def pico(panio: Panio) -> Panio:
    """A lab with one target, pico, that has one serial interface, console."""
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/ttyUSB0")
    return panio


@pytest.fixture
def bench(panio: Panio, tmp_path: Path):
    """Simulated boards on real PTYs, their captures stopped at the end (``serial_fixtures.Bench``).
    A simulated bench (``panio-sim up``) is ``sim_bench`` or ``video_bench``; a module that needs another bench
    (ser2net exporters, job workers) defines its own ``bench``."""
    from serial_fixtures import Bench

    b = Bench(panio, tmp_path)
    yield b
    b.close()



@pytest.fixture
def sim_bench(panio, tmp_path):
    """One simulated board (``panio-sim up`` in tmp_path/sim: 0.2 s of boot log, 0.3 s of countdown) with
    ``panio`` pointed at its lab, booted to its shell, then its console captured (the log starts after the first
    boot); brought down whatever happens (``simbench.SimBench``). A test that needs other boards or settings
    uses ``simbench.sim_bench`` itself."""
    from simbench import sim_bench as up

    with up(panio, tmp_path / "sim", booted=True, watch=("board0",)) as bench:
        yield bench


@pytest.fixture(scope="module")
def video_bench(tmp_path_factory):
    """One simulated board for a whole module, its screen captured (``video watch``), with a lab and state of
    its own: 2 s of boot log and 1 s of countdown, so a key can reach the board while it boots."""
    from simbench import sim_bench as up

    tmp = tmp_path_factory.mktemp("video")
    (tmp / "home").mkdir()
    with up(Panio(tmp), tmp / "sim", boot_s=2, countdown_s=1, video=("board0",)) as bench:
        yield bench


@pytest.fixture
def video_console(video_bench):
    """``video_bench``'s board0 console (pyserial on its PTY, what came before flushed)."""
    import serial

    with serial.Serial(str(video_bench.dir / "board0.tty"), 115200, timeout=0.2) as port:
        port.reset_input_buffer()
        yield port
