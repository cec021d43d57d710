"""panio bisect (issue 42): the first bad build of twenty found on a simulated board in at most ⌈log2 20⌉ probes,
still found when every board run flakes 1 in 3 for an unrelated reason (--repeat 3), and after the bisecting
process is killed -9 (resume from the results database); with --tag on three boards, probes side by side and a
board that goes bad replaced by another. A build is deployed by a lab action (its artifact names it) that makes
the board's next boots print a line (as `panio-sim inject` does): builds 13 and later print a BUG line the job
rejects."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys

import pytest

from conftest import PANIO
from jobhelp import drop_pg_schema, pg_schema, wait_for
from simbench import sim_bench

DEPLOY = """\
import json, os, subprocess, sys
from pathlib import Path
from bench_agent.sim import faults
directory, board, kind = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
if len(sys.argv) > 4 and not (directory / f"{board}.broke").exists():  # this board goes bad: its next job is held
    (directory / f"{board}.broke").write_text("")
    subprocess.run([sys.argv[4], "target", "health", board, "--set", "bad", "--reason", "its SD card died"],
                   check=True, capture_output=True)
lines = ["BUG: unable to handle page fault at 0000dead (regression)"] if kind.startswith("bad") else []
if kind.endswith("flaky"):  # every third deploy, whatever the build: a link that flaps, nothing to do with it
    count = directory / "deploys"
    n = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(n))
    if n % 3 == 0:
        lines.append("WARNING: eth0: link flapped during boot")
if kind.endswith("after-bad"):  # once: the first deploy of a good build right after a bad one's
    last, flaked = directory / "last-kind", directory / "flaked"
    if not kind.startswith("bad") and last.exists() and last.read_text() == "bad" and not flaked.exists():
        flaked.write_text("")
        lines.append("WARNING: eth0: link flapped during boot")
    last.write_text("bad" if kind.startswith("bad") else "good")
