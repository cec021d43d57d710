"""Triage (issue 28): a failed job against its last pass on a simulated board with an injected fault; the
normalisation and alignment of two runs' logs; `job history`'s flaky label; `panio-sim inject`."""

from __future__ import annotations

import json
import time

import pytest

from jobhelp import job_file, wait_for
from simbench import sim

from bench_agent.triage import flaky
from bench_agent.triage.logalign import Rules, align
from bench_agent.triage.compare import compare, output_lines

PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs"


def test_triage_names_the_injected_panic_line_and_the_last_pass(panio, sim_bench, receiver, tmp_path):
    with sim_bench.lab.open("a") as f:
        f.write(f'\n[[notify]]\nwebhook = "{receiver.url}/hook"\non = ["job_failed"]\n')
    boot = str(sim_bench.dir / "boot.toml")
    first = panio("job", "run", boot, "--target", "board0", "--json", timeout=120).json()["id"]
    second = panio("job", "run", boot, "--target", "board0", "--json", timeout=120).json()["id"]

    calm = panio("job", "triage", str(second), "--json").json()  # two passing runs: nothing diverges
    assert calm["baseline"]["id"] == first and calm["match"] == "same job file, same target"
    assert calm["step"] is None and calm["first_divergence"] is None and calm["inputs"] == {}
    assert [d["source"] for d in calm["logs"]] == ["serial-console.log"]
    assert all(d["first"] is None and not d["never_reached"] for d in calm["logs"])

    for bad in (["--clear", "--no-prompt"], ["--boot-line", "two\nlines"], ["--boot-delay-s", "-1"]):
        r = sim("inject", "board0", "--dir", str(sim_bench.dir), *bad, env=panio.env, check=False)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 2 and "Traceback" not in r.stderr, bad
    assert json.loads(sim("inject", "board0", "--dir", str(sim_bench.dir), "--json", env=panio.env).stdout) == {
        "board": "board0", "faults": {}}
    said = sim("inject", "board0", "--dir", str(sim_bench.dir), "--boot-line", PANIC, env=panio.env).stdout
    assert PANIC in said and "--clear" in said
    failed = panio.fails("job", "run", boot, "--target", "board0", code=14).error["job"]

    t = panio("job", "triage", str(failed), "--json").json()
    assert t["baseline"]["id"] == second
    assert t["step"]["name"] == "boots to a shell" and t["step"]["passing_status"] == "pass"
    assert t["step"]["status"] == "fail" and any("Kernel panic" in h for h in t["step"]["how"])
    first = t["first_divergence"]  # the headline: the board's own words, its serial log, first
    assert first["kind"] == "extra" and first["text"].strip() == PANIC and first["source"] == "serial-console.log"
    step_output = next(d for d in t["logs"] if d["source"] == "step 3 output")
    assert step_output["first"]["line"].strip() == PANIC  # and in that step's output
    serial = next(d for d in t["logs"] if d["source"] == "serial-console.log")
    assert serial["first"]["line"].endswith(PANIC) and serial["first"]["kind"] == "extra"
    marked = [w["text"] for w in serial["first"]["failing"] if w["mark"]]
    assert len(marked) == 1 and marked[0].endswith(PANIC)
    assert any("eth0: Link is Up" in w["text"] for w in serial["first"]["passing"])  # context from the pass
    # the step's own lines (by their receive time: a window's edge may hold a line more in one run than the other)
    window = next(d for d in t["logs"] if d["source"] == "step 3 serial-console.log")
    assert 0 < window["lines"][1] < serial["lines"][1] and window["first"] is not None
    assert t["inputs"] == {} and PANIC in t["summary"] and f"vs last pass {second}" in t["summary"]

    human = panio("job", "triage", str(failed)).out
    assert f"last pass: job {second} on board0" in human and "first divergent line" in human and PANIC in human

    hook = wait_for(lambda: receiver.bodies("/hook"), timeout_s=30)
    assert hook[0]["job_id"] == failed and hook[0]["last_pass"] == second
    assert hook[0]["first_divergent_line"].strip() == PANIC and hook[0]["flaky"] is False
    assert PANIC in hook[0]["text"] and "triage:" in hook[0]["text"]

    history = panio("job", "history", "boot", "--json").json()["targets"]["board0"]
    assert history["sequence"] == "PPF" and history["regression_since"] == failed and not history["flaky"]
    assert "regression" in panio("job", "history", "boot", "--target", "board0").out

    report = tmp_path / "suite.md"  # the suite report carries the triage of each failed job
    panio.fails("suite", "run", str(sim_bench.dir / "suite.toml"), "--report", str(report), code=14)
    text = report.read_text()
    assert "**Triage** (not flaky; `panio job triage" in text and PANIC in text and f"vs last pass {second}" in text

    sim("inject", "board0", "--dir", str(sim_bench.dir), "--clear", env=panio.env)
    again = panio("job", "run", boot, "--target", "board0", "--json", timeout=120).json()
    assert again["result"] == "passed"


