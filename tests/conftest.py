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

BIN = Path(sys.executable).parent
PANIO = str(BIN / "panio")


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

    def __call__(self, *args: str, check: bool = True, timeout: float = 60, input: str | None = None) -> Result:
        p = subprocess.run([PANIO, *args], capture_output=True, text=True, env=self.env, timeout=timeout,
                           input=input, stdin=None if input is not None else subprocess.DEVNULL)
        r = Result(p.returncode, p.stdout, p.stderr)
        if check and r.code != 0:
            raise AssertionError(f"panio {' '.join(args)} exited {r.code}\nstdout: {r.out}\nstderr: {r.err}")
        return r

    def fails(self, *args: str, code: int) -> Result:
        r = self(*args, check=False)
        assert r.code == code, f"expected exit {code}, got {r.code}\nstdout: {r.out}\nstderr: {r.err}"
        lines = r.err.strip().splitlines()
        assert len(lines) == 2, f"expected one human line and one JSON line, got: {r.err!r}"
        assert lines[0].startswith("panio: ")
        assert "Traceback" not in r.err
        assert r.error["exit"] == code
        return r


# Fixtures the job tests share: ``receiver`` (jobhelp), ``prefix`` (peerhelp). Registered here, not imported by
# each module, where the test's parameter would shadow the import (pyflakes F811).
pytest_plugins = ["jobhelp", "peerhelp"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long files (``pytestmark = pytest.mark.starts_first``) run first: with ``-n 4 --dist loadfile``
    a worker that picked one up last would run it alone while the other three sit idle."""
    items.sort(key=lambda item: item.get_closest_marker("starts_first") is None)  # stable: order kept otherwise


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
    A module that needs another bench (``panio-sim up``, ser2net exporters) defines its own ``bench``."""
    from serial_fixtures import Bench

    b = Bench(panio, tmp_path)
    yield b
    b.close()

