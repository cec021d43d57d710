"""Issue 45's smaller holes: serial device URLs, schedule values, a failed setup install, a full filesystem, bytes
that are not UTF-8 in arguments, control characters echoed in errors.

Each is refused where it enters with one human line and one JSON line, a documented exit code and every file as
it was; the serial device is refused again where the host opens it.
"""

from __future__ import annotations

import pytest

from bench_agent.errors import Refused
from conftest import Panio


@pytest.fixture
def board(panio: Panio) -> Panio:
    panio("init")
    panio("target", "add", "board0")
    return panio


def unchanged(panio: Panio, *argv: str, code: int):
    before = panio.lab.read_bytes()
    r = panio.fails(*argv, code=code)
    assert panio.lab.read_bytes() == before
    return r


# -- serial device URLs ---------------------------------------------------------------------------------------

HOSTILE_DEVICES = ["spy:///dev/null?file={mark}", "SPY:///dev/null?file={mark}", "hwgrep://.*",
                   "rfc2217://h:7001?file={mark}", "socket://h:7002?logging=debug&x=1", "socket://h",
                   "alt:///dev/ttyS0?class=PosixPollSerial", "/dev/tty\rS0"]


@pytest.mark.parametrize("device", HOSTILE_DEVICES, ids=["spy", "spy upper", "hwgrep", "rfc2217 option",
                                                         "socket option", "no port", "alt", "control char"])
def test_a_serial_device_pyserial_must_not_open_is_refused_by_the_config_commands(board, tmp_path, device):
    device = device.format(mark=tmp_path / "pwned")
    r = unchanged(board, "serial", "add", "console", "-t", "board0", "--device", device, code=2)
    assert r.err.startswith("panio: --device: ") and r.error["error"] == "usage"
    board("serial", "add", "console", "-t", "board0", "--device", "/dev/ttyUSB0")
    r = unchanged(board, "serial", "set", "console", "-t", "board0", "--device", device, code=2)
    assert "--device" in r.error["message"]
    r = unchanged(board, "hid", "set", "-t", "board0", "--device", "spy:///dev/null?file=" + str(tmp_path / "pwned"),
                  code=2)
    assert "targets.board0.hid.device" in r.error["message"]
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("device", ["/dev/ttyUSB0", "rfc2217://console-server.lab:7001",
                                    "rfc2217://h:7001?logging=debug&ign_set_control", "socket://[::1]:7002",
                                    "loop://", "simboard:///dev/pts/7?state=/tmp/sim/b.power&lines=CTS,RI"])
def test_the_documented_serial_devices_are_accepted(board, device):
    board("serial", "add", "console", "-t", "board0", "--device", device)
    assert board("target", "show", "board0", "--json").json()["serial"][0]["device"] == device


def test_a_lab_file_holding_a_spy_device_is_refused_at_load(board, tmp_path):
    mark = tmp_path / "pwned"
    board.lab.write_text(board.lab.read_text() + f'[[targets.board0.serial]]\nname = "console"\n'
                                                  f'device = "spy:///dev/null?file={mark}"\n')
    for argv in (("target", "list"), ("serial", "watch", "board0"), ("power-state", "board0")):
        r = unchanged(board, *argv, code=5)
        assert "targets.board0.serial[0].device" in r.err and "spy://" in r.error["message"]
    assert not mark.exists()


def test_a_parse_an_older_panio_cached_does_not_let_a_spy_device_past_the_new_rule(board, monkeypatch):
    """The parse cache is keyed by the file's text: one made before the rule existed must not be believed."""
    import marshal
    import os
    import tomllib

    from bench_agent.paths import lab_cache_path
    from bench_agent.private import private_dir, write_private

    text = board.lab.read_text() + '[[targets.board0.serial]]\nname = "console"\ndevice = "spy:///dev/null?file=x"\n'
    board.lab.write_text(text)
    monkeypatch.setenv("PANIO_STATE_DIR", board.env["PANIO_STATE_DIR"])
    cache = lab_cache_path(str(board.lab))
    private_dir(os.path.dirname(os.path.dirname(cache)))
    private_dir(os.path.dirname(cache))
    write_private(cache, marshal.dumps({"text": text, "data": tomllib.loads(text)}))  # as an older panio wrote it
    r = unchanged(board, "target", "list", code=5)
    assert "targets.board0.serial[0].device" in r.err


