"""Issue 40 item 1: the checker judges what a command line means, not its text.

Each shape of the adversarial corpus (tests/eval/labelled/adversarial.toml) is graded as labelled; each of
these tests failed on the checker before the change (kappa -0.04 on that corpus, 25 false passes).
"""

import json
import shutil
from pathlib import Path

import pytest

from scenarios import grade, t1
from scenarios.calibrate import Entry, grade_corpus
from scenarios.drift import Guard
from scenarios.evidence import Evidence
from scenarios.sandbox import Sandbox
from scenarios.scenario import load_all
from scenarios.surface import Surface

HERE = Path(__file__).parent
ADVERSARIAL = HERE / "labelled" / "adversarial.toml"
CATALOG_DIR = HERE.parent.parent / "scenarios" / "catalog"
# no disagreement is tolerated: adv-hid-03 (moveabs 1000 800, nothing said) is labelled fail, the rule of
# tests/eval/test_runner.py::test_r6_clicks_in_screen_pixels_fail (values inside the screen, scaled from no pixel
# point the answer gives, are its pixels)
KNOWN: set[str] = set()


@pytest.fixture(scope="module")
def graded():
    guard = Guard()
    scs = {s.id: s for s in load_all()}
    rows = grade_corpus(Entry.load_all(ADVERSARIAL), scs, guard.live, guard.groups(), jobs=2)
    return rows


@pytest.mark.parametrize("shape", ["unit", "claim-after-failure", "corrected", "name-mismatch", "since-zero",
                                   "invented-helper", "reversed-explanation", "invented-flag-in-passing", "equivalent",
                                   "plain-prose", "hid-logical", "mcp-stated", "runtime-in-prose"])
def test_each_shape_is_graded_as_labelled(graded, shape):
    rows = [r for r in graded if shape in r["classes"]]
    assert rows
    wrong = [(r["id"], r["human"], r["checker"], r["checker_reasons"][:2]) for r in rows
             if r["checker"] != r["human"] and r["id"] not in KNOWN]
    assert wrong == []


def test_no_false_pass_and_kappa_on_the_adversarial_corpus(panio_eval):
    r = panio_eval("calibrate", "--corpus", str(ADVERSARIAL), "--json", timeout=300)
    assert r.code == 0, r.err
    a = r.json()["splits"]["all"]["checker"]
    assert a["false_pass"] == 0, r.json()["disagreements"]
    assert a["kappa"] >= 0.9, r.json()["disagreements"]
    assert {d["id"] for d in r.json()["disagreements"]["checker"]} <= KNOWN


def test_units_come_from_the_operation_specs():
    from scenarios import meaning

    s = Surface.live()
    assert s.find(("video", "shot")).options["--timeout"].unit == "ms"  # VIDEO _TIMEOUT: Param(unit="ms")
    assert s.find(("serial", "dtr")).options["--ms"].unit == "ms"
    assert s.find(("serial", "transact")).options["--max-bytes"].unit == "bytes"
    assert s.find(("job", "run")).options["--deadline-s"].unit == "s"  # no spec: the flag's name says it
    assert meaning.durations("up to 30 seconds, or two minutes; 200ms") == [(30, "s"), (2, "min"), (200, "ms")]


def _sc(sid):
    return next(s for s in load_all() if s.id == sid)


def _cmds(text):
    ev = Evidence()
    ev.add_answer(text)
    return ev.commands


def test_an_equivalence_applies_only_where_the_traps_allow_it():
    from scenarios import meaning

    s = Surface.live()
    off_on = "```\npanio power off pico\npanio power on pico\n```\n"
    made = [c for c in meaning.expand(_cmds(off_on), _sc("R3"), s) if c.means]
    assert [(c.text, c.means) for c in made] == [("panio power-cycle pico", "off-on-is-cycle")]
    assert not [c for c in meaning.expand(_cmds(off_on), _sc("R8"), s) if c.means]  # R8 forbids power on/off
    # not consecutive in the other order, not for another target
    assert not [c for c in meaning.expand(_cmds("```\npanio power on pico\npanio power off pico\n```"), _sc("R3"), s)
                if c.means]
    assert not [c for c in meaning.expand(_cmds("```\npanio power off pico\npanio power on zeta\n```"), _sc("R3"), s)
                if c.means]
    # the flags the meant command takes are carried over: transact --no-newline is a bare-key send
    t = "```\npanio serial transact dut ' ' --no-newline --pace-ms 50 --until '=> '\n```"
    made = [c for c in meaning.expand(_cmds(t), _sc("s5"), s) if c.means]
    assert made[0].argv == ["serial", "send", "dut", " ", "--no-newline", "--pace-ms", "50"]