file = faults.path(directory, board)
faults.write(file, {"boot_lines": lines}) if lines else faults.clear(file)
"""

JOB = """\
name = "bisect-boot"
timeout_s = 60
[[steps]]
name = "deploy ${build}"
run = "panio action run ${target} ${build.flash}"
[[steps]]
name = "power-cycle"
run = "panio power-cycle ${target}"
[[steps]]
name = "boots clean"
run = "panio serial wait ${target} --since-step --pattern 'root@sim:~# ' --timeout-ms 20000"
timeout_s = 30
expect_output = '"status": "matched"'
reject_output = "BUG:|WARNING:"
"""

FIRST_BAD = 13


def _setup(bench, tmp_path, flaky: bool | str = False, boards: int = 1, breaks: str = "") -> tuple[str, str]:
    """The deploy actions of ``boards`` boards (``breaks``: the board whose first deploy sets its own health bad;
    ``flaky``: a flake every third deploy, or "after-bad": once, on the first good build after the bad one's runs),
    the builds list and the job file."""
    script = tmp_path / "deploy.py"
    script.write_text(DEPLOY)
    for kind in ("good", "bad"):
        mode = kind + ("-flaky" if flaky is True else f"-{flaky}" if flaky else "")
        for board in (f"board{n}" for n in range(boards)):
            bench("action", "add", f"flash-{kind}", "-t", board, "--command",
                  f"{sys.executable} {script} {bench.dir} {board} {mode}" + (f" {PANIO}" if board == breaks else ""))
    builds = tmp_path / "builds.txt"
    builds.write_text("# oldest first\n" + "".join(
        f"b{i:02d} flash=flash-{'bad' if i >= FIRST_BAD else 'good'} kernel=/srv/b{i:02d}/Image\n"
        for i in range(1, 21)))
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    return str(job), str(builds)


def _start(job: str, builds: str, *more: str) -> list[str]:
    return ["bisect", "start", job, "--target", "board0", "--good", "b01", "--bad", "b20", "--builds", builds, *more]


def test_twenty_builds_the_thirteenth_breaks_found_in_log2_probes(panio, sim_bench, tmp_path):
    job, builds = _setup(sim_bench, tmp_path)
    r = panio(*_start(job, builds), "--json", timeout=600).json()
    assert r["state"] == "done" and r["first_bad"] == f"b{FIRST_BAD}", r
    assert r["good"] == f"b{FIRST_BAD - 1:02d}"
    assert r["bisection_probes"] <= math.ceil(math.log2(20)), r["probes"]
    assert r["signature"]["step"] == "boots clean"
    assert any("BUG: unable to handle page fault" in line for line in r["signature"]["lines"]), r["signature"]
    # each probe is an ordinary job in the results database; a verdict per run
    verdicts = {p["build"]: p["verdict"] for p in r["probes"]}
    assert verdicts["b01"] == "reference" and verdicts["b20"] == "bad"
    assert all(v == "pass" for b, v in verdicts.items() if "b02" <= b < f"b{FIRST_BAD}"), verdicts
    assert all(v == "bad" for b, v in verdicts.items() if b >= f"b{FIRST_BAD}"), verdicts
    job_id = r["probes"][-1]["job_id"]
    assert panio("job", "status", str(job_id), "--json").json()["id"] == job_id
    text = panio("bisect", "status").out
    assert f"first bad build: b{FIRST_BAD}" in text and f"job {job_id}" in text
    assert panio("bisect", "log", str(r["id"]), "--json").json() == r["probes"]


def test_a_flaky_board_does_not_mislead_with_repeat_3(panio, sim_bench, tmp_path):
    job, builds = _setup(sim_bench, tmp_path, flaky=True)
    r = panio(*_start(job, builds, "--repeat", "3"), "--json", timeout=900).json()
    assert r["state"] == "done" and r["first_bad"] == f"b{FIRST_BAD}", r
    unrelated = [p for p in r["probes"] if p["verdict"] == "unrelated"]
    assert unrelated and all("WARNING: eth0: link flapped" in p["why"] for p in unrelated), r["probes"]
    passes = [p for p in r["probes"] if p["build"] == f"b{FIRST_BAD - 1:02d}" and p["verdict"] == "pass"]
    assert len(passes) == 3
    # with --repeat over 1 the good build passes once more after the reference: what every later boot differs
    # from the board's first by is known as noise before any failure there is judged
    assert [p["verdict"] for p in r["probes"] if p["build"] == "b01"][:2] == ["reference", "pass"], r["probes"]


def test_a_flake_right_after_the_bad_builds_runs_is_not_the_bad_failure(panio, sim_bench, tmp_path):
    """The first build probed after the bad build's runs flakes. A firmware line every boot prints ("Network
    boot: disabled") was a divergent line of the bad runs and of the flake alike when the reference's window
    began after it (timing, under load): they shared it, and a good build was named the first bad (about 1 run
    in 5). A line any passing run on the board printed is no evidence now (``Bisection._noise``)."""
    job, builds = _setup(sim_bench, tmp_path, flaky="after-bad")
    r = panio(*_start(job, builds, "--repeat", "3"), "--json", timeout=900).json()
    assert r["state"] == "done" and r["first_bad"] == f"b{FIRST_BAD}", [(p["build"], p["verdict"], p["why"])
                                                                       for p in r["probes"]]
    unrelated = [p for p in r["probes"] if p["verdict"] == "unrelated"]
    assert len(unrelated) == 1 and "WARNING: eth0: link flapped" in unrelated[0]["why"], r["probes"]


def test_resume_after_the_bisecting_process_is_killed(panio, sim_bench, tmp_path):
    """Killed -9 while a probe job runs: that job (never judged) is settled by resume as `job status` settles it
    (incomplete: its runner is gone), recorded inconclusive, not counted; the search goes on from the database."""
    job, builds = _setup(sim_bench, tmp_path)
    proc = subprocess.Popen([PANIO, *_start(job, builds)], env=panio.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        def probing() -> dict | None:
            r = panio("bisect", "status", "--json", check=False)
            if r.code != 0:
                return None
            s = r.json()
            judged = sum(p["verdict"] in ("pass", "bad") for p in s["probes"])
            return s if judged >= 3 and s["running"] else None

        before = wait_for(probing, timeout_s=300)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert before["state"] == "running"
    orphan = before["running"][0]  # (`job status` would settle it: resume must, with nothing else reading it)
    r = panio("bisect", "resume", str(before["id"]), "--json", timeout=600).json()
    assert r["state"] == "done" and r["first_bad"] == f"b{FIRST_BAD}", r
    assert r["probes"][:len(before["probes"])] == before["probes"]  # what was judged before is kept, not run again
    settled = [p for p in r["probes"] if p["job_id"] == orphan["job_id"]]
    assert len(settled) == 1 and settled[0]["verdict"] == "inconclusive", settled
    assert "lost" in settled[0]["why"], settled
    lost = panio("job", "status", str(orphan["job_id"]), "--json").json()
    assert (lost["state"], lost["health"]) == ("done", "incomplete"), lost
    # the orphan's build was judged by a run made after it, counted as usual
    assert any(p["build"] == orphan["build"] and p["verdict"] in ("pass", "bad") and p["job_id"] > orphan["job_id"]
               for p in r["probes"]), r["probes"]
    assert not r["running"]
    assert r["bisection_probes"] <= math.ceil(math.log2(20))
    again = panio.fails("bisect", "resume", str(r["id"]), code=2)
    assert "is done" in again.error["message"]


def test_a_bisection_the_lab_stopped_goes_on_once_the_lab_is_fixed(panio, sim_bench, tmp_path):
    """The board's capture is not running: every run of the good build is the lab's fault, and after 2 x repeat + 2
    of them the bisection stops (exit 4) saying "fix the lab, then resume". Once the capture runs, `resume` goes
    on: the runs the lab spoiled before are not counted again (they were, so resume stopped at once, forever)."""
    job, builds = _setup(sim_bench, tmp_path)
    panio("serial", "stop", "board0")
    try:
        stopped = panio.fails(*_start(job, builds), code=4, timeout=600)
        assert "fix the lab, then `panio bisect resume" in stopped.err
    finally:
        panio("serial", "watch", "board0")
    bisect_id = stopped.error["bisect"]
    r = panio("bisect", "resume", str(bisect_id), "--json", timeout=600).json()
    assert r["state"] == "done" and r["first_bad"] == f"b{FIRST_BAD}", r
    spoiled = [p for p in r["probes"] if p["verdict"] == "inconclusive"]
    assert len(spoiled) == 4 and all("no serial capture is running" in p["why"] for p in spoiled), r["probes"]


def test_bad_input_is_one_line_and_nothing_starts(panio, sim_bench, tmp_path):
    job, builds = _setup(sim_bench, tmp_path)
    r = panio.fails("bisect", "start", job, "--target", "board0", "--good", "b20", "--bad", "b01",
                    "--builds", builds, code=2)
    assert "must come before" in r.error["message"]
    r = panio.fails("bisect", "start", job, "--target", "board0", "--good", "b01", "--bad", "nope",
                    "--builds", builds, code=2)
    assert "'nope' is not in the builds list" in r.error["message"]
    bad = tmp_path / "nokernel.toml"
    bad.write_text(JOB.replace("${build.flash}", "${build.dtb}"))
    r = panio.fails(*_start(str(bad), builds), code=2)
    assert "has no artifact 'dtb'" in r.error["message"]
    assert json.loads(panio("bisect", "status", check=False).err.splitlines()[-1])["error"] == "not_configured"


def test_a_tag_probes_side_by_side_and_a_board_gone_bad_is_replaced(panio, tmp_path):
    """Three boards of tag sim; board1's first deploy sets its health bad (its SD card died): its next probe is
    held by the health gate (inconclusive), run again on another board, and board1 takes no more probes."""
    boards = ("board0", "board1", "board2")
    with sim_bench(panio, tmp_path / "sim", boards=3, booted=True, watch=boards) as bench:
        job, builds = _setup(bench, tmp_path, boards=3, breaks="board1")
        r = panio("bisect", "start", job, "--tag", "sim", "--good", "b01", "--bad", "b20", "--builds", builds,
                  "--json", timeout=600).json()
        assert r["state"] == "done" and r["first_bad"] == f"b{FIRST_BAD}", r
        assert r["tag"] == "sim" and r["target"] is None and not r["running"]
        probes = r["probes"]
        assert {p["target"] for p in probes} == set(boards), probes
        # each board's failures are compared with a pass of the good build on that board (their consoles differ)
        assert {p["target"] for p in probes if p["verdict"] == "reference"} == set(boards), probes
        assert any("BUG: unable to handle page fault" in line for line in r["signature"]["lines"]), r["signature"]
        assert not [p for p in probes if p["verdict"] == "unrelated"], probes
        assert all(p["verdict"] == "bad" for p in probes if p["build"] >= f"b{FIRST_BAD}"), probes
        held = [i for i, p in enumerate(probes) if p["verdict"] == "inconclusive"]
        assert held, probes
        first = probes[held[0]]
        assert first["target"] == "board1" and "bad" in first["why"] and "another board" in first["why"], first
        # the held run is made again on another board and judged there; board1 takes nothing after it
        assert any(p["build"] == first["build"] and p["target"] != "board1" and p["verdict"] in ("pass", "bad")
                   for p in probes[held[0] + 1:]), probes
        assert all(p["target"] != "board1" for p in probes[held[0] + 1:]), probes
        assert all(p["target"] == "board1" for p in (probes[i] for i in held)), probes
        # side by side: some probe jobs of the search ran at the same time on different boards
        jobs = [panio("job", "status", str(p["job_id"]), "--json").json() for p in probes
                if p["verdict"] != "inconclusive"]
        spans = sorted((j["started_at"], j["finished_at"]) for j in jobs)
        assert any(b[0] < a[1] for a, b in zip(spans, spans[1:])), spans
        text = panio("bisect", "status", str(r["id"])).out
        assert "on tag sim" in text and "on board1 inconclusive" in text, text


LISTER = """\
import sys
from pathlib import Path
print(Path(sys.argv[1]).read_text(), end="")
print("given:", *sys.argv[2:], file=sys.stderr)
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0)
"""


def test_builds_from_a_command_run_without_a_shell(panio, sim_bench, tmp_path):
    job, builds = _setup(sim_bench, tmp_path)
    lister = tmp_path / "list.py"
    lister.write_text(LISTER)
    r = panio("bisect", "start", job, "--target", "board0", "--good", "b11", "--bad", "b14",
              "--builds-cmd", f"{sys.executable} {lister} {builds}", "--json", timeout=300).json()
    assert r["state"] == "done" and r["first_bad"] == f"b{FIRST_BAD}", r
    assert r["builds"] == ["b11", "b12", "b13", "b14"]
    # a failing command is one usage error and nothing starts; no shell reads its words ('; rm' is an argument)
    failed = panio.fails("bisect", "start", job, "--target", "board0", "--good", "b01", "--bad", "b20",
                         "--builds-cmd", f"{sys.executable} {lister} {builds} 3 ';' rm -rf /", code=2)
    assert "--builds-cmd" in failed.error["message"] and "exit 3" in failed.error["message"], failed.error
    assert "given: 3 ; rm -rf /" in failed.error["message"], failed.error
    missing = panio.fails("bisect", "start", job, "--target", "board0", "--good", "b01", "--bad", "b20",
                          "--builds-cmd", "no-such-lister --since v1", code=2)
    assert "'no-such-lister' not found" in missing.error["message"], missing.error
    empty = panio.fails("bisect", "start", job, "--target", "board0", "--good", "b01", "--bad", "b20",
                        "--builds-cmd", "true", code=2)
    assert "at least two builds, found 0" in empty.error["message"], empty.error
    assert panio("bisect", "status", "--json").json()["id"] == r["id"]  # none of them recorded a bisection


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_database_made_before_tag_gains_its_columns(db, tmp_path):
    """A results database whose bisection tables an earlier panio made (no tag, no probe's target) gets the new
    columns and a target that may be empty, keeps its rows, and records a tag bisection and each probe's board."""
    import sqlalchemy as sa

    from bench_agent.results.bisects import BisectStore
    from bench_agent.results.db import engine_for, index_names

    url = f"sqlite:///{tmp_path / 'old.db'}" if db == "sqlite" else pg_schema()
    key = "INTEGER PRIMARY KEY" if db == "sqlite" else "SERIAL PRIMARY KEY"
    try:
        engine = engine_for(url)
        with engine.begin() as c:
            c.execute(sa.text(f"CREATE TABLE panio_bisects (id {key}, job_path TEXT NOT NULL, job_text TEXT NOT NULL, "
                              "target VARCHAR(64) NOT NULL, builds TEXT NOT NULL, repeat INTEGER NOT NULL, "
                              "state VARCHAR(16) NOT NULL, good INTEGER NOT NULL, bad INTEGER NOT NULL, "
                              "signature TEXT, reference INTEGER, reason TEXT, created_at FLOAT NOT NULL, "
                              "updated_at FLOAT NOT NULL)"))
            c.execute(sa.text(f"CREATE TABLE panio_bisect_probes (id {key}, bisect_id INTEGER NOT NULL, "
                              "build INTEGER NOT NULL, job_id INTEGER NOT NULL, verdict VARCHAR(16) NOT NULL, "
                              "why TEXT NOT NULL, at FLOAT NOT NULL)"))
            c.execute(sa.text("INSERT INTO panio_bisects (job_path, job_text, target, builds, repeat, state, good, "
                              "bad, created_at, updated_at) "
                              "VALUES ('j.toml', '', 'pico', '[]', 1, 'done', 0, 1, 0, 0)"))
        engine.dispose()
        store = BisectStore(url)
        assert store.get(1)["target"] == "pico" and store.get(1)["tag"] is None
        with store.engine.connect() as c:
            assert {"ix_panio_bisect_probes_job_id", "ix_panio_bisect_probes_bisect_id"} <= index_names(
                c, "panio_bisect_probes")
            assert "ix_panio_bisect_probes_job_id" in _plan(c, store, 7)  # a job's page finds its probe by it
        new = store.create("j.toml", "", None, [{"name": "a", "artifacts": {}}, {"name": "b", "artifacts": {}}], 1,
                           tag="pi5")
        assert new == 2
        probe = store.add_probe(new, 0, 7, "running", "running on board2", target="board2")
        assert store.get(new)["probes"][0]["verdict"] == "running"
        store.judge(probe, "pass", "passed")
        rec = store.get(new)
        assert rec["target"] is None and rec["tag"] == "pi5"
        assert [(p["verdict"], p["why"], p["target"]) for p in rec["probes"]] == [("pass", "passed", "board2")]
    finally:
        if db == "postgresql":
            drop_pg_schema(url)


def _plan(conn, store, job_id: int) -> str:
    """How the database runs the dashboard's lookup of job ``job_id``'s probe (``BisectStore.probe_of``), a
    scan of the whole table ruled out on PostgreSQL (a table this small it would scan rather than use an index)."""
    import sqlalchemy as sa

    p = store.probes
    query = p.select().where(p.c.job_id == job_id).order_by(p.c.id.desc()).limit(1)
    sql = str(query.compile(conn, compile_kwargs={"literal_binds": True}))
    if conn.dialect.name == "sqlite":
        return " ".join(str(r[-1]) for r in conn.execute(sa.text(f"EXPLAIN QUERY PLAN {sql}")))
    conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
    return " ".join(r[0] for r in conn.execute(sa.text(f"EXPLAIN {sql}")))


@pytest.mark.parametrize(("boards", "repeat", "rounds"), [(1, 1, 5), (3, 1, 3), (3, 3, 5), (6, 3, 3)])
def test_rounds_of_the_split_are_those_docs_bisect_md_gives(boards, repeat, rounds):
    """docs/bisect.md's table: 20 builds, the worst first bad build, probe times a search takes (a round whose
    runs outnumber the boards takes more than one)."""
    from controller.jobs.bisect import split

    def probe_times(first_bad: int) -> int:
        good, bad, times = 0, 19, 0
        while bad - good > 1:
            picks = split(good, bad, boards, repeat)
            assert picks and all(good < p < bad for p in picks)
            times += math.ceil(len(picks) * repeat / boards)
            bad = min([p for p in picks if p >= first_bad], default=bad)
            good = max([p for p in picks if p < first_bad], default=good)
        assert bad == first_bad
        return times

    assert max(probe_times(b) for b in range(1, 20)) == rounds
    assert split(0, 19, 1, 1) == [9]  # one board: the middle build, as a binary search


def test_a_tag_bisection_killed_mid_round_settles_every_orphan_probe(panio, tmp_path):
    """--tag on three boards (no console: a build is deployed by an action whose output the job judges), killed -9
    while a round's three probes run side by side, held by their deploys: resume settles each of the orphans
    (incomplete, worker lost: inconclusive, not counted), runs their builds again on the same boards (a lost
    runner is not the board's fault) and finds the first bad build."""
    from bisecthelp import JOB, deploy_actions

    gate = tmp_path / "deployed"
    wait = f"while [ ! -e {gate} ]; do sleep 0.1; done"
    panio("init")
    for board in ("board0", "board1", "board2"):
        panio("target", "add", board, "--tag", "t3")
        deploy_actions(panio, board)
        for kind, line in (("good", "boot ok"), ("bad", "BUG: oops at 0000dead")):  # until the test opens the gate
            panio("action", "add", f"held-{kind}", "-t", board, "--command", f"/bin/sh -c '{wait}; echo {line}'")
    builds = tmp_path / "builds.txt"  # b01 and b08 deploy at once; the search's builds wait for the gate
    builds.write_text("b01 flash=flash-good\n" + "".join(f"b{i:02d} flash=held-{'bad' if i >= 6 else 'good'}\n"
                                                         for i in range(2, 8)) + "b08 flash=flash-bad\n")
    job = tmp_path / "boot.toml"
    job.write_text(JOB)
    proc = subprocess.Popen([PANIO, "bisect", "start", str(job), "--tag", "t3", "--good", "b01", "--bad", "b08",
                             "--builds", str(builds)], env=panio.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        def mid_round() -> dict | None:
            r = panio("bisect", "status", "--json", check=False)
            running = r.json()["running"] if r.code == 0 else []
            return r.json() if len(running) == 3 and all(p["build"] not in ("b01", "b08") for p in running) else None

        before = wait_for(mid_round, timeout_s=120)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        gate.write_text("")  # the held deploys (their own process groups) end; the runs made from now on pass it
    orphans = before["running"]
    assert before["state"] == "running" and {p["target"] for p in orphans} == {"board0", "board1", "board2"}
    assert sorted(p["build"] for p in orphans) == ["b02", "b04", "b06"]  # the round splits b01..b08 in four
    r = panio("bisect", "resume", str(before["id"]), "--json", timeout=300).json()
    assert r["state"] == "done" and r["first_bad"] == "b06", r
    assert r["probes"][:len(before["probes"])] == before["probes"]  # judged before: kept, not run again
    for orphan in orphans:
        settled = [p for p in r["probes"] if p["job_id"] == orphan["job_id"]]
        assert len(settled) == 1 and settled[0]["verdict"] == "inconclusive" and "lost" in settled[0]["why"], settled
        lost = panio("job", "status", str(orphan["job_id"]), "--json").json()
        assert (lost["state"], lost["health"]) == ("done", "incomplete"), lost
    assert not r["running"] and not [p for p in r["probes"] if p["verdict"] == "unrelated"], r["probes"]
    # the search went on after the orphans on the boards they ran on: none was set aside for its runner's death
    after = r["probes"][len(before["probes"]) + len(orphans):]
    assert after and all(p["verdict"] in ("pass", "bad") for p in after), r["probes"]
    assert {p["target"] for p in after} == {"board0", "board1", "board2"}, after


def test_a_build_value_with_spaces_quotes_and_newlines_is_one_word_and_adds_nothing_to_the_job():
    """A build's name and artifacts are put in the job file's strings, not pasted into its text: a path with a
    space is one argument of the step, and a name written as TOML cannot add a step to the job."""
    from bench_agent import shellwords
    from controller.jobs import bisect

    text = JOB.replace("--since-step", "--since-step --pattern 'built ${build}'")
    name = 'v1 "x"\n[[steps]]\nrun = "panio power off t1"'
    job = bisect.job_for(text, "boot.toml", {"name": name, "artifacts": {"flash": "/srv/my builds/it's \"x\".img"}})
    steps = job["data"]["steps"]
    assert [s["name"] for s in steps] == [f"deploy {name}", "power-cycle", "boots clean"]
    assert shellwords.split(steps[0]["run"]) == ["panio", "action", "run", "${target}", "/srv/my builds/it's \"x\".img"]
    assert shellwords.split(steps[2]["run"])[5:9] == ["--pattern", f"built {name}", "--pattern", "root@sim:~# "]
    assert job["data"]["timeout_s"] == 60 and "power off" not in "".join(s["run"] for s in steps[:2])
