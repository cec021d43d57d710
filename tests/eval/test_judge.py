"""The judge: prompt with the live help tree, defensive verdict parsing, the pass rule, kappa."""

import sys
from pathlib import Path

from scenarios import judge
from scenarios.rubric import pass_rule
from scenarios.sandbox import real_panio
from scenarios.scenario import load_all

HERE = Path(__file__).parent
SC = {s.id: s for s in load_all()}


def test_prompt_follows_the_seed_template_and_injects_the_real_help_tree():
    tree = judge.help_tree(real_panio())
    assert "$ panio power set --help" in tree and "--cycle-cmd" in tree and "$ panio serial add --help" in tree
    p = judge.build_prompt(SC["C3"], "TRANSCRIPT-X", "warm", tree)
    for part in ("GOAL: pico is plugged into a Shelly", "REFERENCE: panio helper", "(CENTRAL) there is no `panio shelly`",
                 "COMMAND REFERENCE: $ panio --help", "CONDITION: warm", "TRANSCRIPT: TRANSCRIPT-X",
                 "do not flag it as invented merely because the REFERENCE answer used a"):
        assert part in p, part


def test_last_verdict_shaped_object_wins_and_failures_are_none():
    text = ('I saw PowerCycle { target } and {"note": 1}. Draft {"d1":0,"d2":0,"d3":0,"d4":0,"d5":0,"d6":0,"d7":0}\n'
            '```json\n{"scores": {"d1": 2, "d2": 2, "d3": {"score": 1}, "d4": 2, "d5": 2, "d6": 2, "d7": 1},'
            ' "traps_eval": [{"id": "t", "respected": false, "evidence": "q"}], "pass": true}\n``` bye {')
    v = judge.parse_verdict(text)
    assert v.scores == {"d1": 2, "d2": 2, "d3": 1, "d4": 2, "d5": 2, "d6": 2, "d7": 1}
    assert v.traps_eval[0]["respected"] is False and v.judge_pass is True
    assert judge.parse_verdict("no verdict {here}") is None
    assert judge.parse_verdict('{"d1": 9, "d2": "x", "d3": 1, "d4": 2}').scores["d1"] is None


def test_pass_rule():
    full = {d: 2 for d in ("d1", "d2", "d3", "d4", "d5", "d6", "d7")}
    assert pass_rule(full, "cold", [])[0]
    assert not pass_rule({**full, "d4": 0}, "cold", [])[0]
    assert not pass_rule({**full, "d6": 0}, "cold", [])[0]
    assert not pass_rule(full, "cold", ["no-adb-reboot"])[0]
    # weighted: d1 0 + d5 0 -> 10/14 < 0.75 under cold; preloaded drops D1 -> 10/12 passes
    low = {**full, "d1": 0, "d5": 0}
    assert not pass_rule(low, "cold", [])[0] and pass_rule(low, "preloaded", [])[0]


def test_merge_lets_the_checker_win_and_the_judge_fill_gaps():
    from scenarios import checker
    from scenarios.evidence import Evidence

    ev = Evidence()
    ev.add_answer("```\npanio host add bench1 --ssh user@bench1.local\n```")
    res = checker.check(SC["C6"], ev, __import__("scenarios.surface", fromlist=["Surface"]).Surface.live(), "cold")
    v = judge.Verdict(scores={"d1": 1, "d2": 0, "d3": 2, "d4": 2, "d5": 2, "d6": 2, "d7": 2},
                      traps_eval=[{"id": "configure-writes-nothing", "respected": False, "evidence": "wrote a block"}])
    scores, traps, ok, reasons = judge.merge(res.scores, res.traps, v, "cold")
    assert scores["d1"] == 1 and scores["d4"] == 2
    assert traps[0]["respected"] is False and traps[0]["by"] == "judge"
    assert not ok and any("configure-writes-nothing" in r for r in reasons)


def test_judge_command_gets_prompt_on_stdin(tmp_path):
    cmd = f"{sys.executable} {HERE / 'fake_judge.py'}"
    tree = judge.help_tree(real_panio())
    checker = {"verdict": "pass", "scores": {"d2": 2, "d4": 2}, "invented": [],
               "traps": [{"id": "target-first", "central": True, "respected": True, "evidence": "order respected"}]}
    prompt = judge.build_prompt(SC["C1"], "fine", "cold", tree, checker=checker)
    assert "CHECKER VERDICT: (a deterministic checker" in prompt and "trap target-first: respected (order respected)" in prompt
    ok = judge.run_judge(cmd, prompt)
    assert not ok.parse_failed and ok.verdict.scores["d2"] == 2
    bad = judge.run_judge(cmd, judge.build_prompt(SC["C1"], "FAKE_JUDGE_GARBAGE", "cold", tree, checker=checker))
    assert bad.parse_failed and "no verdict" in bad.error


def test_cohen_kappa_and_confusion():
    human = [True, True, True, False, False, False, True, False]
    judged = [True, True, False, False, False, True, True, False]
    k, cm = judge.cohen_kappa(human, judged)
    assert cm == {"tp": 3, "fn": 1, "fp": 1, "tn": 3}
    assert abs(k - 0.5) < 1e-9
    assert judge.cohen_kappa([True, False], [True, False])[0] == 1.0
