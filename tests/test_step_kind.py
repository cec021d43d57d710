"""A job step's kind is read once (``bench_agent.jobs.steps.kind``), from the runtime command its command line
compiled to, never from its words: the lab probe, the power watch and the health gate all ask it."""

from __future__ import annotations

import os
from pathlib import Path

from jobhelp import job_file

from bench_agent.jobs import lab_probe
from bench_agent.jobs.steps import kind, reads_console, switches_power


def _planned(panio, tmp_path, runs: list[str]) -> list[dict]:
    from controller.jobs import spec
    from controller.lab import load

    body = 'target = "pico"\n' + "".join(f'[[steps]]\nrun = "{run}"\n' for run in runs)
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
    failed = {"argv": ["power", "off", "pico"], "run": {"command": "system.fail", "opts": {}}}
    deferred = {"argv": ["serial", "wait", "pico", "--iface", "${i}"], "run": {"deferred": ["serial", "wait"]}}
    assert switches_power(failed) is None and not lab_probe.expects_off([failed], 1)
    assert kind(deferred) is None and not reads_console(deferred)  # known once it is planned, as it runs


def test_a_whole_variable_gets_the_type_its_option_says_it_has(panio, tmp_path):
    """`${var}` as a whole option value is typed as the option's own type says (``kind``), not by trying it."""
    from controller.cli.common import number, spec_type
    from controller.jobs.spec import _kind_of

    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/null")
    panio("video", "set", "-t", "pico", "--device", "/dev/video9")
    runs = ["panio serial status pico", "panio serial wait pico --epoch ${e} --since 0 --timeout-ms ${e}",
            "panio video wait pico --text x --threshold ${e}"]
    body = 'target = "pico"\n[[steps]]\nrun = "%s"\ncapture = { e = "(1)" }\n' % runs[0]
    body += "".join(f'[[steps]]\nrun = "{run}"\n' for run in runs[1:])
    from controller.jobs import spec
    from controller.lab import load

    os.environ["PANIO_STATE_DIR"] = panio.env["PANIO_STATE_DIR"]
    job = spec.load(Path(job_file(tmp_path, body)))
    steps = spec.plan_steps(spec.compile_steps(job), load(str(panio.lab)), "pico")
    assert steps[1]["run"]["typed"] == {"epoch": "int", "timeout_ms": "int"}
    assert steps[2]["run"]["typed"] == {"threshold": "float"}
    assert _kind_of(number(float, 0)) == "float" and _kind_of(spec_type("video.wait", "threshold")) == "float"
