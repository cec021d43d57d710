"""The pytest plugin (``--panio-lab``, ``--panio-target(s)``) driving the simulated bench, run through pytester.

The inner test sessions run in a subprocess that loads the plugin through its
``pytest11`` entry point, exactly as a user's pytest would; their targets are
``panio-sim`` boards (a real PTY console behind a Shelly-protocol plug).
"""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import BIN
from simbench import sim_bench

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
# the worked example of docs/pytest-plugin.md, run as written
DOC_EXAMPLE = re.search(r"`test_boot.py`:\n\n```python\n(.*?)```", (ROOT / "docs" / "pytest-plugin.md").read_text(),
                        re.S).group(1)

MORE_TESTS = '''
import re

import pytest
from bench_agent.errors import Busy, Timeout


def test_a_transacts_reply_is_consumed_so_a_later_wait_times_out(panio_target):
    panio_target.serial.transact("uname -a", until="root@sim:~# ", timeout_ms=10000)
    with pytest.raises(Timeout):  # the transact's reply, prompt included, was consumed
        panio_target.serial.wait("root@sim:~# ", timeout_ms=300)


def test_the_lease_is_held_for_the_session(panio_target):
    from controller import dispatch
    from controller.backends import lease_store
    from controller.plugin import adapter

    held = lease_store().current(panio_target.name)
    assert held["token"] == panio_target.lease_token
    assert re.match(r"pytest(-gw\\d+)?@", held["holder"])  # pytest-gw0@ under xdist
    with adapter.presenting(None), pytest.raises(Busy):  # anyone without the session's token is refused
        dispatch.call(panio_target.lab, panio_target.name, "power.off",
                      {"target": panio_target.name, "power": panio_target.lab.channel(panio_target.name, "power")})


def test_a_channel_the_lab_does_not_give_fails_naming_the_fix(panio_target):
    from bench_agent.errors import NotConfigured
    from controller.plugin.handles import ChannelHandle

    assert panio_target.has("serial") and panio_target.has("power") and not panio_target.has("netboot")
    with pytest.raises(NotConfigured, match="has no netboot channel"):
        ChannelHandle(panio_target, "netboot").status()
    power = panio_target.lab.channel(panio_target.name, "power")
    assert panio_target.call("power.state", power=power, level=None)["state"] == "on"


def test_video_and_hid_handles(panio_target):
    from bench_agent.errors import NotConfigured

    if not panio_target.has("hid"):  # a simulated bench without its screen and HID rig
        with pytest.raises(NotConfigured, match="has no hid channel"):
            panio_target.hid.key("ENTER")
        with pytest.raises(NotConfigured, match="has no video channel"):
            panio_target.video.shot()
        return
    panio_target.video.watch()
    try:
        panio_target.hid.type("echo typed by hid")
        panio_target.hid.key("ENTER")
        panio_target.serial.wait(r"\\ntyped by hid", timeout_ms=15000)  # the echo's output, not the command line
        assert panio_target.video.shot(timeout_ms=5000)["hash"]
    finally:
        panio_target.video.stop()


def test_without_the_fixture_nothing_is_leased():
    assert True
'''


# under xdist: every test case records the worker that ran it (a JUnit property)
WORKER_CONFTEST = '''
import os

import pytest


@pytest.fixture(autouse=True)
def _which_worker(record_property):
    record_property("worker", os.environ.get("PYTEST_XDIST_WORKER", "none"))
'''

# the first test of each target (test_0_...) waits for the other target to be leased by the other worker
XDIST_TESTS = '''
import os
import time

from bench_agent.leases.base import holder_name
from controller.backends import lease_store


def test_the_other_target_is_leased_meanwhile_by_another_worker(panio_target, record_property):
    """Fails unless the two targets run at the same time: each waits until the other is leased, by someone else."""
    store, other = lease_store(), {"board0": "board1", "board1": "board0"}[panio_target.name]
    mine = store.current(panio_target.name)["holder"]
    assert mine == holder_name("pytest-" + os.environ["PYTEST_XDIST_WORKER"])
    deadline = time.monotonic() + 60
    while not (held := store.current(other)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert held, f"{other} was never leased while this worker held {panio_target.name}"
    assert held["holder"] != mine
    record_property("lease_holder", mine)
'''


