"""Every regular expression a user writes goes through one bounded engine (issue 45, item 5 and the leftovers).

A catastrophic pattern in a job file (`[triage] ignore = ['(a|aa)+b']`) used to be accepted: `panio job triage`
never finished and one triage page froze the dashboard for everyone. Now a job file's patterns are refused when
it is loaded (they are tried on inputs made to make them backtrack), one already recorded is refused when it is
used, and one that gets past the probes (a quadratic one) meets a time limit. Also: `(?R)`, a pattern nested
10,000 deep, `expect_exit = []`, and a 1 MB word in a step.
"""

from __future__ import annotations

import random
import shlex
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from bench_agent import patterns
from bench_agent.shellwords import split
from dashhelp import DashboardProc
from jobhelp import job_file, wait_for
from conftest import cpu_s

STEP = 'target = "pico"\n[[steps]]\nrun = "panio serial send pico hi"\n'
SLOW_TO_CHECK_S = 20  # a refusal needs about a second of CPU; the rest is a busy machine starting a CLI


@pytest.mark.parametrize("where, body", [
    ("triage.ignore[0]", "[triage]\nignore = ['(a|aa)+b']\n"),
    ("steps[0].expect_output", "expect_output = '(\\w+\\s?)+$'\n"),
    ("steps[0].reject_output", "reject_output = 'x(a|aa)+y'\n"),
    ("steps[0].capture.n", "capture = { n = '(\\d+)*$' }\n"),
])
def test_a_catastrophic_pattern_in_a_job_file_is_refused_when_it_is_loaded(pico, tmp_path, where, body):
    path = job_file(tmp_path, STEP + body)
    line = 3 + body.count("\n")  # the pattern's own line
    for verb in ("check", "run"):
        started = time.monotonic()
        r = pico.fails("job", verb, path, code=5, timeout=120)
        assert time.monotonic() - started < SLOW_TO_CHECK_S
        assert r.err.startswith(f"panio: {path}:{line}:")
        assert where in r.error["message"] and "backtracks catastrophically" in r.error["message"]
    assert pico("job", "list", "--json").json() == []  # nothing was queued


@pytest.mark.parametrize("body, says", [
    ("expect_output = '(?R)'\n", "a recursive pattern"),
    ("capture = { v = 'a(?1)(b)' }\n", "a recursive pattern"),
    ("expect_output = '" + "(" * 10_000 + "a" + ")" * 10_000 + "'\n", "nests groups 10000 deep: at most 64"),
    ("reject_output = '" + "x" * 5000 + "'\n", "is 5000 characters long: at most 4096"),
    ("expect_output = '(ab{1000}){1000}'\n", "repeats to 1,001,000 items: at most 100,000"),
    ("expect_exit = []\n", "expect_exit = [] can never pass"),
])
def test_job_check_refuses_recursive_deep_long_and_empty_expectations_in_one_line(pico, tmp_path, body, says):
    started = time.monotonic()
    r = pico.fails("job", "check", job_file(tmp_path, STEP + body), code=5)
    assert time.monotonic() - started < SLOW_TO_CHECK_S
    assert says in r.error["message"] and r.error["error"] == "config_invalid" and r.error["line"] == 4


# Each passes its own probes in about 0.1 s of CPU (a repetition of a repetition, bounded by the literal tail);
# a thousand of them would have cost a thousand times that to check, on the controller for an API token holder.
COSTLY = "(?:\\d+\\.)+\\d+x{}"


def test_a_job_files_patterns_share_one_budget_to_check(pico, tmp_path):
    many = ", ".join(f"'{COSTLY.format(i)}'" for i in range(120))
    started = time.monotonic()
    r = pico.fails("job", "check", job_file(tmp_path, STEP + f"[triage]\nignore = [{many}]\n"), code=5, timeout=120)
    assert time.monotonic() - started < SLOW_TO_CHECK_S
    assert f"take more than {patterns.FILE_PROBES_S:g} s of CPU to check in all" in r.error["message"], r.error
    assert "triage.ignore[" in r.error["message"]  # the key where the budget ran out
    same = ", ".join(f"'{COSTLY.format(7)}'" for _ in range(120))  # one pattern 120 times: probed once
    pico("job", "check", job_file(tmp_path, STEP + f"[triage]\nignore = [{same}]\n", "same.toml"))


