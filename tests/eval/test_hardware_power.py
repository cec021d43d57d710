"""The hardware tier asks only for what a scenario needs (issue 40 item 4): R4 and s11 type into a shell, so a
board that cannot be switched off and on (only a cycle hook, or no power control at all) gets the command sent
to its running shell instead of a `power off`/`power on` it cannot do; s2's job waits for the boot lines it
reads instead of reading the log before U-Boot has printed."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scenarios import hardware
from scenarios.drift import Guard

SERIAL = '[targets.zeta]\n[[targets.zeta.serial]]\nname = "console"\ndevice = "/dev/null"\n'
PROFILE = "[targets.zeta.profile]\nprompt = 'zeta> $'\n"


def _job(panio_eval, tmp_path, power: str, sid: str) -> dict:
    lab = tmp_path / "zeta.toml"
    lab.write_text(SERIAL + power + PROFILE)
    r = panio_eval("hardware", "--lab", str(lab), "--target", "zeta", "--print-job", sid)
    assert r.code == 0, r.err
    return tomllib.loads(r.out)


@pytest.mark.parametrize("power", ['[targets.zeta.power]\ncycle_cmd = "true"\n', ""], ids=["cycle-only", "no-power"])
@pytest.mark.parametrize("sid", ["R4", "s11"])
def test_a_board_that_cannot_be_switched_off_and_on_gets_the_command_in_its_running_shell(panio_eval, tmp_path,
                                                                                         power, sid):
    runs = [st["run"] for st in _job(panio_eval, tmp_path, power, sid)["steps"]]
    assert not any(re.search(r"panio power(-cycle| off| on)\b", r) for r in runs), runs
    assert runs[:4] == ["panio serial watch ${target}", "panio serial status ${target}",
                        "panio serial send ${target} ''",
                        "panio serial wait ${target} --epoch ${boot_epoch} --since ${boot_cursor} --pattern 'zeta> $' "
                        "--timeout-ms 10000"]
    assert any(r.startswith("panio serial send ${target} ") and r.endswith(("'uname -a'", "reboot")) for r in runs[4:])


def test_a_board_with_on_and_off_hooks_still_boots_to_a_known_state(panio_eval, tmp_path):
    power = '[targets.zeta.power]\non_cmd = "true"\noff_cmd = "true"\ncycle_cmd = "true"\n'
    runs = [st["run"] for st in _job(panio_eval, tmp_path, power, "R4")["steps"]]
    assert runs[1:4] == ["panio power off ${target}", "panio serial status ${target}", "panio power on ${target}"]


def test_r4_on_a_cycle_only_board_and_s2_waiting_for_its_boot_run_for_real(panio_eval, eval_env, tmp_path):
    """A simulated board whose lab has only a cycle hook, booting slowly (its U-Boot line a second after
    power-on). s2 starts from a board that is off and a log that holds no boot: it captures, power-cycles and
    reads the log once the boot lines came (read at once, the log had only the banner). Then R4 types into the
    shell that board booted to, asking for no power at all."""
    if hardware.missing(Guard(), real_bench=False):
        pytest.skip("pending here: job run or panio-sim missing")
    sim = str(hardware.sim_exe())
    panio = str(Path(sys.executable).parent / "panio")
    bench = tmp_path / "bench"
    up = subprocess.run([sim, "up", "--dir", str(bench), "--boards", "1", "--boot-s", "11", "--countdown-s", "0.3",
                         "--no-screen"], env=eval_env, capture_output=True, text=True, timeout=120)
    lab = bench / "lab.toml"

    def pan(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([panio, "--lab", str(lab), *args], env=eval_env, capture_output=True, text=True,
                              timeout=timeout)

    try:
        assert up.returncode == 0, up.stderr
        off = pan("power", "off", "board0")
        assert off.returncode == 0, off.stderr
        text = lab.read_text()
        lab.write_text("\n".join(line for line in text.splitlines() if not line.startswith(("on_cmd", "off_cmd"))) + "\n")
        power = tomllib.loads(lab.read_text())["targets"]["board0"]["power"]
        assert "cycle_cmd" in power and "on_cmd" not in power and "off_cmd" not in power
        r = panio_eval("hardware", "--lab", str(lab), "--target", "board0", "--scenario", "s2", "--json", timeout=300)
        assert r.code == 0 and r.json()[0]["status"] == "pass", r.out + r.err
        assert pan("serial", "watch", "board0").returncode == 0
        status = json.loads(pan("serial", "status", "board0").stdout)
        booted = pan("serial", "wait", "board0", "--epoch", str(status["epoch"]), "--since", "0", "--pattern",
                     re.escape("root@sim:~# "), "--timeout-ms", "40000", timeout=60)
        assert booted.returncode == 0, booted.stdout + booted.stderr  # the board sits at its shell
        r = panio_eval("hardware", "--lab", str(lab), "--target", "board0", "--scenario", "R4", "--json", timeout=300)
        assert r.code == 0 and r.json()[0]["status"] == "pass", r.out + r.err
        log = pan("serial", "log", "board0", "--tail", "400").stdout
        assert "uname -a" in log and "Linux sim 6.1.0-sim" in log and log.count("U-Boot 2024.01-sim") >= 1
    finally:
        pan("daemons", "stop", "--all", "--force")
        subprocess.run([sim, "down", "--dir", str(bench)], env=eval_env, capture_output=True, timeout=60)
