"""What a new user hit, each fixed and held: docs that disagreed with behaviour, reports that said `None`,
an unfilled `${target}`, a progress line that froze on a quiet step, the license table setuptools warns about."""

from __future__ import annotations

import io
import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import BIN
from jobhelp import job_file, wait_for
from simbench import sim, sim_bench

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FAILING = ("name = 'f'\n[[steps]]\nname = 'wrong'\nrun = 'ping ${target}'\nexpect_output = 'seq=9'\n"
           "[[steps]]\nname = 'after'\nrun = 'ping ${target} --count 2'\n")
LAB_FAILS = ("name = 'g'\n[[steps]]\nname = 'no console'\nrun = 'serial log ${target}'\n"
             "[[steps]]\nname = 'after'\nrun = 'ping ${target}'\n")


def documented_exit(page: str, row_start: str) -> int:
    row = next(ln for ln in (DOCS / page).read_text().splitlines() if ln.startswith(f"| {row_start}"))
    return int(re.search(r"\| (\d+) `", row).group(1))


def test_a_missing_job_file_exits_as_the_docs_say(panio):
    panio("init")
    panio.fails("job", "run", "no-such-job.toml", code=documented_exit("jobs.md", "job or suite file missing"))


def test_doctor_failing_prints_the_two_error_lines_and_keeps_its_report(panio):
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/ttyUSB-absent")
    r = panio.fails("doctor", code=1)
    assert "MISSING" in r.out and "/dev/ttyUSB-absent" in r.out
    assert r.error["items"] == ["pico/serial/console"] and "missing or wrong" in r.error["message"]
    assert panio.fails("doctor", "--json", code=1).json()["ok"] is False


def test_getting_started_leads_to_the_simulator():
    text = (DOCS / "getting-started.md").read_text()
    assert "panio-sim up" in text and "(simulator.md)" in text and "boot.toml" in text


def test_simulator_docs_list_every_file_up_writes(panio, tmp_path):
    with sim_bench(panio, tmp_path / "sim", boards=2, boot_s=0.1, countdown_s=0.1) as bench:
        written = {re.sub(r"board\d+", "boardN", p.name) for p in bench.dir.iterdir()}
    table = (DOCS / "simulator.md").read_text()
    assert written >= {"lab.toml", "sim.pids", "boardN.tty", "boot.toml"}
    assert [name for name in sorted(written) if f"| `{name}` |" not in table] == []


def test_the_live_progress_line_ticks_through_a_quiet_step():
    from controller.jobs.progress import LiveProgress

    out = io.StringIO()
    show = LiveProgress(out, tick_s=0.1)

    def elapsed() -> list[float]:
        frames = out.getvalue().split("\r\x1b[K")
        return [float(m.group(1)) for f in frames if (m := re.search(r"wait for login +(\d+\.\d)s", f))]

    show("step_start", {"idx": 0, "name": "wait for login", "command": "panio serial wait", "count": 1})
    # the step prints nothing, and the line ticks all the same: redrawn with the time, again and again
    wait_for(lambda: len(elapsed()) >= 4 and elapsed()[-1] >= 0.3, timeout_s=60, every_s=0.05)
    assert elapsed() == sorted(elapsed()), out.getvalue()
    show("step_end", {"idx": 0, "status": "pass", "duration_s": 0.75})
    settled = out.getvalue()
    show._ticker.join(60)  # the ticker gives up once no step has run for a while
    assert not show._ticker.is_alive()
    assert out.getvalue() == settled  # nothing ticked after the step ended