def test_two_runs_with_everything_that_always_changes_changed_do_not_diverge():
    a = ["[10:00:01.100] #17 [    0.000000] Booting Linux on physical CPU 0x0",
         "[10:00:01.120] #18 eth0: registered at 0xfe300000 by modprobe[412] (pid 412)",
         "[10:00:01.130] #19 job 12 started 2026-01-01T10:00:01Z, took 12.5 ms",
         "[10:00:01.140] #20 mmc0: new high speed SDHC card at address aaaa", "done at 1796150054.21"]
    b = ["[23:59:59.990] #4711 [   12.345678] Booting Linux on physical CPU 0x0",
         "[00:00:00.010] #4712 eth0: registered at 0xfe3a0000 by modprobe[9] (pid 9)",
         "[00:00:00.030] #4713 job 4711 started 2026-12-01T18:00:01+01:00, took 3 ms",
         "[00:00:00.040] #4714 mmc0: new high speed SDHC card at address aaaa", "done at 1796150999.9"]
    d = compare(a, b, timed=True)
    assert d["first"] is None and d["never_reached"] == [] and d["extra"] == d["missing"] == 0
    assert d["late"] is None  # 23:59:59 -> 00:00:00 is 20 ms, not a day


def test_what_does_change_is_named_changed_extra_or_missing():
    base = [f"[    0.{i:06d}] driver {i} probed" for i in range(50)]
    version = base[:20] + ["Linux version 6.2.0-rc1"] + base[21:]
    d = compare(base, version)
    assert d["first"]["kind"] == "changed" and d["first"]["line"] == "Linux version 6.2.0-rc1"
    assert d["first"]["instead_of"] == base[20] and d["first"]["failing_line_no"] == 21
    missing = base[:30] + base[31:]
    d = compare(base, missing)
    assert d["first"]["kind"] == "missing" and d["first"]["line"] == base[30]
    hung = base[:40]
    d = compare(base, hung)
    assert d["first"] is None and d["never_reached"][0] == base[40] and d["never_reached_count"] == 10


def test_a_jobs_ignore_patterns_hide_what_it_says_always_changes():
    a, b = ["ping: rtt=0.31 ms seq=1", "ok"], ["ping: rtt=7.90ms seq=1", "ok"]
    assert compare(["rtt=0.31"], ["rtt=7.90"])["first"]["kind"] == "changed"
    assert compare(a, b, Rules([r"rtt=\S+"]))["first"] is None


def test_a_late_line_is_named_with_its_wait():
    a = ["[10:00:00.000] #1 Starting kernel ...", "[10:00:00.020] #2 [    0.000000] Booting Linux",
         "[10:00:00.040] #3 root@sim:~# "]
    b = ["[11:00:00.000] #9 Starting kernel ...", "[11:00:06.020] #10 [    0.000000] Booting Linux",
         "[11:00:06.040] #11 root@sim:~# "]
    late = compare(a, b, timed=True)["late"]
    assert late["line"].endswith("Booting Linux") and late["after"].endswith("Starting kernel ...")
    assert late["wait_s"] == 6.02 and late["passing_wait_s"] == 0.02


def test_a_json_step_output_is_compared_line_by_line_without_its_counters():
    one = json.dumps({"status": "matched", "cursor": 725, "elapsed_ms": 572.8, "data_b64": "QUJD",
                      "text": "U-Boot\r\nStarting kernel ...\r\nroot@sim:~# "})
    two = json.dumps({"status": "matched", "cursor": 9999, "elapsed_ms": 12.0, "data_b64": "WFla",
                      "text": f"U-Boot\r\nStarting kernel ...\r\n{PANIC}\r\nroot@sim:~# "})
    assert output_lines(one) == ["status: matched", "cursor: <n>", "elapsed_ms: <n>", "U-Boot", "Starting kernel ...",
                                 "root@sim:~# "]
    assert compare(output_lines(one), output_lines(two))["first"]["line"] == PANIC


