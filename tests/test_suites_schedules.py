"""Suites over a matrix of targets and schedules with exactly one scheduler (embedded default)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from conftest import PANIO
from jobhelp import fixture_lab, job_file, stop, wait_for

SLOW = "name = 'slow'\n[[steps]]\nrun = 'ping ${target} --count 8 --interval 0.1'\n"
QUICK = "name = 'quick'\n[[steps]]\nrun = 'ping ${target}'\nexpect_output = '${target} \\(local\\)'\n"
BOARD_FAIL = "name = 'banner'\n[[steps]]\nrun = 'target show ${target}'\nexpect_output = 'Linux version'\n"


def suite_file(tmp_path, jobs: dict[str, str], header: str, name: str = "suite.toml") -> str:
    for fname, body in jobs.items():
        job_file(tmp_path, body, fname)
    listed = ", ".join(f"'{f}'" for f in jobs)
    return job_file(tmp_path, f"{header}\njobs = [{listed}]\n", name)


def test_suite_runs_parallel_across_targets_and_serial_per_target(panio, tmp_path):
    fixture_lab(panio)
    path = suite_file(tmp_path, {"slow.toml": SLOW, "quick.toml": QUICK}, "name = 'nightly'\ntargets = ['pico', 'qemu']")
    assert len(panio("suite", "check", path, "--json").json()["matrix"]) == 4
    junit = tmp_path / "out" / "nightly.xml"
    report = tmp_path / "out" / "nightly.md"
    r = panio("suite", "run", path, "--junit", str(junit), "--report", str(report))
    assert "[pico] job" in r.out and "[qemu] job" in r.out
    text = report.read_text()
    assert text.startswith("# suite nightly") and text.count("| complete | passed |") == 4
    assert "`panio ping qemu --count 8 --interval 0.1`" in text and "qemu (local): seq=8" in text
    jobs = {(j["name"], j["target"]): panio("job", "status", str(j["id"]), "--json").json()
            for j in panio("job", "list", "--json").json()}
    assert all(j["result"] == "passed" for j in jobs.values()) and len(jobs) == 4
    for target in ("pico", "qemu"):  # one at a time per target, in file order
        assert jobs[("quick", target)]["leased_at"] >= jobs[("slow", target)]["finished_at"] - 0.05
    slow_p, slow_q = jobs[("slow", "pico")], jobs[("slow", "qemu")]
    assert slow_p["leased_at"] < slow_q["finished_at"] and slow_q["leased_at"] < slow_p["finished_at"], \
        "targets did not run in parallel"
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert sorted(s.get("name") for s in suites) == ["quick@pico", "quick@qemu", "slow@pico", "slow@qemu"]


def test_suite_exit_status_board_failure_then_lab_failure_wins(panio, tmp_path):
    fixture_lab(panio)
    path = suite_file(tmp_path, {"quick.toml": QUICK, "banner.toml": BOARD_FAIL}, "tags = ['pi5']")
    r = panio.fails("suite", "run", path, code=14)
    assert "the board failed 1 of 2 jobs: banner@pico" in r.err
    path = suite_file(tmp_path, {"quick.toml": QUICK, "banner.toml": BOARD_FAIL}, "targets = ['pico', 'far']",
                      "mixed.toml")
    r = panio.fails("suite", "run", path, code=4)  # far's host is unreachable: the lab failed
    assert "could not finish (the lab failed)" in r.err


def test_a_bad_suite_runs_nothing(panio, tmp_path):
    fixture_lab(panio)
    bad = "[[steps]]\nrun = 'panio flash ${target}'\n"
    path = suite_file(tmp_path, {"quick.toml": QUICK, "bad.toml": bad}, "targets = ['pico']")
    r = panio.fails("suite", "run", path, code=5)
    assert "bad.toml" in r.err and "unknown panio command 'flash'" in r.err
    panio.fails("suite", "run", job_file(tmp_path, "jobs = ['quick.toml']\ntargets = ['ghost']\n", "g.toml"), code=3)
    panio.fails("suite", "run", job_file(tmp_path, "jobs = 'quick.toml'\n", "h.toml"), code=5)
    assert panio("job", "list", "--json").json() == []


def test_schedules_fire_from_exactly_one_scheduler(panio, tmp_path):
    fixture_lab(panio)
    path = suite_file(tmp_path, {"quick.toml": QUICK}, "targets = ['pico']")
    panio.fails("schedule", "add", "often", "--suite", path, "--every", "soon", code=2)
    bad = suite_file(tmp_path, {"x.toml": "[[steps]]\nrun = 'nope'\n"}, "targets = ['pico']", "bad.toml")
    panio.fails("schedule", "add", "broken", "--suite", bad, "--every", "1s", code=5)
    panio("schedule", "add", "often", "--suite", path, "--every", "1s")
    panio("schedule", "add", "nightly", "--suite", path, "--at", "02:00")
    panio.fails("schedule", "add", "often", "--suite", path, "--every", "1s", code=6)
    listed = {s["name"]: s for s in panio("schedule", "list", "--json").json()}
    assert listed["often"]["every_s"] == 1 and listed["nightly"]["at"] == "02:00"
    first = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: [le for le in panio("lease", "list", "--json").json() if le["target"] == "_scheduler"])
        r = panio.fails("schedule", "serve", code=8)
        assert "schedule serve@" in r.err
        wait_for(lambda: len(panio("job", "list", "--json").json()) >= 2, timeout_s=20)
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=20)
        assert first.returncode == 0, err
    finally:
        stop(first)
    assert "schedule often: jobs" in out
    jobs = panio("job", "list", "--json").json()
    assert all(j["result"] == "passed" for j in jobs)
    fired = panio("schedule", "list", "--json").json()
    often = next(s for s in fired if s["name"] == "often")
    assert often["last_jobs"] and next(s for s in fired if s["name"] == "nightly")["last_fired"] is None
    panio("schedule", "rm", "often")
    panio.fails("schedule", "rm", "often", code=3)


BOOTED = "name = 'answers'\n[[steps]]\nrun = \"serial transact ${target} 'echo alive' --until 'alive\\r?\\n.*# $' --timeout-ms 10000\"\n"


def test_one_bad_board_never_holds_the_suite_or_the_schedule_back(bench, panio, tmp_path):
    """Issue 27: two simulated boards, one bad: the suite ends within a minute, the healthy board's job
    passed and the bad one's skipped as the lab's; a schedule of it keeps firing for the healthy board."""
    from bench_agent.sim.console import PROMPT

    for name in ("b1", "b2"):
        sim = bench.board(name)["console"]
        panio("serial", "watch", name)
        sim.power_on()
        assert bench.wait_for(name, PROMPT, timeout_ms=30000)["status"] == "matched"
    panio("target", "health", "b2", "--set", "bad", "--reason", "the SD card is loose")
    path = suite_file(tmp_path, {"answers.toml": BOOTED}, "name = 'night'\ntargets = ['b1', 'b2']")
    started = time.monotonic()
    r = panio.fails("suite", "run", path, code=8)  # the lab held one job back: busy
    assert time.monotonic() - started < 60
    assert "could not finish (the lab failed)" in r.err
    jobs = {j["target"]: panio("job", "status", str(j["id"]), "--json").json()
            for j in panio("job", "list", "--json").json()}
    assert (jobs["b1"]["health"], jobs["b1"]["result"]) == ("complete", "passed"), jobs["b1"]["reason"]
    held = jobs["b2"]
    assert (held["health"], held["result"]) == ("incomplete", "skipped") and held["error"]["error"] == "busy"
    assert "b2 is bad (the SD card is loose" in held["reason"] and 'skipped (on_unhealthy = "skip")' in held["reason"]
    assert [s["status"] for s in held["steps"]] == ["skipped"]
    assert panio("target", "health", "b2", "--json").json()["health"] == "bad"  # a skip changes nothing

    panio("schedule", "add", "often", "--suite", path, "--every", "1s")
    serve = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        def passed_on_b1():
            return [j for j in panio("job", "list", "--json").json()
                    if j["target"] == "b1" and j["result"] == "passed"]
        wait_for(lambda: len(passed_on_b1()) >= 3, timeout_s=60)  # the suite's run plus two scheduled ones
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=30)
    finally:
        stop(serve)


# Redis loses everything and the rival takes the lease first. The serving scheduler's keeper retakes a lease
# Redis lost (on its next renewal): should it do so between the flush and the rival's try (a loaded machine),
# Redis loses it again, until the rival is first.
RIVAL = """import redis
from controller import backends
store = backends.lease_store()
for _ in range(50):
    redis.Redis.from_url(backends.redis_url()).flushall()
    if store.try_acquire("_scheduler", {"holder": "the other scheduler"}, 60):
        print("taken")
        break