@pytest.fixture
def bench(panio, tmp_path, monkeypatch):
    """Two simulated boards (tag sim) and an environment that points the inner pytest at them."""
    with sim_bench(panio, tmp_path / "sim", boards=2) as bench:
        for key in ("PANIO_STATE_DIR", "HOME"):
            monkeypatch.setenv(key, panio.env[key])
        for key in ("PANIO_LAB", "PANIO_BROKER", "PANIO_REDIS_URL", "PANIO_RESULTS_URL", "PANIO_LEASE_TOKEN"):
            monkeypatch.delenv(key, raising=False)
        yield bench


def _cases(junit) -> dict[str, dict[str, str]]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        out[case.get("name")] = {**props, "failed": case.find("failure") is not None or case.find("error") is not None}
    return out


def test_each_test_runs_once_per_matching_target_with_junit_properties(pytester, bench, panio):
    pytester.makepyfile(test_boot=DOC_EXAMPLE, test_more=MORE_TESTS)
    junit = pytester.path / "junit.xml"
    r = pytester.runpytest_subprocess("--panio-lab", str(bench.lab), "--panio-targets", "tag:sim",
                                      f"--junitxml={junit}", "-p", "no:cacheprovider", timeout=240)
    r.assert_outcomes(passed=13)
    r.stdout.fnmatch_lines(["panio *: lab */lab.toml, targets board0, board1"])
    cases = _cases(junit)
    assert set(cases) == {f"{t}[{b}]" for b in ("board0", "board1") for t in (
        "test_power_cycle_boots_to_a_shell", "test_console_answers", "test_a_transacts_reply_is_consumed_so_a_later_wait_times_out",
        "test_the_lease_is_held_for_the_session", "test_a_channel_the_lab_does_not_give_fails_naming_the_fix",
        "test_video_and_hid_handles")} | {
        "test_without_the_fixture_nothing_is_leased"}
    version = subprocess.run([str(BIN / "panio"), "--version"], capture_output=True, text=True).stdout.split()[1]
    for board in ("board0", "board1"):
        case = cases[f"test_console_answers[{board}]"]
        assert (case["panio_target"], case["panio_host"], case["panio_version"]) == (board, "local", version)
    assert "panio_target" not in cases["test_without_the_fixture_nothing_is_leased"]
    # the session gave its leases back and stopped the captures it started
    assert panio("lease", "list", "--json").json() == []
    assert panio("serial", "status", "board0", check=False).json()["process"]["state"] == "not_running"


def test_under_xdist_each_target_runs_on_one_worker_in_parallel(pytester, bench, panio):
    pytester.makeconftest(WORKER_CONFTEST)
    pytester.makepyfile(test_boot=DOC_EXAMPLE, test_more=MORE_TESTS, test_0_parallel=XDIST_TESTS)
    junit = pytester.path / "junit.xml"
    r = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "--panio-lab", str(bench.lab),
                                      "--panio-targets", "tag:sim", "--panio-lease-wait", "5", f"--junitxml={junit}",
                                      "-p", "no:cacheprovider", timeout=240)
    r.assert_outcomes(passed=15)
    cases = _cases(junit)
    assert not [name for name, case in cases.items() if case["failed"]]
    version = subprocess.run([str(BIN / "panio"), "--version"], capture_output=True, text=True).stdout.split()[1]
    workers = {}
    for board in ("board0", "board1"):
        mine = {name: case for name, case in cases.items() if case.get("panio_target") == board}
        assert len(mine) == 7  # six tests of test_boot and test_more, and the parallel one
        assert {(c["panio_host"], c["panio_version"]) for c in mine.values()} == {("local", version)}
        (workers[board],) = {case["worker"] for case in mine.values()}  # all of a target's tests on one worker
        (holder,) = [c["lease_holder"] for c in mine.values() if "lease_holder" in c]
        assert holder.startswith(f"pytest-{workers[board]}@")
    assert sorted(workers.values()) == ["gw0", "gw1"]
    assert "panio_target" not in cases["test_without_the_fixture_nothing_is_leased"]
    # each worker gave its lease back and stopped the capture it started
    assert panio("lease", "list", "--json").json() == []
    for board in ("board0", "board1"):
        assert panio("serial", "status", board, check=False).json()["process"]["state"] == "not_running"


