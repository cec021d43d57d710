"""Hostile lab files, job files, names and numbers: a clear error, a documented exit code, files unchanged.

Each case is one class of issue 12: special files (FIFO, /dev/zero), sizes,
nesting, names with a trailing newline, numbers out of range or not finite,
symlinked and read-only lab files, killed edits, a lock that is a directory.
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from conftest import PANIO


@pytest.fixture
def board(panio):
    panio("init")
    panio("target", "add", "board0")
    return panio


def snapshot(folder) -> dict:
    return {p.name: (p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p) if p.is_symlink()
                     else "special") for p in sorted(folder.iterdir()) if p.name != "state"}


def test_a_fifo_lab_file_is_refused_at_once(panio, tmp_path):
    os.mkfifo(tmp_path / "fifo.toml")
    panio.env["PANIO_LAB"] = str(tmp_path / "fifo.toml")
    r = panio.fails("target", "list", code=5)  # the fixture's 60 s timeout would catch a hang
    assert "not a regular file" in r.err


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_lab_symlinked_to_a_device_is_refused(panio, tmp_path, device):
    (tmp_path / "dev.toml").symlink_to(device)
    panio.env["PANIO_LAB"] = str(tmp_path / "dev.toml")
    assert "not a regular file" in panio.fails("target", "list", code=5).err


def test_a_job_file_that_is_a_fifo_is_refused(board, tmp_path):
    os.mkfifo(tmp_path / "job.toml")
    assert "not a regular file" in board.fails("job", "check", str(tmp_path / "job.toml"), code=5).err


def test_an_oversized_lab_file_is_refused(panio, tmp_path):
    big = tmp_path / "big.toml"
    with open(big, "w") as f:
        f.write("# padding\n" * (2 << 20))
    panio.env["PANIO_LAB"] = str(big)
    assert "may be at most" in panio.fails("target", "list", code=5).err


def test_deep_nesting_is_config_invalid_not_internal(panio, tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    panio.env["PANIO_LAB"] = str(deep)
    assert "nested too deeply" in panio.fails("target", "list", code=5).err


@pytest.mark.parametrize("argv", [
    ("target", "add", "pico2\n"),
    ("serial", "add", "c\n", "-t", "board0", "--device", "/dev/null"),
    ("target", "add", "pico3", "--tag", "t\n"),
])
def test_names_with_a_trailing_newline_are_refused(board, argv):
    before = board.lab.read_bytes()
    board.fails(*argv, code=7)
    assert board.lab.read_bytes() == before


@pytest.mark.parametrize("argv", [
    ("serial", "add", "c", "-t", "board0", "--device", "/dev/null", "--baud", "99999999999999999999"),
    ("serial", "add", "c", "-t", "board0", "--device", "/dev/null", "--baud", "200000000"),
    ("host", "add", "h1", "--ssh", "u@h", "--port", "65536"),
    ("host", "add", "h1", "--ssh", "u@h", "--port", "99999999999999999999"),
    ("power", "set", "-t", "board0", "--on-cmd", "true", "--timeout-s", "nan"),
    ("power", "set", "-t", "board0", "--on-cmd", "true", "--timeout-s", "inf"),
    ("action", "add", "flash", "-t", "board0", "--command", "true", "--timeout-s", "inf"),
    ("ping", "board0", "--interval", "nan"),
    ("job", "status", "99999999999999999999"),
])
def test_numbers_out_of_range_or_not_finite_are_usage_errors(board, argv):
    before = board.lab.read_bytes()
    r = board.fails(*argv, code=2)
    assert board.lab.read_bytes() == before
    assert any(word in r.err for word in ("finite", "too large", "from 1 to"))


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400"])
def test_a_lab_duration_that_is_not_finite_names_its_line(board, value):
    with open(board.lab, "a") as f:
        f.write(f'\n[targets.board0.power]\non_cmd = "true"\ntimeout_s = {value}\n')
    r = board.fails("target", "list", code=5)
    assert "timeout_s must be a finite number" in r.err and r.error["line"] > 1


def test_edits_through_a_symlink_edit_the_real_file(board, tmp_path):
    link = tmp_path / "link.toml"
    link.symlink_to(board.lab)
    board.env["PANIO_LAB"] = str(link)
    board("target", "add", "pico")
    assert link.is_symlink()
    assert "[targets.pico]" in board.lab.read_text()


def test_a_read_only_lab_file_is_refused_not_replaced(board):
    os.chmod(board.lab, 0o444)
    before = (board.lab.read_bytes(), os.stat(board.lab).st_ino)
    board.fails("target", "add", "pico", code=13)
    assert (board.lab.read_bytes(), os.stat(board.lab).st_ino) == before
    assert stat.S_IMODE(os.stat(board.lab).st_mode) == 0o444


def test_a_killed_edit_leaves_no_temporary_behind(board, tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".lab.toml.{dead.pid}.x1y2.tmp"
    stale.write_text("half a file")
    board("target", "add", "pico")
    assert not stale.exists()


def test_a_lock_that_is_a_directory_is_config_invalid(board):
    os.unlink(f"{board.lab}.lock")
    os.mkdir(f"{board.lab}.lock")
    before = board.lab.read_bytes()
    assert "lock" in board.fails("target", "add", "pico", code=5).err
    assert board.lab.read_bytes() == before


def test_a_dangling_lab_symlink_is_not_configured_like_a_missing_lab(panio, tmp_path):
    (tmp_path / "dangling.toml").symlink_to(tmp_path / "nowhere.toml")
    panio.env["PANIO_LAB"] = str(tmp_path / "dangling.toml")
    assert "symlink" in panio.fails("target", "list", code=3).err


def test_hints_never_echo_unchecked_input_into_a_shell_line(board, tmp_path):
    r = board.fails("target", "show", "x$(touch pwned)", code=3)
    assert "panio target add" not in r.err
    r = board.fails("target", "show", "Board0", code=3)
    assert r.error["hint"].startswith("did you mean 'board0'?")


def test_refused_inputs_leave_the_lab_folder_byte_identical(board, tmp_path):
    before = snapshot(tmp_path)
    for argv in (("target", "add", "bad\n"), ("host", "add", "h", "--ssh", "u@h", "--port", "0"),
                 ("power", "set", "-t", "board0", "--on-cmd", "true", "--timeout-s", "nan")):
        p = subprocess.run([PANIO, *argv], capture_output=True, text=True, env=board.env)
        assert p.returncode in (2, 7) and "Traceback" not in p.stderr
    assert snapshot(tmp_path) == before