else:
    print("refused")
"""


def test_the_scheduler_carries_on_when_redis_loses_its_lease(panio, tmp_path):
    """Issue 27's compressed night: Redis restarted without persistence took the scheduler lease with it and
    `panio schedule serve` stopped (exit 0, so systemd's Restart=on-failure left it down) for the rest of the
    night. It takes the lease again and keeps firing; if another scheduler took it meanwhile, it exits 8."""
    from peerhelp import PrivateRedis

    redis_server = PrivateRedis(tmp_path)
    redis_server.start()
    fixture_lab(panio)
    panio.env.update(PANIO_REDIS_URL=redis_server.url, PANIO_REDIS_PREFIX="night:")
    panio("schedule", "add", "often", "--suite", suite_file(tmp_path, {"quick.toml": QUICK}, "targets = ['pico']"),
          "--every", "1s")
    log = tmp_path / "serve.log"
    serve = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=open(log, "w"),
                             stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: "schedule often: jobs" in log.read_text(), timeout_s=60)
        redis_server.restart(down_s=1.0)  # every key gone, the scheduler lease with them
        wait_for(lambda: "taken again" in log.read_text() or serve.poll() is not None, timeout_s=60)
        assert serve.poll() is None, log.read_text()
        fired = len(panio("job", "list", "--json", "--limit", "1000").json())
        wait_for(lambda: len(panio("job", "list", "--json", "--limit", "1000").json()) > fired + 1, timeout_s=60)
        holders = [le for le in panio("lease", "list", "--json").json() if le["target"] == "_scheduler"]
        assert len(holders) == 1 and "schedule serve@" in holders[0]["holder"], holders

        # Redis loses it again and another scheduler is first to take it: this one must stop, not fight
        rival = subprocess.run([sys.executable, "-c", RIVAL], env=panio.env, capture_output=True, text=True,
                               timeout=60)
        assert rival.stdout.strip() == "taken", rival.stderr
        assert serve.wait(timeout=60) == 8, log.read_text()
        assert "taken by the other scheduler: stopping" in log.read_text()
        assert "Traceback" not in log.read_text()
    finally:
        stop(serve)
        redis_server.stop()
