"""Hardware tier: references become job files; pending until `job run` and `panio-sim` exist."""

import re
import shlex
import tomllib

from scenarios import hardware
from scenarios.drift import Guard
from scenarios.scenario import load_all
from scenarios.surface import Surface, planned_spec


def test_job_files_are_valid_and_every_step_parses_against_the_announced_surface():
    surface = Surface.live().overlay(planned_spec())
    with_hw = [s for s in load_all() if s.hardware]
    assert {s.id for s in with_hw} >= {"R4", "R8", "s2", "s4", "s11"}
    for sc in with_hw:
        job = tomllib.loads(hardware.job_toml(sc))
        assert job["name"] == f"eval-{sc.id}" and job["steps"]
        # the physical outcome is graded: a regex on a step's output, or a bounded wait for a pattern
        assert any("expect_output" in st or "--pattern" in st["run"] for st in job["steps"]), sc.id
        for st in job["steps"]:
            argv = shlex.split(re.sub(r"\$\{(\w+)\}", lambda m: "board0" if m.group(1) == "target" else "1", st["run"]))[1:]
            assert surface.parse(argv).ok, (sc.id, st["run"])


def test_hardware_tier_is_pending_with_the_missing_pieces_named(panio_eval):
    guard = Guard()
    need = hardware.missing(guard, real_bench=False)
    r = panio_eval("hardware", "--scenario", "R8", "s11", "--json", timeout=300)
    assert r.code == 0, r.out + r.err  # once job run and panio-sim exist, these run for real and must pass
    assert [row["scenario"] for row in r.json()] == ["R8", "s11"]
    for row in r.json():
        if need:
            assert row["status"] == "pending" and all(n in row["detail"][0] for n in need)
        else:
            assert row["status"] == "pass", row
    r = panio_eval("hardware", "--lab", "x.toml")
    assert r.code == 2 and "go together" in r.err


def test_a_failed_hardware_job_leaves_no_capture_daemon_behind(tmp_path):
    import copy
    import dataclasses

    from bench_agent.daemons import _daemon_processes

    sc = next(s for s in load_all() if s.id == "s11")
    hw = copy.deepcopy(sc.hardware)
    hw["steps"][2]["run"] = hw["steps"][2]["run"].replace("restarting system", "no such reply")
    hw["steps"][2]["run"] = hw["steps"][2]["run"].replace("--timeout-ms 10000", "--timeout-ms 500")
    broken = dataclasses.replace(sc, hardware=hw)
    if hardware.missing(Guard(), real_bench=False):
        return  # pending here: nothing runs, nothing to leak
    import os
    import signal

    try:
        result = hardware.run(broken, tmp_path / "run", Guard())
        assert result.status == "fail", result  # the job failed midway and skipped its own `serial stop`
        assert _daemon_processes(tmp_path / "run" / "state") == {}
    finally:
        for pid in _daemon_processes(tmp_path / "run" / "state"):
            os.kill(pid, signal.SIGKILL)
