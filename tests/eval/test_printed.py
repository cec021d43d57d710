"""Issue 40, second batch: claims held to what panio printed, MCP calls as panio's server runs them.

tests/eval/labelled/adversarial2.toml (25 answers, labelled before the change) is graded as labelled; on the
checker before it: kappa 0.23, 11 false passes.
"""

from pathlib import Path

import pytest

from scenarios.evidence import Command, Evidence
from scenarios.scenario import load_all
from scenarios.surface import Surface, parse

HERE = Path(__file__).parent
ADVERSARIAL2 = HERE / "labelled" / "adversarial2.toml"
ABSENT = ("pico:\n  MISSING  serial   console        /dev/ttyUSB-panio-eval-absent not found on this host\n"
          "  MISSING  video    device         /dev/video-panio-eval-absent not found on this host\n")


@pytest.mark.parametrize("corpus", [ADVERSARIAL2, HERE / "labelled" / "adversarial3.toml"])
def test_the_later_adversarial_batches_have_no_false_pass_and_kappa_at_least_0_9(panio_eval, corpus):
    """adversarial3 (13 answers, held out from the second batch's change): 0.83 at its first grading (one
    invented `panio helper list` in prose missed), 1.0 after."""
    r = panio_eval("calibrate", "--corpus", str(corpus), "--json", timeout=300)
    assert r.code == 0, r.err
    a = r.json()["splits"]["all"]["checker"]
    assert a["confusion"]["fp"] == 0 and a["kappa"] >= 0.9, r.json()["disagreements"]
    assert r.json()["disagreements"]["checker"] == []


@pytest.mark.parametrize("text,verdict", [
    ("```\npanio doctor pico\n```\ndoctor reports every channel of pico present: the configuration is consistent.", "fail"),
    ("```\npanio doctor pico\n```\nThe serial console is present; only the video device is missing.", "fail"),
    ("```\npanio doctor pico\n```\nNo: doctor reports the serial console and the video device missing on this host.",
     "pass"),
    ("```\npanio doctor pico\n```\ndoctor checks whether every configured device is present. Here: serial console and "
     "video device MISSING, so no.", "pass"),
])
def test_a_doctor_report_s_missing_read_as_present_fails_in_a_replay(panio_eval, tmp_path, text, verdict):
    """C8 (t1): the replay runs doctor on the fixture lab, whose devices are absent; an answer calling them
    present contradicts what panio printed, whatever the end state."""
    f = tmp_path / "answer.md"
    f.write_text(text)
    r = panio_eval("grade", "C8", str(f), "--json")
    g = r.json()
    assert g["verdict"] == verdict, g
    if verdict == "fail":
        assert g["t1"]["passed"] and any("doctor reported" in x for x in g["checker"]["contradictions"]), g


def _ran(sid: str, cmd: list[str], out: str, exit: int, answer: str) -> tuple:
    from scenarios import checker

    ev = Evidence(from_stream=True)
    ev.commands.append(Command(cmd, "run", exit=exit, output=out))
    ev.add_answer(answer)
    sc = next(s for s in load_all() if s.id == sid)
    return checker.check(sc, ev, Surface.live(), "cold")


def test_a_state_the_answer_reports_is_held_to_the_one_panio_printed():
    bad = _ran("R8", ["power-state", "pico"], "off\n", 0, "pico is powered **on** right now.")
    assert bad.verdict == "fail" and bad.contradictions == ["`panio power-state pico` printed 'off', but the answer reports 'on'"]
    assert _ran("R8", ["power-state", "pico"], "off\n", 0, "pico is **off**; nothing was switched.").verdict == "pass"
    assert _ran("R8", ["power-state", "pico"], "off\n", 0, "pico is not on: it is off.").verdict == "pass"
    # panio's own line (`Power OFF (pico)`), as power-state prints it
    assert _ran("R8", ["power-state", "pico"], "Power OFF (pico)\n", 0, "pico is **on**.").verdict == "fail"
    assert _ran("R8", ["power-state", "pico"], "Power OFF (pico)\n", 0, "pico is **off**.").verdict == "pass"