def test_reports_name_what_a_check_saw_and_fill_skipped_steps(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    r = panio("job", "run", job_file(tmp_path, FAILING), "--target", "pico", "--junit", str(tmp_path / "f.xml"),
              check=False)
    assert r.code == 14
    assert "got None" not in r.out and "None" not in r.out
    assert "output matches /seq=9/: no match in the output (last output line: 'pico (local): seq=1" in r.out
    assert "skip 2. after  (panio ping pico --count 2)" in r.out
    status = panio("job", "status", "1", "--json").json()
    assert status["steps"][1]["command"] == "panio ping pico --count 2"


def test_junit_of_a_job_the_lab_stopped_has_no_none(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    junit = tmp_path / "g.xml"
    panio("job", "run", job_file(tmp_path, LAB_FAILS), "--target", "pico", "--junit", str(junit), check=False)
    xml = junit.read_text()
    assert 'name="panio.job.health" value="incomplete"' in xml
    assert "None" not in xml and "${target}" not in xml


def test_the_license_is_an_spdx_string():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"  # a table makes setuptools warn on every install
    assert "setuptools>=77" in project["build-system"]["requires"]  # the first that reads the SPDX string


# --- a newcomer's second pass: hints that named commands panio does not have, or led the wrong way ---


def test_a_taken_name_hints_only_commands_that_exist(panio):
    panio("init")
    panio("target", "add", "pico")
    r = panio.fails("target", "add", "pico", code=6)
    assert "target set" not in r.error["hint"] and "`panio target show pico`" in r.error["hint"]
    panio("action", "add", "flash", "-t", "pico", "--command", "true")
    r = panio.fails("action", "add", "flash", "-t", "pico", "--command", "true", code=6)
    assert "action set" not in r.error["hint"] and "`panio action rm flash -t pico`" in r.error["hint"]
    panio("host", "add", "bench1", "--ssh", "ops@bench1.lab")
    assert "`panio host set bench1 ...`" in panio.fails("host", "add", "bench1", "--ssh", "x@y", code=6).error["hint"]
    for hint in ("target show pico", "action rm flash -t pico", "host set bench1"):  # each hint runs as written
        assert panio(*hint.split(), "--help").code == 0


def test_arguments_in_the_wrong_order_say_the_target_comes_first(panio):
    panio("init")
    panio("target", "add", "pico")
    r = panio.fails("serial", "send", "uname -a", "pico", code=3)
    assert r.error["hint"].startswith("'pico' is a target: runtime commands take the target first")
    assert "`panio serial send pico ...`" in r.error["hint"] and "uname" not in r.error["hint"]
    assert panio.fails("serial", "send", "pcio", "hi", code=3).error["hint"] == "did you mean 'pico'?"


def test_power_set_does_not_print_a_power_on_command(panio):
    panio("init")
    panio("target", "add", "pico")
    out = panio("power", "set", "-t", "pico", "--cycle-cmd", "true").out
    assert out == "set cycle_cmd of pico's power (default level)\n"
    out = panio("power", "set", "-t", "pico", "--level", "hard", "--off-cmd", "true").out
    assert not out.startswith("power on") and "(level hard)" in out


def test_a_job_files_typos_are_named_with_the_near_miss_and_the_right_line(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    cmd = panio.fails("job", "check", job_file(tmp_path, "[[steps]]\nrun = 'panio power-cylce ${target}'\n"), code=5)
    assert cmd.error["hint"].startswith("did you mean `panio power-cycle`?")
    tgt = panio.fails("job", "check", job_file(tmp_path, "target = 'pcio'\n[[steps]]\nrun = 'ping ${target}'\n"),
                      code=5)
    assert tgt.error["hint"].startswith("did you mean 'pico'?") and "--target TARGET" in tgt.error["hint"]
    table = panio.fails("job", "check", job_file(tmp_path, "name = 'x'\ntarget = 'pico'\n\n[[step]]\nrun = 'ping x'\n"),
                        code=5)
    assert (table.error["line"], table.error["column"]) == (4, 1)  # the [[step]] header, not 1:1


def test_the_jobs_doc_example_passes_on_the_target_it_is_run_on(panio, tmp_path):
    text = (DOCS / "jobs.md").read_text()
    example = re.search(r"## The job file\n\n```toml\n(.*?)```", text, re.S).group(1)
    panio("init")
    panio("target", "add", "board0")
    r = panio("job", "run", job_file(tmp_path, example), "--target", "board0", check=False)
    assert r.code == 0, r.out + r.err


def test_a_bundled_helpers_near_miss_is_named_and_its_usage_error_says_its_name_once(panio):
    assert panio.fails("helper", "shelly", code=3).error["hint"].startswith("did you mean `panio helper shellyplug`?")
    p = subprocess.run([str(BIN / "shellyplug"), "state"], capture_output=True, text=True, env=panio.env, timeout=30)
    assert p.returncode == 2 and p.stderr.startswith("shellyplug: the following")
    assert "shellyplug: shellyplug" not in p.stderr


def test_stopping_a_stopped_capture_does_not_say_start_it(bench, panio):
    bench.board("pico")
    panio("serial", "watch", "pico")
    panio("serial", "stop", "pico")
    r = panio.fails("serial", "stop", "pico", code=10)
    assert "nothing to stop" in r.error["message"] and "serial watch" not in r.error["hint"]
    assert "`panio serial log pico`" in r.error["hint"]


def test_a_transact_that_times_out_hints_a_serial_wait_that_parses(bench, panio):
    bench.board("pico")["console"].power_on()
    panio("serial", "watch", "pico")
    r = panio.fails("serial", "transact", "pico", "echo hi", "--until", "never-printed", "--timeout-ms", "300", code=22)
    hinted = re.search(r"`panio (serial wait [^`]+)`", r.error["hint"]).group(1)
    assert f"--epoch {r.error['epoch']} --since {r.error['cursor']}" in hinted and "never-printed" not in hinted
    from controller.cli.main import build_parser

    build_parser(full=True).parse_args(hinted.replace("REGEX", "x").split())  # transact has no --epoch; wait does


def test_a_suite_naming_a_missing_job_file_is_the_suite_files_error(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    job_file(tmp_path, "target = 'pico'\n[[steps]]\nrun = 'ping ${target}'\n", name="smoke.toml")
    suite = job_file(tmp_path, "name = 's'\njobs = ['smoke.toml', 'nope.toml']\n", name="suite.toml")
    code = documented_exit("jobs.md", "a job file a suite names is missing")
    r = panio.fails("suite", "check", suite, code=code)
    assert (r.error["file"], r.error["line"]) == (suite, 2) and "jobs[1]: no job file at" in r.error["message"]
    panio.fails("suite", "run", suite, code=code)


def test_a_config_command_without_its_t_says_config_commands_take_t(panio):
    panio("init")
    panio("target", "add", "pico")
    r = panio.fails("serial", "add", "console", "pico", "--device", "/dev/ttyUSB0", code=2)
    assert r.error["hint"] == "config commands name the target with -t TARGET; see `panio serial add --help`"
    assert panio("serial", "add", "--help").code == 0


@pytest.mark.parametrize("word, meant", [("reset", "power-cycle"), ("reboot", "power-cycle"), ("flash", "action run"),
                                         ("serail", "serial"), ("shell", None)])
def test_an_unknown_command_is_never_pointed_at_an_unrelated_one(panio, tmp_path, word, meant):
    hint = panio.fails(word, "pico", code=2).error["hint"]
    assert ("did you mean" not in hint) if meant is None else hint.startswith(f"did you mean `panio {meant}`?")
    assert "setup" not in hint and "lease" not in hint and "netboot" not in hint  # the old near misses
    panio("init")
    r = panio.fails("job", "check", job_file(tmp_path, f"target = 'x'\n[[steps]]\nrun = 'panio {word} x'\n"), code=5)
    assert ("did you mean" not in r.error["hint"]) if meant is None else f"`panio {meant}`" in r.error["hint"]


def test_a_simulated_board_whose_bench_is_down_points_at_panio_sim(panio, tmp_path):
    with sim_bench(panio, tmp_path / "sim", boot_s=0.1, countdown_s=0.1) as bench:
        bench.down()
    r = panio.fails("--lab", str(bench.lab), "serial", "watch", "board0", code=12)
    assert "is the simulated bench up?" in r.error["message"] and "`panio-sim up`" in r.error["hint"]
    assert "panio serial devices" not in r.error["hint"]  # it lists real ports, never a simulated board


def test_an_output_path_that_cannot_be_written_is_refused_before_the_job_runs(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    job = job_file(tmp_path, "[[steps]]\nrun = 'ping ${target}'\n")
    (tmp_path / "taken").write_text("a file, not a folder")
    code = documented_exit("jobs.md", "`--junit`, `--report` or `--out` names a path")
    for flag, path in (("--junit", tmp_path / "taken" / "j.xml"), ("--report", tmp_path)):
        r = panio.fails("job", "run", job, "--target", "pico", flag, str(path), code=code)
        assert r.error["argument"] == flag and "internal" not in r.err
    assert panio("job", "list", "--json").json() == []  # refused before a job was created
    panio("job", "run", job, "--target", "pico")
    r = panio.fails("job", "artifacts", "1", "--out", str(tmp_path / "taken"), code=code)
    assert r.error["argument"] == "--out"
    suite = job_file(tmp_path, "jobs = ['job.toml']\ntargets = ['pico']\n", name="suite.toml")
    panio.fails("suite", "run", suite, "--junit", str(tmp_path / "taken" / "s.xml"), code=code)
    assert len(panio("job", "list", "--json").json()) == 1


def test_a_folder_that_is_a_file_is_refused_in_two_lines_by_init_and_panio_sim(panio, tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    r = panio.fails("--lab", str(tmp_path / "afile" / "lab.toml"), "init", code=5)
    assert "cannot create" in r.error["message"] and "--lab PATH" in r.error["hint"]
    p = sim("up", "--dir", str(tmp_path / "afile"), env=panio.env, check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 2 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("panio-sim: cannot use") and '"error": "usage"' in lines[1]


def test_an_empty_target_never_quietly_runs_the_files_own_target(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    job = job_file(tmp_path, "target = 'pico'\n[[steps]]\nrun = 'ping ${target}'\n")
    for cmd in ("run", "check"):
        r = panio.fails("job", cmd, job, "--target", "", code=2)  # CI's `--target "$BOARD"` with BOARD unset
        assert r.error["message"] == "--target is empty"
    assert panio("job", "list", "--json").json() == []


def test_a_zero_duration_says_it_must_be_more_than_zero(panio):
    panio("init")
    assert "must be more than zero" in panio.fails("job", "prune", "--older-than", "0d", code=2).error["message"]
    assert "use a number and a unit" in panio.fails("job", "prune", "--older-than", "30", code=2).error["message"]


def test_an_unknown_target_in_the_default_lab_also_suggests_another_lab_file(panio, tmp_path):
    env = {k: v for k, v in panio.env.items() if k != "PANIO_LAB"}  # a new shell: no `export PANIO_LAB=...`
    run = lambda *a: subprocess.run([str(BIN / "panio"), *a], capture_output=True, text=True, env=env, timeout=60)
    run("init")
    hint = json.loads(run("serial", "stop", "board0").stderr.splitlines()[-1])["hint"]
    assert hint.startswith("add it with `panio target add board0`") and "--lab PATH or set $PANIO_LAB" in hint
    panio("init")  # with PANIO_LAB set, the user chose the file: no second guess
    assert panio.fails("serial", "stop", "board0", code=3).error["hint"] == "add it with `panio target add board0`"


def test_the_readmes_job_file_that_does_not_exist_yet_leads_to_a_format_and_a_runnable_one(panio):
    panio("init")
    hint = panio.fails("job", "run", "smoke.toml", "--junit", "junit.xml", code=2).error["hint"]
    assert "`panio job --help` shows the format" in hint and "`panio-sim up` writes runnable ones" in hint
    assert "shows the format" in panio.fails("suite", "run", "nightly.toml", code=2).error["hint"]
    assert "job file" in panio("job", "--help").out


def test_a_pattern_that_matches_the_empty_string_is_refused_before_anything_is_sent(bench, panio):
    """`--until ""` or `.*` matched at once, before the board said a thing: transact returned only the echo."""
    sim = bench.board("pico")["console"]
    sim.power_on()
    panio("serial", "watch", "pico")
    epoch, cursor = (s := bench.status("pico"))["epoch"], s["rx"]["cursor"]
    for flags in (["serial", "transact", "pico", "uname -a", "--until", ""],
                  ["serial", "transact", "pico", "uname -a", "--until", ".*"],
                  ["serial", "wait", "pico", "--epoch", str(epoch), "--since", str(cursor), "--pattern", "x?"]):
        r = panio.fails(*flags, code=2)
        assert "matches the empty string" in r.error["message"], r.err
    assert bench.status("pico")["tx"]["bytes"] == 0  # refused before anything was sent


def test_a_hook_or_action_whose_quotes_do_not_close_is_refused_when_set(panio):
    panio("init")
    panio("target", "add", "pico")
    before = panio.lab.read_text()
    r = panio.fails("power", "set", "-t", "pico", "--cycle-cmd", "plug 'unclosed", code=2)
    assert "cannot be split into words" in r.error["message"]
    r = panio.fails("action", "add", "flash", "-t", "pico", "--command", "flash 'unclosed", code=2)
    assert "cannot be split into words" in r.error["message"]
    assert panio.lab.read_text() == before


def test_health_set_without_a_reason_says_so_once(panio):
    panio("init")
    panio("target", "add", "pico")
    panio("target", "health", "pico", "--set", "good")  # bad and maintenance need --reason
    out = panio("target", "health", "pico").out
    assert "no reason given, set by " in out and "set by an operator" not in out, out


def test_a_prompt_left_unterminated_by_a_stopped_capture_never_runs_into_the_next_epoch(bench, panio):
    """`serial stop` at a prompt, `serial watch` again: the next epoch's first bytes were glued to the prompt
    (`root@sim:~# U-Boot ...` after a reboot nobody captured). What came in between may be missing, so a new
    epoch, like a gap, starts a new line: here the echo of the next command."""
    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    bench.wait_for("pico", r"root@sim:~# $")
    panio("serial", "stop", "pico")
    panio("serial", "watch", "pico")
    cursor = bench.status("pico")["rx"]["cursor"]
    panio("serial", "send", "pico", "uname -a")
    bench.wait_for("pico", r"armv7l", since=cursor)
    texts = [line["text"] for line in panio("serial", "log", "pico", "--json").json()["lines"]]
    sent = next(i for i, t in enumerate(texts) if "uname -a" in t)
    assert (texts[sent - 1], texts[sent]) == ("root@sim:~# ", "uname -a"), texts[sent - 2:]


def test_panio_sim_down_without_dir_stops_the_one_bench_started_with_dir(panio, tmp_path):
    bench_dir = tmp_path / "mybench"
    sim("up", "--dir", str(bench_dir), "--no-screen", "--boot-s", "0", "--countdown-s", "0", env=panio.env)
    pid = json.loads((bench_dir / "sim.pids").read_text())[0]["pid"]
    try:
        status = sim("status", "--json", env=panio.env)
        assert [b["name"] for b in json.loads(status.stdout)] == ["board0"], status.stdout
        down = sim("down", env=panio.env, check=False)
        assert down.returncode == 0 and str(bench_dir) in down.stdout, down.stderr
        assert wait_for(lambda: not _cmdline(pid), 20), "the board outlived panio-sim down"
        again = sim("down", env=panio.env, check=False)
        assert again.returncode == 10 and "no simulated bench" in again.stderr
    finally:
        sim("down", "--dir", str(bench_dir), env=panio.env, check=False)


def test_panio_sim_without_dir_names_every_bench_when_several_run(panio, tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        sim("up", "--dir", str(d), "--no-screen", "--boot-s", "0", "--countdown-s", "0", env=panio.env)
    try:
        r = sim("down", env=panio.env, check=False)
        assert r.returncode == 2 and all(str(d) in r.stderr for d in dirs) and "--dir" in r.stderr, r.stderr
        assert all((d / "sim.pids").exists() for d in dirs)  # nothing stopped on a guess
    finally:
        for d in dirs:
            sim("down", "--dir", str(d), env=panio.env, check=False)


def _cmdline(pid: int) -> bytes:
    """A process's command line; empty once it is gone (or a zombie)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_swapped_pair_of_letters_is_named_as_the_key_it_spells(panio, tmp_path):
    panio("init")
    job = tmp_path / "j.toml"
    job.write_text('name = "x"\ntraget = "board0"\n[[steps]]\nname = "a"\nrun = "ping ${target}"\n')
    r = panio.fails("job", "check", str(job), code=5)
    assert "did you mean 'target'?" in r.error["message"], r.error


def test_the_near_miss_prefers_one_edit_and_stays_strict_where_a_guess_could_type():
    from bench_agent.nearmiss import closest

    assert closest("traget", ["name", "target", "tags", "steps", "triage"]) == "target"
    assert closest("pwoer", ["power", "ping"]) == "power"
    assert closest("serial_read", ["serial_send", "serial_log"], cutoff=0.85) is None
    assert closest("zzzz", ["power", "ping"]) is None


def test_a_mistyped_panio_lab_says_where_the_path_came_from_and_does_not_lead_to_init(panio, tmp_path):
    missing = panio.lab  # the fixture's PANIO_LAB, never created here
    r = panio.fails("power-state", "board0", code=3)
    assert "$PANIO_LAB" in r.error["message"] and r.error["source"] == "PANIO_LAB", r.error
    assert r.error["hint"].startswith("check $PANIO_LAB"), r.error
    assert not missing.exists()


def test_a_watch_from_another_state_directory_is_refused_at_once_with_a_stop_that_works(panio, sim_bench, tmp_path):
    panio("serial", "watch", "board0")
    other = {**panio.env, "PANIO_STATE_DIR": str(tmp_path / "other-state")}
    p = subprocess.run([str(BIN / "panio"), "serial", "watch", "board0"], capture_output=True, text=True,
                       env=other, timeout=60)
    assert p.returncode == 8, p.stderr
    error = json.loads(p.stderr.strip().splitlines()[-1])
    state = panio.env["PANIO_STATE_DIR"]
    assert f"PANIO_STATE_DIR={state} panio serial stop board0" in error["hint"], error
    stop = subprocess.run(["sh", "-c", error["hint"].split("`")[1]], capture_output=True, text=True,
                          env={**panio.env, "PANIO_STATE_DIR": "/nonexistent",
                               "PATH": f"{BIN}:{panio.env['PATH']}"}, timeout=60)
    assert stop.returncode == 0 and "stopped serial capture of board0" in stop.stdout, stop.stderr