def test_one_target_under_xdist_runs_its_tests_on_one_worker(pytester, bench, panio):
    pytester.makeconftest(WORKER_CONFTEST)
    pytester.makepyfile(test_one='''
import pytest


@pytest.mark.parametrize("n", range(4))
def test_uname(panio_target, n):
    assert "Linux sim" in panio_target.serial.transact("uname -a", until="root@sim:~# ", timeout_ms=10000)


@pytest.mark.parametrize("n", range(4))
def test_plain(n):
    pass


@pytest.mark.xdist_group("slow")
def test_in_a_group_of_its_own(panio_target):
    pass
''')
    junit = pytester.path / "junit.xml"
    # no --dist: under -n the plugin makes loadgroup the default (xdist's "load" would split board1's tests)
    r = pytester.runpytest_subprocess("-n", "2", "--panio-lab", str(bench.lab), "--panio-target", "board1",
                                      "--panio-lease-wait", "5", f"--junitxml={junit}", "-p", "no:cacheprovider",
                                      timeout=120)
    r.assert_outcomes(passed=9)
    cases = _cases(junit)
    targets = [case for case in cases.values() if case.get("panio_target") == "board1"]
    # its own xdist_group does not take a test away from its target's worker
    assert len(targets) == 5 and len({case["worker"] for case in targets}) == 1
    assert "test_in_a_group_of_its_own[board1]" in cases  # the parameter id names the target under xdist
    assert panio("lease", "list", "--json").json() == []