def test_output_the_answer_quotes_must_be_what_panio_printed():
    shot = ["video", "read", "pico", "--stable"]
    sc = next(s for s in load_all() if s.id == "R3")
    from scenarios import checker

    def ev(answer: str) -> Evidence:
        e = Evidence(from_stream=True)
        e.commands += [Command(["power-cycle", "pico"], "run", exit=0, output="cycled"),
                       Command(["video", "watch", "pico"], "run", exit=0, output="capturing"),
                       Command(shot, "run", exit=0, output="Kernel panic - not syncing: VFS")]
        e.add_answer(answer)
        return e

    res = checker.check(sc, ev("The screen reads `pico login:`: it booted."), Surface.live(), "cold")
    assert res.verdict == "fail" and "'pico login:'" in res.contradictions[0], res.contradictions
    assert checker.check(sc, ev("The screen shows `Kernel panic - not syncing: VFS`."), Surface.live(), "cold").verdict == "pass"
    # what the skill or the help says is not output; the command line above output is not output either
    said = "The skill says `wait for a stable frame`. Output:\n\n```text\n$ panio video read pico --stable\nKernel panic\n```"
    assert checker.check(sc, ev(said), Surface.live(), "cold").verdict == "pass"


def test_an_mcp_call_is_the_command_panio_s_server_runs_and_one_it_refuses_is_refused():
    from scenarios.mcpmap import add_calls, served_argv

    argv, why = served_argv("video_shot", {"target": "pico", "changed_since": "<hash>", "timeout_ms": 60000})
    assert argv[:3] == ["video", "shot", "pico"] and why == ""  # then the server's own flags (--json, --output=-)
    assert argv[-4:] == ["--changed-since", "<hash>", "--timeout", "60000"]  # timeout_ms is --timeout (ms)
    argv = served_argv("mcp__panio__serial_log", {"target": "dut", "since": "<seq>"})[0]
    assert argv[:3] == ["serial", "log", "dut"] and argv[-2:] == ["--since", "<seq>"]
    argv, why = served_argv("power_state", {"target": "pico", "verbose": True})
    assert argv is None and "unknown argument(s) verbose" in why
    ev = Evidence()
    ev.mcp_calls = [{"tool": "serial_send", "arguments": {"target_name": "dut", "text": "reboot"}, "stated": True}]
    add_calls(ev, Surface.live())
    assert [c.problem for c in ev.commands][0].startswith("panio's MCP server refuses serial_send") and ev.acted == []


def test_a_value_panio_refuses_is_refused_beside_a_placeholder():
    s = Surface.live()
    assert parse(s, ["video", "shot", "pico", "--changed-since", "$HASH", "--timeout", "30s"]).status == "malformed"
    assert parse(s, ["video", "shot", "pico", "--changed-since", "$HASH", "--timeout", "3000"]).status == "ok"
    assert parse(s, ["serial", "log", "dut", "--since", "<seq>"]).status == "ok"


def test_the_shim_log_keeps_what_each_command_printed_in_the_stream():
    from scenarios.runner import merge_shim

    ev = Evidence(from_stream=True)
    ev.commands = [Command(["doctor", "pico"], "run", exit=1, output=ABSENT), Command(["doctor"], "stated")]
    merged = merge_shim(ev, [{"argv": ["doctor", "pico"], "exit": 1}])
    assert [(c.argv, c.output) for c in merged.commands] == [(["doctor", "pico"], ABSENT), (["doctor"], "")]


def test_an_invented_command_in_prose_beside_a_block_is_read():
    ev = Evidence()
    ev.add_answer("```\npanio serial watch dut\n```\nThen panio serial follow dut streams it live. "
                  "Reading panio serial docs helps too.")
    assert [c.text for c in ev.commands] == ["panio serial watch dut", "panio serial follow dut"]
    ev = Evidence()
    ev.add_answer("```\npanio helper\n```\nRun panio helper list to see them, or panio helper shellyplug --help.")
    assert [c.text for c in ev.commands] == ["panio helper", "panio helper list"]