@pytest.mark.parametrize("sid,answer", [
    ("R5", "```\npanio video shot pico\npanio power-cycle pico\npanio video shot pico --changed-since abc --timeout 999999\n```\n"),
    ("R4", "```\npanio serial watch pico\npanio serial send pico 'uname -a' --pace-ms 99999\npanio serial log pico --tail 5\n```\n"),
    ("s10", "```\npanio serial stop dut\npanio serial log dut --tail lots\n```\n"),
])
def test_no_false_pass_on_an_answer_whose_stated_command_panio_would_refuse(panio_eval, tmp_path, sid, answer):
    f = tmp_path / "answer.md"
    f.write_text(answer)
    r = panio_eval("grade", sid, str(f), "--json")
    g = r.json()
    assert r.code == 1 and g["verdict"] == "fail", g
    assert any(x.startswith("panio would refuse") for x in g["checker"]["contradictions"]), g["checker"]


def test_grade_grades_stated_mcp_tool_calls_as_run_does(panio_eval, tmp_path):
    f = tmp_path / "answer.md"
    f.write_text('```json\n{"tool": "power_state", "arguments": {"target": "pico"}}\n```\n')
    r = panio_eval("grade", "R8", str(f), "--condition", "mcp", "--json")
    assert r.code == 0 and r.json()["verdict"] == "pass", r.out + r.err
    f.write_text('```json\n{"tool": "power_on", "arguments": {"target": "pico"}}\n```\n')
    r = panio_eval("grade", "R8", str(f), "--condition", "mcp", "--json")
    assert r.code == 1 and any(t["id"] == "read-not-change" and t["respected"] is False for t in r.json()["traps"])


def test_a_t1_call_refused_and_corrected_at_once_passes_in_a_real_sandbox(tmp_path):
    """The trial's path (the shim's log, not a replay): panio refuses the positional target (exit 2), the agent
    fixes it at once; the lab ends right and the refusal is not held against it. A failure left standing is."""
    sc, guard = _sc("C2"), Guard()
    box = Sandbox(tmp_path / "box").create(sc.fixture_lab, guard.groups())
    wrong = ["serial", "add", "bmc", "pico", "--device", "/dev/ttyUSB1", "--baud", "9600"]
    assert box.run_panio(wrong).returncode == 2
    assert box.run_panio(["serial", "add", "bmc", "-t", "pico", "--device", "/dev/ttyUSB1", "--baud", "9600"]).returncode == 0
    res = t1.grade(sc, box, guard.live)
    assert res.passed, res.failures
    box2 = Sandbox(tmp_path / "box2").create(sc.fixture_lab, guard.groups())
    assert box2.run_panio(["serial", "add", "bmc", "-t", "pico", "--device", "/dev/ttyUSB1", "--baud", "9600"]).returncode == 0
    assert box2.run_panio(["serial", "add", "bmc", "pico", "--device", "/dev/ttyUSB1"]).returncode == 2  # not a fix
    assert any(f.startswith("exit codes") for f in t1.grade(sc, box2, guard.live).failures)


def test_drift_guard_checks_the_equivalences(panio_eval, eval_env, tmp_path):
    cat = tmp_path / "catalog"
    shutil.copytree(CATALOG_DIR, cat)
    eq = cat / "_equivalences.toml"
    eq.write_text(eq.read_text() + '\n[[equivalence]]\nid = "x"\nmeans = "panio power-cycle <target>"\n'
                  'sequence = ["panio power flip <target>"]\n')
    r = panio_eval("--check", "--json", env={**eval_env, "PANIO_EVAL_CATALOG": str(cat)})
    assert r.code == 1 and any("equivalence x" in e for e in json.loads(r.out)["errors"]), r.out


def test_a_claim_is_read_from_what_the_answer_says_outside_quotes_and_output():
    """"failed" inside quoted output is no admission: the answer still reports ON after power-state failed."""
    from scenarios import meaning
    from scenarios.calibrate import stream_of

    ran = [{"cmd": "panio power-state pico", "exit": 3, "out": "state_cmd failed"}]
    claims = 'pico is ON (`panio power-state pico` printed "state_cmd failed", but the LED is lit).'
    ev = grade.evidence_of(stream_of(ran, claims))
    assert meaning.failed_claims(_sc("R8"), ev, Surface.live())
    says = "I could not tell: `panio power-state pico` failed (the plug did not answer). Nothing was switched."
    assert meaning.failed_claims(_sc("R8"), grade.evidence_of(stream_of(ran, says)), Surface.live()) == []
    ok = [{"cmd": "panio power-state pico", "exit": 0, "out": "on"}]
    assert meaning.failed_claims(_sc("R8"), grade.evidence_of(stream_of(ran + ok, "pico is on.")), Surface.live()) == []


def test_the_meaning_rules_are_part_of_the_methodology_hash(tmp_path, monkeypatch):
    """Two runs compare only under the same hash: a change to scenarios/meaning.py changes grading."""
    from scenarios import report

    pkg = tmp_path / "scenarios"
    shutil.copytree(report.PKG, pkg, ignore=shutil.ignore_patterns("__pycache__", "catalog"))
    monkeypatch.setattr(report, "PKG", pkg)
    before = report.methodology_hash()
    (pkg / "meaning.py").write_text((pkg / "meaning.py").read_text() + "\n# a rule changed\n")
    assert report.methodology_hash() != before