def night_logs(n: int) -> tuple[list[str], list[str]]:
    """Two nights' logs of ``n`` lines (benchmarks/triage_align.py's shape): every time stamp differs, the
    failing one has a panic inserted at 70 %, a line changed at 90 % and ten lines missing at 95 %."""
    import random

    rnd = random.Random(28)
    words = ["eth0", "mmc0", "usb", "irq", "dma", "cpu", "thermal", "i2c", "spi", "gpio"]
    passing = [f"[10:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 100:03d}] #{i} [{i / 1000:12.6f}] "
               f"{rnd.choice(words)}: event {rnd.randrange(5000)} state {rnd.choice(['ok', 'busy', 'idle'])}"
               for i in range(n)]
    failing = [line.replace("[10:", "[11:") for line in passing]  # another night: every time stamp differs
    failing.insert(n * 7 // 10, f"[11:00:00.000] #{n * 7 // 10} {PANIC}")
    failing[n * 9 // 10] = f"[11:00:00.000] #{n * 9 // 10} thermal: event 1 state CRITICAL"
    del failing[n * 95 // 100:n * 95 // 100 + 10]
    return passing, failing


def cpu_seconds(fn, repeat: int) -> float:
    """The least CPU time of ``repeat`` calls: CPU time, not wall, so neighbours on the machine count less."""
    best = None
    for _ in range(repeat):
        start = time.process_time()
        fn()
        took = time.process_time() - start
        best = took if best is None else min(best, took)
    return best


# The 1 s goal for 100,000 lines is measured by benchmarks/triage_align.py, not here: a test's time bound fails on a
# loaded machine. What a test can hold on any machine is the growth: ten times the lines, about ten times the CPU
# (a quadratic alignment would take a hundred times).
def test_100k_line_logs_are_compared_in_time_linear_in_their_length():
    small, large = night_logs(10_000), night_logs(100_000)
    d = compare(*large, timed=True)
    assert d["first"]["line"].endswith(PANIC) and d["first"]["failing_line_no"] == 70_001
    assert d["extra"] == 2 and d["missing"] == 11
    assert compare(*small, timed=True)["first"]["failing_line_no"] == 7_001
    ratio = cpu_seconds(lambda: compare(*large, timed=True), 2) / cpu_seconds(lambda: compare(*small, timed=True), 5)
    assert ratio < 30, f"10x the lines took {ratio:.0f}x the CPU time: not linear"


def test_a_log_of_one_repeated_line_is_not_quadratic():
    a = ["heartbeat"] * 50_000
    b = ["heartbeat"] * 25_000 + ["watchdog: BUG: soft lockup"] + ["heartbeat"] * 24_000
    blocks = align(a, b)
    assert blocks[0].tag == "equal" and blocks[0].a1 == 25_000
    assert compare(a, b)["first"]["line"] == "watchdog: BUG: soft lockup"
    a10 = ["heartbeat"] * 5_000  # a tenth of each, the same shape
    b10 = ["heartbeat"] * 2_500 + ["watchdog: BUG: soft lockup"] + ["heartbeat"] * 2_400
    ratio = cpu_seconds(lambda: align(a, b), 2) / cpu_seconds(lambda: align(a10, b10), 5)
    assert ratio < 30, f"10x the lines took {ratio:.0f}x the CPU time: quadratic"


def test_flaky_needs_identical_inputs_and_more_than_one_change():
    def run(i: int, result: str, sha: str = "x") -> dict:
        return {"id": i, "health": "complete", "result": result, "spec": {"inputs": {"job_sha256": sha}}}

    seq = [run(6, "failed"), run(5, "passed"), run(4, "failed"), run(3, "passed")]  # newest first
    v = flaky.verdicts(seq)
    assert v["flaky"] and v["sequence"] == "PFPF" and v["pass_rate"] == 0.5 and "changed 3 times" in v["why"]
    v = flaky.verdicts([run(6, "failed"), run(5, "failed"), run(4, "passed"), run(3, "passed")])
    assert not v["flaky"] and v["regression_since"] == 5
    v = flaky.verdicts([run(6, "failed"), run(5, "passed", "y"), run(4, "failed", "y"), run(3, "passed", "y")])
    assert not v["flaky"]  # the newest run's inputs differ from the others: no alternation with identical inputs
    lab = {"id": 7, "health": "incomplete", "result": None, "spec": {}}
    assert flaky.verdicts([lab] + seq)["lab_failed"] == 1


def test_triage_ignore_is_checked_like_the_rest_of_the_job_file(pico, tmp_path):
    ok = job_file(tmp_path, 'target = "pico"\n[triage]\nignore = ["rtt=\\\\S+"]\n[[steps]]\nrun = "panio ping pico"\n',
                  "ok.toml")
    pico("job", "check", ok, "--target", "pico")
    bad = job_file(tmp_path, 'target = "pico"\n[triage]\nignore = ["rtt=("]\n[[steps]]\nrun = "panio ping pico"\n',
                   "bad.toml")
    r = pico.fails("job", "check", bad, code=5)
    assert "bad.toml:3:" in r.err and "triage.ignore" in r.err and "regular expression" in r.err
    typo = job_file(tmp_path, 'target = "pico"\n[triage]\nignroe = []\n[[steps]]\nrun = "panio ping pico"\n',
                    "typo.toml")
    assert "did you mean 'ignore'" in pico.fails("job", "check", typo, code=5).err
    text = job_file(tmp_path, 'target = "pico"\n[triage]\nignore = "rtt"\n[[steps]]\nrun = "panio ping pico"\n',
                    "text.toml")
    assert "must be a list of regular expressions" in pico.fails("job", "check", text, code=5).err


def test_triage_of_a_job_that_does_not_exist_and_of_one_with_no_pass(panio, tmp_path):
    panio("init")
    r = panio.fails("job", "triage", "99", code=3)
    assert "no job 99" in r.err
    assert panio.fails("job", "history", "nope", "--runs", "0", code=2).error["error"] == "usage"
    assert "no finished runs of job 'nope'" in panio("job", "history", "nope").out


def test_inject_refuses_what_it_cannot_do(panio, tmp_path):
    r = sim("inject", "board0", "--dir", str(tmp_path / "none"), "--no-prompt", env=panio.env, check=False)
    assert r.returncode == 2 and "no simulated bench runs there" in r.stderr and "Traceback" not in r.stderr
    assert json.loads(r.stderr.strip().splitlines()[-1])["error"] == "usage"


def test_the_triage_names_one_seeded_cause_of_each_kind():
    """benchmarks/triage_causes.py with one case of each kind (the benchmark runs four: 20 in all)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "triage_causes.py"
    p = subprocess.run([sys.executable, str(script), "--per-cause", "1", "--json"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    missed = [c for c in report["cases"] if not c["named"]]
    assert report["total"] == 5 and not missed, missed


def _recorded(store, result: str, log: str, sha: str = "f1", target: str = "b0", tags=("sim",)) -> int:
    spec = {"steps": [], "inputs": {"job_sha256": sha, "job_file": f"# {sha}\n", "lab_sha256": "l1",
                                    "tags": list(tags), "panio": "1.0"}, "triage": {"ignore": ["rtt=\\S+"]}}
    job_id = store.create_job("boot", target, None, spec)
    store.record_steps(job_id, [(0, {"name": "boots", "command": "panio serial wait b0", "status":
                                     "pass" if result == "passed" else "fail", "exit_status": 0,
                                     "output": log, "captured": {"kver": log.split()[-1]}})])
    store.add_artifact(job_id, "serial-console.log", log)
    store.finish(job_id, "complete", result, "")
    return job_id


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_baseline_is_found_in_either_results_database(engine, tmp_path):
    from bench_agent.results.store import ResultStore
    from bench_agent.triage.compare import triage

    from jobhelp import drop_pg_schema, pg_schema

    url = f"sqlite:///{tmp_path / 'r.db'}" if engine == "sqlite" else pg_schema()
    try:
        store = ResultStore(url)
        other_file = _recorded(store, "passed", "[10:00:00.000] #1 rtt=1 Linux 6.1", sha="f0")
        elsewhere = _recorded(store, "passed", "[10:00:00.000] #1 rtt=1 Linux 6.1", target="b1")
        failed = _recorded(store, "failed", "[11:00:00.000] #9 rtt=2 Linux 6.2")
        t = triage(store, failed)  # never passed on b0 with this file: b1 has the same tags
        assert t["baseline"]["id"] == elsewhere and "same tags" in t["match"]
        assert t["first_divergence"]["text"] == "rtt=2 Linux 6.2" and t["first_divergence"]["kind"] == "changed"
        assert t["inputs"]["captured"] == {"kver": {"passing": "6.1", "failing": "6.2"}}
        here = _recorded(store, "passed", "[12:00:00.000] #3 rtt=5 Linux 6.1")
        again = _recorded(store, "failed", "[13:00:00.000] #4 rtt=6 Linux 6.1")
        t = triage(store, again)
        assert t["baseline"]["id"] == here and t["match"] == "same job file, same target"
        assert t["first_divergence"] is None  # rtt=... is the job's own [triage] ignore
        changed = _recorded(store, "failed", "[14:00:00.000] #4 rtt=6 Linux 6.1", sha="f9")
        t = triage(store, changed)  # no pass with this file anywhere: the same name on the same target
        assert t["baseline"]["id"] == here and "another job file" in t["match"]
        assert "+# f9" in t["inputs"]["job_file"] and other_file < here
    finally:
        if engine == "postgresql":
            drop_pg_schema(url)