def test_the_budget_is_the_files_and_a_passed_pattern_costs_nothing_again():
    import uuid as _uuid

    with patterns.probing("job file t.toml", seconds=0.0):
        with pytest.raises(patterns.PatternTooSlow, match="job file t.toml take more than 0 s"):
            patterns.check(f"never-seen-{_uuid.uuid4().hex}")
    patterns.check("seen-once")
    with patterns.probing("job file u.toml", seconds=0.0):
        patterns.check("seen-once")  # passed once in this process: free
    patterns.check(f"no-budget-{_uuid.uuid4().hex}")  # outside a file, only each pattern's own bound applies


def test_each_file_checked_has_its_own_budget_also_when_files_of_one_name_are_checked_at_once():
    """The controller's API checks job files in threads, many of one name (noop.toml): each check has its own
    budget (one object a file, never one shared by name: the second ``with`` reset the first's context and the
    API answered 500, and a name's budget ran out for every later file of that name)."""
    import uuid as _uuid

    with patterns.probing("job file same.toml") as budget:
        budget.left = 0.0  # as a file of many slow patterns leaves it
        with pytest.raises(patterns.PatternTooSlow):
            patterns.check(f"spent-{_uuid.uuid4().hex}")
    with patterns.probing("job file same.toml"):
        patterns.check(f"fresh-{_uuid.uuid4().hex}")  # a budget of its own, not the spent one of that name
    failed: list[BaseException] = []

    def check_files() -> None:
        try:
            for _ in range(200):
                with patterns.probing("job file noop.toml"):
                    patterns.check("seen-by-all")
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    threads = [threading.Thread(target=check_files) for _ in range(8)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave inside each ``with``, as a busy API's do
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert not failed, failed[:1]


def test_a_step_with_a_one_megabyte_word_is_checked_in_seconds(pico, tmp_path):
    word = "x" * (1 << 20)
    started = time.monotonic()
    ok = pico("job", "check", job_file(tmp_path, STEP.replace(" hi", f" {word}"), "word.toml"), "--json")
    assert time.monotonic() - started < SLOW_TO_CHECK_S  # 29-43 s before: shlex grows a word a character at a time
    assert ok.json()["steps"][0]["argv"] == ["serial", "send", "pico", word]
    started = time.monotonic()
    r = pico.fails("job", "check", job_file(tmp_path, STEP.replace("serial send pico hi", word), "cmd.toml"), code=5)
    assert time.monotonic() - started < SLOW_TO_CHECK_S
    assert "unknown panio command" in r.error["message"]


def test_words_are_split_as_shlex_splits_them():
    rnd = random.Random(45)
    for _ in range(50_000):
        text = "".join(rnd.choice("ab \t\n'\"\\$#") for _ in range(rnd.randint(0, 14)))
        try:
            expected = shlex.split(text)
        except ValueError:
            with pytest.raises(ValueError):
                split(text)
        else:
            assert split(text) == expected, text


def test_the_engine_refuses_a_recursive_pattern_before_it_fills_memory():
    """`(?R)` compiled under `regex` and its first search took 555 MB before a MemoryError (exit 70 in a capture)."""
    for compile_ in (patterns.compile_bytes, patterns.compile_text):
        with pytest.raises(patterns.UsageError, match="a recursive pattern"):
            compile_("x(?R)")
    with pytest.raises(patterns.UsageError, match="a recursive pattern"):
        patterns.compile_fuzzy("(?&name)", 1)


def test_the_engine_refuses_a_repetition_it_would_write_out_into_gigabytes():
    """`regex` unrolls counted repetitions as it compiles: (a{60000}){60000} was killed for its memory."""
    with pytest.raises(patterns.UsageError, match="repeats to 3,600,000,000 items"):
        patterns.compile_bytes("(a{60000}){60000}b")
    patterns.compile_bytes("a{65535}")  # one long count is fine: 17 MB


def test_a_sane_or_quadratic_pattern_passes_the_probes():
    for sane in (r"rtt=\S+", r"seq=\d+", r"Linux version (\S+)", r"\[[ \t]*\d+\.\d+\]", r"(?:[a-z]+,)*;",
                 r"^(a+)+$", r"(ab|ac)+d", r"[(]" * 100):
        patterns.check(sane)


def _recorded(store, result: str, log: str, ignore: list[str]) -> int:
    spec = {"steps": [], "inputs": {"job_sha256": "f1", "job_file": "# f1\n", "lab_sha256": "l1", "tags": [],
                                    "panio": "1.0"}, "triage": {"ignore": ignore}}
    job_id = store.create_job("boot", "b0", None, spec)
    store.record_steps(job_id, [(0, {"name": "boots", "command": "panio serial wait b0", "exit_status": 0,
                                     "status": "pass" if result == "passed" else "fail", "output": "ok"})])
    store.add_artifact(job_id, "serial-console.log", log)
    store.finish(job_id, "complete", result, "")
    return job_id


@pytest.fixture
def recorded(panio, tmp_path):
    """Jobs recorded with [triage] ignore patterns a job file may no longer carry (a database row, or a job from
    before `job check` refused them): returns {what: failed job id}."""
    from bench_agent.results.store import ResultStore

    panio("init")
    panio.env["PANIO_RESULTS_URL"] = f"sqlite:///{tmp_path / 'results.db'}"
    store = ResultStore(panio.env["PANIO_RESULTS_URL"])
    out = {}
    for what, ignore, log in (("exponential", ["(a|aa)+b"], "Linux 6.1\n" + "a" * 5000),
                              ("quadratic", ["(ab|ac)+d"], "Linux 6.1\n" + "ab" * 100_000)):
        _recorded(store, "passed", log, ignore)
        out[what] = _recorded(store, "failed", log.replace("6.1", "6.2"), ignore)
    return out


def test_job_triage_refuses_a_recorded_catastrophic_pattern_and_bounds_one_that_passed(panio, recorded):
    started = time.monotonic()
    r = panio.fails("job", "triage", str(recorded["exponential"]), code=2, timeout=120)
    assert time.monotonic() - started < SLOW_TO_CHECK_S
    assert f"job {recorded['exponential']}'s [triage] ignore" in r.error["message"]
    assert "'(a|aa)+b' backtracks catastrophically" in r.error["message"] and "fix [triage] ignore" in r.error["hint"]

    # (ab|ac)+d passes the probes (quadratic: milliseconds on 1,000 characters), not 200,000 of them: bounded
    r = panio.fails("job", "triage", str(recorded["quadratic"]), code=2, timeout=120)
    assert "'(ab|ac)+d' took more than 2 s" in r.error["message"]


def test_a_triage_page_answers_in_bounded_time_and_never_holds_up_another_reader(panio, tmp_path, recorded):
    read = "rd-" + uuid.uuid4().hex
    env = {**panio.env, "PANIO_DASHBOARD_TOKEN": "op-" + uuid.uuid4().hex, "PANIO_DASHBOARD_READ_TOKEN": read}
    dashboard = DashboardProc(env, tmp_path / "dashboard.log")

    def get(path: str) -> tuple[int, str, float]:
        request = urllib.request.Request(dashboard.url + path, headers={"Authorization": f"Bearer {read}"})
        try:
            with urllib.request.urlopen(request, timeout=120) as r:
                status, body = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode()
        return status, body, time.monotonic()

    try:
        assert get("/jobs")[0] == 200
        slow: dict = {}
        idle_cpu = cpu_s(dashboard.proc.pid)
        t = threading.Thread(target=lambda: slow.update(answer=get(f"/jobs/{recorded['quadratic']}/triage")))
        t.start()
        # once the dashboard is matching the slow pattern (it burns CPU) another reader asks for a page
        wait_for(lambda: cpu_s(dashboard.proc.pid) - idle_cpu >= 0.3 or slow, timeout_s=60, every_s=0.01)
        assert not slow, f"the triage answered before it was seen matching: {slow}"
        status, body, served = get("/jobs")
        assert status == 200 and "boot" in body
        t.join(120)
        assert not t.is_alive()
        status, body, ended = slow["answer"]
        assert served < ended, "the other reader was served only after the triage page"
        assert status == 422 and "(ab|ac)+d" in body and "took more than 2 s" in body

        status, body, _ = get(f"/jobs/{recorded['exponential']}/triage")
        assert status == 422 and "backtracks catastrophically" in body
        assert "Traceback" not in body and "Traceback" not in dashboard.log.read_text()
    finally:
        dashboard.stop()