def test_the_host_refuses_a_spy_device_where_it_opens_the_port(tmp_path):
    """Defence in depth: an interface table that did not come through the lab file's schema."""
    from bench_agent.hid.backends.ch9329 import Ch9329Backend
    from bench_agent.serial.device import open_port

    mark = tmp_path / "pwned"
    with pytest.raises(Refused, match="panio does not open spy://"):
        open_port({"name": "console", "device": f"spy:///dev/null?file={mark}"})
    with pytest.raises(Refused, match="unknown option 'file'"):
        open_port({"name": "console", "device": f"rfc2217://127.0.0.1:1?file={mark}"})
    with pytest.raises(Refused, match="HID rig"):
        Ch9329Backend(f"spy:///dev/null?file={mark}")
    assert not mark.exists()


# -- schedule values ------------------------------------------------------------------------------------------

@pytest.fixture
def suite(board: Panio, tmp_path):
    board.env["PANIO_RESULTS_URL"] = f"sqlite:///{tmp_path / 'results.db'}"
    (tmp_path / "quick.toml").write_text("[[steps]]\nrun = 'target show ${target}'\n")
    path = tmp_path / "suite.toml"
    path.write_text("name = 'nightly'\njobs = ['quick.toml']\ntargets = ['board0']\n")
    return str(path)


@pytest.mark.parametrize("when", [("--at", ""), ("--every", ""), ("--every", "3000000d"), ("--every", "0.5s"),
                                  ("--every", "366d"), ("--at", " ")],
                         ids=["empty at", "empty every", "every 3000000d", "under a second", "over a year", "blank"])
def test_a_schedule_time_that_is_empty_or_out_of_range_is_a_usage_error(board, suite, when):
    r = board.fails("schedule", "add", "often", "--suite", suite, *when, code=2)
    assert r.error["error"] == "usage" and when[0] in r.error["message"]
    assert board("schedule", "list", "--json").json() == []


def test_the_bounds_of_every_are_accepted_and_said_in_the_help(board, suite):
    board("schedule", "add", "often", "--suite", suite, "--every", "1s")
    board("schedule", "add", "yearly", "--suite", suite, "--every", "365d")
    assert "from 1s to 365d" in board("schedule", "add", "--help").out


def test_a_stored_bad_schedule_never_breaks_the_list_nor_the_dashboard(board, suite, tmp_path):
    """Rows as an older panio stored them (`--every 3000000d`, `--at ''`) or written by hand."""
    import time

    from controller.jobs.schedules import ScheduleStore
    from dashhelp import Client, DashboardProc

    store = ScheduleStore(board.env["PANIO_RESULTS_URL"])
    now = time.time()
    rows = [dict(name="far", suite=suite, at=None, every_s=3e6 * 86400, next_due=now + 3e6 * 86400),
            dict(name="unset", suite=suite, at=None, every_s=None, next_due=now),
            dict(name="garbled", suite=suite, at="99:99", every_s=None, next_due=1e300, last_jobs="{oops")]
    with store.engine.begin() as c:
        for row in rows:
            c.execute(store.t.insert().values(created_at=now, **row))
    board("schedule", "add", "nightly", "--suite", suite, "--at", "02:00")
    out = board("schedule", "list").out
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert all("never runs" in lines[name] for name in ("far", "unset", "garbled")), out
    assert "never runs" not in lines["nightly"]
    listed = {s["name"]: s for s in board("schedule", "list", "--json").json()}
    assert listed["nightly"]["problem"] is None and listed["far"]["problem"] and listed["garbled"]["last_jobs"] == []
    token = "rd-" + "x" * 20
    dash = DashboardProc({**board.env, "PANIO_DASHBOARD_READ_TOKEN": token}, tmp_path / "dashboard.log")
    try:
        c = Client(dash.url)
        assert c.post("/login", {"token": token})[0] == 303
        status, _, page = c.get("/schedules")
        assert status == 200 and "never runs" in page and "daily at 02:00" in page
    finally:
        dash.stop()


