"""Hardware tier: references become job files run on the simulated board; pending until `job run` and
`panio-sim` exist. R1 (netboot on the QEMU board) runs in test_hardware_netboot.py."""

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scenarios import hardware
from scenarios.drift import Guard
from scenarios.scenario import load_all
from scenarios.surface import Surface, planned_spec


def test_job_files_are_valid_and_every_step_parses_against_the_announced_surface():
    surface = Surface.live().overlay(planned_spec())
    with_hw = [s for s in load_all() if s.hardware]
    assert {s.id for s in with_hw} >= {"R1", "R3", "R4", "R5", "R6", "R8", "s2", "s4", "s11"}
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

    from bench_agent.daemons.registry import _daemon_processes

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


def test_every_hardware_job_is_accepted_by_panio_job_check(tmp_path, eval_env):
    """Each step is a runtime command a job may run (a lab edit or `panio skill` would be refused)."""
    lab = tmp_path / "lab.toml"
    lab.write_text('[targets.board0]\n[targets.qemu0]\n')
    for sc in [s for s in load_all() if s.hardware]:
        job = tmp_path / f"{sc.id}.toml"
        job.write_text(hardware.job_toml(sc))
        _, target = hardware.sim_args(sc)
        r = subprocess.run([str(Path(sys.executable).parent / "panio"), "--lab", str(lab), "job", "check", str(job),
                            "--target", target], capture_output=True, text=True, env=eval_env, timeout=60)
        assert r.returncode == 0, (sc.id, r.stderr)


def test_a_scenario_shapes_its_simulated_bench():
    by_id = {s.id: s for s in load_all()}
    assert hardware.sim_args(by_id["R8"]) == (["--boards", "1", "--boot-s", "0.3", "--countdown-s", "0.3"], "board0")
    argv, target = hardware.sim_args(by_id["R6"])  # time to stop autoboot and open setup by HID
    assert argv[argv.index("--countdown-s") + 1] == "3.0" and target == "board0"
    argv, target = hardware.sim_args(by_id["R1"])  # the QEMU board alone, booting from panio's TFTP server
    assert argv[:2] == ["--boards", "0"] and argv[-2:] == ["--qemu", "--qemu-netboot"] and target == "qemu0"
    import dataclasses

    typo = dataclasses.replace(by_id["R6"], hardware={**by_id["R6"].hardware, "sim": {"countdwn_s": 3}})
    with pytest.raises(ValueError, match="countdwn_s"):
        hardware.sim_args(typo)


def test_r3_r5_r6_run_for_real_on_the_simulated_board(panio_eval):
    """R3 reads the boot screen after a power-cycle, R5 blocks until the frame changes, R6 stops autoboot,
    opens setup, clicks Network boot and saves; the next boot says so on the console."""
    if hardware.missing(Guard(), real_bench=False):
        pytest.skip("pending here: job run or panio-sim missing")
    r = panio_eval("hardware", "--scenario", "R3", "R5", "R6", "--json", timeout=400)
    rows = {row["scenario"]: row for row in r.json()}
    assert r.code == 0 and set(rows) == {"R3", "R5", "R6"}, r.out + r.err
    assert all(row["status"] == "pass" for row in rows.values()), rows