def test_one_target_is_not_parametrized_and_waits_for_a_busy_lease(pytester, bench, panio):
    pytester.makepyfile(test_one='''
def test_uname(panio_target):
    assert panio_target.name == "board1"
    assert "Linux sim" in panio_target.serial.transact("uname -a", until="root@sim:~# ", timeout_ms=10000)
''')
    # another holder has board1: the session waits --panio-lease-wait, then the test errors naming the holder
    holder = subprocess.Popen([str(BIN / "python"), "-c", (
        "import sys, time\n"
        "from bench_agent.leases.file_store import FileLeaseStore\n"
        "from bench_agent.paths import lab_key_of, lab_state_dir\n"
        f"leases = FileLeaseStore(lab_state_dir(lab_key_of({str(bench.lab)!r})) / 'leases')\n"  # the lab's
        "lease = leases.try_acquire('board1', {'holder': 'nightly job'}, 30)\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=panio.env)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = pytester.runpytest_subprocess("--panio-lab", str(bench.lab), "--panio-target", "board1",
                                          "--panio-lease-wait", "0.5", timeout=120)
        r.assert_outcomes(errors=1)
        r.stdout.fnmatch_lines(["*panio: target 'board1' is leased by nightly job*"])
        r.stdout.no_fnmatch_line("*During handling of the above exception*")  # one line, no chained noise
    finally:
        holder.stdin.close()
        holder.wait(10)
    r = pytester.runpytest_subprocess("--panio-lab", str(bench.lab), "--panio-target", "board1", timeout=120)
    r.assert_outcomes(passed=1)
    r.stdout.no_fnmatch_line("*test_uname[[]board1]*")


@pytest.mark.parametrize("argv, message", [
    (["--panio-targets", "tag:nosuch"], "ERROR: panio: no target in */lab.toml matches 'tag:nosuch'*"),
    (["--panio-target", "board9"], "ERROR: panio: no target 'board9' in */lab.toml*"),
    (["--panio-target", "board0", "--panio-targets", "*"], "ERROR: panio: give --panio-target or --panio-targets*"),
    (["--panio-target", "board0", "--panio-lease-wait", "-5"],
     "*argument --panio-lease-wait: seconds (0 or more), not '-5'"),
    (["--panio-target", "board0", "--panio-lease-wait", "nan"], "*argument --panio-lease-wait: seconds*'nan'"),
    (["--panio-targets", "tag:sim,board0"], "ERROR: panio: --panio-targets 'tag:sim,board0' mixes tags and names*"),
    (["--panio-targets", "tag:sim", "-n", "2", "--dist", "load"],
     "ERROR: panio: --dist load would split a target's tests over workers that each wait for its lease; "
     "use --dist loadgroup (the default with -n) or leave --dist out"),
])
def test_bad_options_are_one_panio_line(pytester, bench, argv, message):
    pytester.makepyfile(test_x="def test_x(panio_target):\n    pass\n")
    r = pytester.runpytest_subprocess("--panio-lab", str(bench.lab), *argv, timeout=60)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([message])
    assert "Traceback" not in r.stderr.str()


def test_without_options_the_plugin_stays_out_of_the_way(pytester):
    pytester.makepyfile(test_x="def test_plain():\n    pass\n\ndef test_needs_target(panio_target):\n    pass\n")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)
    r.assert_outcomes(passed=1, failed=0, errors=1)
    r.stdout.fnmatch_lines(["*panio: no target for this test: run pytest with --panio-target NAME*"])
    r = pytester.runpytest_subprocess("--help", timeout=60)
    r.stdout.fnmatch_lines(["*--panio-targets=SELECTOR*"])


@pytest.mark.parametrize("nodeid, target", [
    ("t.py::test_x[board0]", "board0"),
    ("t.py::test_x[board0-3]", "board0"),
    ("t.py::TestA::test_x[3-pi5-a]", "pi5-a"),  # the longer name that fits, not pi5
    ("t.py::test_x[1-pi5-2]", "pi5"),
    ("t.py::test_x[board0]@board0_slow", "board0"),  # xdist's group suffix on pytest before 9.2
    ("t.py::test_x[board00]", None),
    ("t.py::test_x", None),
])
def test_the_xdist_scheduler_reads_the_target_from_the_parameter_id(nodeid, target):
    from controller.plugin.xdist_scheduling import target_of

    assert target_of(nodeid, ["board0", "pi5", "pi5-a"]) == target


def test_a_target_in_maintenance_has_its_tests_skipped_unless_health_is_ignored(pytester, bench, panio):
    """As jobs do (LAVA's lesson): no test drives a board an operator took out of rotation."""
    panio("target", "health", "board1", "--set", "maintenance", "--reason", "cable swap")
    pytester.makepyfile(test_boot=DOC_EXAMPLE)
    args = ["--panio-lab", str(bench.lab), "--panio-targets", "tag:sim", "-p", "no:cacheprovider", "-rs"]
    r = pytester.runpytest_subprocess(*args, timeout=240)
    r.assert_outcomes(passed=2, skipped=2)
    r.stdout.fnmatch_lines(["*panio: target board1 is maintenance (cable swap, set by *): its tests are skipped*"])
    assert panio("lease", "list", "--json").json() == []  # board1 was never leased
    r = pytester.runpytest_subprocess(*args, "--panio-ignore-health", timeout=240)
    r.assert_outcomes(passed=4)


# docs/pytest-plugin.md's screen example, run as written: it failed with "NotRunning: no video daemon"
SCREEN_EXAMPLE = re.search(r"```python\n(import pytest\n\ndef test_screen.*?)```",
                           (ROOT / "docs" / "pytest-plugin.md").read_text(), re.S).group(1)


def test_the_docs_screen_example_passes_and_the_video_capture_it_needed_is_stopped(pytester, panio, tmp_path,
                                                                                   monkeypatch):
    with sim_bench(panio, tmp_path / "sim", boards=1, booted=True) as bench:
        for key in ("PANIO_STATE_DIR", "HOME"):
            monkeypatch.setenv(key, panio.env[key])
        for key in ("PANIO_LAB", "PANIO_BROKER", "PANIO_REDIS_URL", "PANIO_RESULTS_URL", "PANIO_LEASE_TOKEN"):
            monkeypatch.delenv(key, raising=False)
        pytester.makepyfile(test_screen=SCREEN_EXAMPLE)
        r = pytester.runpytest_subprocess("--panio-lab", str(bench.lab), "--panio-target", "board0",
                                          "-p", "no:cacheprovider", timeout=180)
        r.assert_outcomes(passed=1)
        running = [d["name"] for d in panio("daemons", "--json").json() if d["state"] == "running"]
        assert running == [], "the session stops the captures it started"