# -- a full filesystem --------------------------------------------------------------------------------------

@pytest.fixture
def full(tmp_path):
    """A 512 KiB tmpfs of the test's own (the tests run as root in CI); unmounted at the end."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounts a tmpfs (CI runs as root)")
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder) -> None:
    with open(folder / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


def test_a_full_filesystem_is_device_error_and_the_lab_file_stays_as_it_was(panio, full):
    panio.lab = full / "lab.toml"
    panio.env.update(PANIO_LAB=str(panio.lab), PANIO_STATE_DIR=str(full / "state"),
                     PANIO_RESULTS_URL=f"sqlite:///{full / 'results.db'}")
    panio("init")
    panio("target", "add", "board0")
    panio("schedule", "list")  # the results database exists, empty
    fill(full)
    before = sorted(p.name for p in full.iterdir())
    for argv in (("target", "add", "board1"), ("serial", "add", "console", "-t", "board0", "--device", "/dev/null")):
        r = unchanged(panio, *argv, code=12)
        assert r.error["reason"] == "no_space" and r.error["file"] == str(panio.lab)
        assert "No space left on device" in r.err and "internal" not in r.err
    assert sorted(p.name for p in full.iterdir()) == before  # no temporary left behind
    r = unchanged(panio, "keys", "init", code=12)
    assert r.error["reason"] == "no_space"
    suite = full.parent / "suite.toml"  # beside the full filesystem: the schedule's row is what does not fit
    (full.parent / "quick.toml").write_text("[[steps]]\nrun = 'target show ${target}'\n")
    suite.write_text("name = 'nightly'\njobs = ['quick.toml']\ntargets = ['board0']\n")
    r = unchanged(panio, "schedule", "add", "often", "--suite", str(suite), "--every", "1h", code=12)
    assert r.error["reason"] == "no_space" and "disk is full" in r.err
    assert "board1" not in panio("target", "list").out


# -- bytes that are not UTF-8, control characters echoed back --------------------------------------------------

@pytest.mark.parametrize("argv", [[b"serial", b"send", b"board0", b"\xff"], [b"target", b"show", b"b\xffoard"],
                                  [b"--lab", b"/tmp/l\xe9b.toml", b"target", b"list"]],
                         ids=["send", "target name", "lab path"])
def test_an_argument_that_is_not_utf8_is_a_usage_error(board, argv):
    import subprocess

    from conftest import PANIO

    before = board.lab.read_bytes()
    p = subprocess.run([PANIO.encode(), *argv], capture_output=True, env=board.env, timeout=60)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and len(lines) == 2 and "Traceback" not in p.stderr.decode(), p.stderr
    assert "is not UTF-8 text" in lines[0] and "\\udc" in lines[0] and '"error": "usage"' in lines[1]
    assert board.lab.read_bytes() == before


@pytest.mark.parametrize("text", ['[targets.board0]\n"bad\\rkey" = 1\n', '[targets."b\\r\\u001b[2Jx"]\n',
                                  '[targets.board0]\nserial = [{name = "c", device = "/dev/x", "b\\u001b]0;x\\u0007" = 1}]\n',
                                  '[targets.board0]\ndescription = "\\u202e"\n"\\u2028" = 1\n'],
                         ids=["carriage return", "escape in a name", "osc in a key", "line separator"])
def test_control_characters_in_a_lab_file_are_escaped_in_the_error(panio, text):
    panio.lab.write_text(text)
    r = panio.fails("target", "list", code=5)  # exactly two lines, the first starting "panio: "
    human = r.err.splitlines()[0]
    assert not any(c in human for c in "\r\x1b\x07\u2028") and ("\\r" in human or "\\x1b" in human or "\\u2028" in human)
    assert r.error["error"] == "config_invalid"
