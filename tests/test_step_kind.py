"""A job step's kind is read once (``bench_agent.jobs.steps.kind``), from the runtime command its command line
compiled to, never from its words: the lab probe, the power watch and the health gate all ask it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jobhelp import job_file

from bench_agent.errors import UsageError
from bench_agent.jobs import lab_probe
from bench_agent.jobs.steps import bind, kind, reads_console, switches_power


def _planned(panio, tmp_path, runs: list[str]) -> list[dict]:
    return _planned_body(panio, tmp_path, 'target = "pico"\n' + "".join(f'[[steps]]\nrun = "{run}"\n' for run in runs))


def _planned_body(panio, tmp_path, body: str) -> list[dict]:
    from controller.jobs import spec
    from controller.lab import load

    os.environ["PANIO_STATE_DIR"] = panio.env["PANIO_STATE_DIR"]
    job = spec.load(Path(job_file(tmp_path, body)))
    return spec.plan_steps(spec.compile_steps(job), load(str(panio.lab)), "pico")


def test_a_steps_kind_is_the_command_it_compiled_to(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/null")
    panio("power", "set", "-t", "pico", "--on-cmd", "true", "--off-cmd", "true")
    steps = _planned(panio, tmp_path, ["panio power off pico", "panio power-cycle pico", "panio power-state pico",
                                       "panio serial watch pico", "panio serial status pico", "panio ping pico"])
    assert [kind(s) for s in steps] == ["power.off", "power.cycle", "power.state", "serial.watch", "serial.status",
                                        "system.ping"]
    assert [switches_power(s) for s in steps] == ["off", "cycle", None, None, None, None]
    assert [reads_console(s) for s in steps] == [False, False, False, True, True, False]
    assert lab_probe.expects_off(steps, 1) and not lab_probe.expects_off(steps, 2)  # the cycle switched it on
    assert not lab_probe.expects_off(steps[2:], 4)


def test_the_words_of_a_step_do_not_decide_its_kind():
    """A step's ``argv`` is what the user wrote; what it runs is its plan. A step whose words read `power off`
    but whose plan failed (the target has no power: ``system.fail``) switched nothing off."""
    failed = {"argv": ["power", "off", "pico"], "run": {"op": "system.fail", "args": {}}}
    deferred = {"argv": ["serial", "wait", "pico", "--iface", "${i}"], "run": {"deferred": ["serial", "wait"]}}
    assert switches_power(failed) is None and not lab_probe.expects_off([failed], 1)
    assert kind(deferred) is None and not reads_console(deferred)  # known once it is planned, as it runs


def test_a_step_compiles_to_its_operation_and_arguments_and_no_type_travels_beside_them(panio, tmp_path):
    """`${var}` as a whole argument stays a placeholder in ``args``; the payload says no type for it (the
    operation's spec does, when the step runs: ``bind``)."""
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/null")
    panio("video", "set", "-t", "pico", "--device", "/dev/video9")
    runs = ["panio serial status pico", "panio serial wait pico --epoch ${e} --since 0 --timeout-ms ${e}",
            "panio video wait pico --text x --threshold ${e}"]
    body = 'target = "pico"\n[[steps]]\nrun = "%s"\ncapture = { e = "(1)" }\n' % runs[0]
    body += "".join(f'[[steps]]\nrun = "{run}"\n' for run in runs[1:])
    steps = _planned_body(panio, tmp_path, body)
    assert [set(s["run"]) for s in steps] == [{"op", "args"}] * 3
    assert steps[1]["run"]["op"] == "serial.wait" and steps[1]["run"]["args"]["timeout_ms"] == "${e}"
    assert bind(steps[1]["run"], {"e": "1500"})["timeout_ms"] == 1500
    assert bind(steps[1]["run"], {"e": "1500"})["epoch"] == 1500
    assert bind(steps[2]["run"], {"e": "0.5"})["threshold"] == 0.5
    with pytest.raises(UsageError, match=r"--epoch got '1.5' from a captured variable: it must be a whole number"):
        bind(steps[1]["run"], {"e": "1.5"})
    with pytest.raises(UsageError, match=r"--threshold got 'high' from a captured variable: it must be a number"):
        bind(steps[2]["run"], {"e": "high"})


def test_a_captured_number_for_a_commands_own_option_is_refused_by_job_check_and_run(panio, tmp_path):
    """`ping --count ${n}`: --count is ping's own option, not a parameter of system.ping's spec, so nothing would
    make the captured text a number when the step runs. `job check` says so (it plans the steps as a run would),
    and a run refuses it before the job is created; both name the file, the step and the flag."""
    panio("init")
    panio("target", "add", "pico")
    body = ('target = "pico"\n[[steps]]\nrun = "ping pico"\ncapture = { n = "seq=(1)" }\n'
            '[[steps]]\nrun = "ping pico --count ${n}"\n')
    path = job_file(tmp_path, body)
    for verb in ("check", "run"):
        r = panio.fails("job", verb, path, code=2)
        assert f"{path}: step 2: `--count ${{n}}`: --count is the command's own option, not a parameter of " \
               "system.ping" in r.err, (verb, r.err)
        assert r.error["step"] == 2 and r.error["argument"] == "count"
    assert panio("job", "list", "--json").json() == []  # nothing was created
    from controller.cli.common import number, positive_int
    from controller.jobs.spec import _kind_of

    assert _kind_of(positive_int) == "int" and _kind_of(number(float, 0)) == "float"  # what makes it a number


def test_a_payload_of_the_previous_form_still_runs(panio, tmp_path):
    """A job queued by the previous panio (``run = {"command", "opts", "typed"}``, kept in the database or a
    sealed message) is the same step: its kind, its arguments and its run through the job runner."""
    from bench_agent.jobs.runner import JobRunner
    from bench_agent.jobs.steps import normalised
    from bench_agent.leases.file_store import FileLeaseStore
    from bench_agent.results.store import ResultStore

    old = {"command": "system.ping", "opts": {"target": "pico", "host": None, "count": 2, "interval_s": 0.0,
                                             "json": False}, "typed": {}}
    assert normalised(old) == {"op": "system.ping", "args": old["opts"]}
    assert kind({"run": {"command": "power.cycle", "opts": {}}}) == "power.cycle"
    assert normalised({"deferred": ["ping", "${t}"]}) == {"deferred": ["ping", "${t}"]}
    captured = {"command": "serial.wait", "opts": {"timeout_ms": "${t}"}, "typed": {"timeout_ms": "int"}}
    assert bind(normalised(captured), {"t": "250"}) == {"timeout_ms": 250}  # the spec types it, as typed did

    os.environ["PANIO_STATE_DIR"] = panio.env["PANIO_STATE_DIR"]
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    step = {"name": "ping", "argv": ["ping", "pico", "--count", "2"], "command": "panio ping pico --count 2",
            "timeout_s": 30, "expect_exit": [0], "expect_output": "seq=2", "capture": {}, "run": old}
    job_id = store.create_job("old", "pico", None, {})
    payload = {"job_id": job_id, "name": "old", "target": "pico", "steps": [step], "timeout_s": None}
    out = JobRunner(store, FileLeaseStore(str(tmp_path / "leases")), "t").run(payload)
    assert (out["health"], out["result"]) == ("complete", "passed"), out
    assert "pico (local): seq=2" in store.job(job_id)["steps"][0]["output"]
