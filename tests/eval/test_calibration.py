"""The checker agrees with careful human grading: Cohen's kappa on the labelled corpus, dev and holdout.

The corpus (tests/eval/labelled/corpus.toml) is answers written by hand with a
human verdict from the seed's rubric. The issue's bar is kappa >= 0.9; the
holdout split is only measured, never used to change the checker, and is held
to the same bar. Also: no line of panio's own docs, skills or help is a false
hard fail (an invented command) for the checker.
"""

import json
import shutil
import sys
from pathlib import Path

import pytest

from scenarios.calibrate import Entry
from scenarios.drift import Guard
from scenarios.evidence import Evidence
from scenarios.judge import help_tree
from scenarios.sandbox import real_panio
from scenarios.surface import Surface, parse

HERE = Path(__file__).parent
CORPUS = HERE / "labelled" / "corpus.toml"
CATALOG_DIR = HERE.parent.parent / "scenarios" / "catalog"
ROOT = HERE.parent.parent
KAPPA_MIN = 0.9
CLASSES = {"literal-name", "value-variant", "tilde-fence", "quoted-command", "panio-as-argument", "slash-shorthand",
           "negation", "negation-hides-invention", "contrast", "forbid-shell-comment", "forbid-shell-output"}


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    import subprocess

    p = subprocess.run([str(Path(sys.executable).parent / "panio-eval"), "calibrate", "--corpus", str(CORPUS), "--json"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path_factory.mktemp("cal"))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_corpus_covers_every_runnable_scenario_condition_and_class():
    entries = Entry.load_all(CORPUS)
    assert len(entries) >= 60 and len({e.id for e in entries}) == len(entries)
    rep = Guard().run()
    from scenarios.scenario import load_all

    runnable = {s.id for s in load_all()} - set(rep.pending)
    assert {e.scenario for e in entries} == runnable
    assert {e.condition for e in entries} == {"cold", "warm", "preloaded"}
    assert CLASSES <= {c for e in entries for c in e.classes}
    assert all(e.reason for e in entries) and {e.split for e in entries} == {"dev", "holdout"}
    assert sum(1 for e in entries if not e.human) >= 20  # failing answers too, not only passes
    streams = [e for e in entries if e.text.lstrip().startswith("{")]
    assert len(streams) >= 25  # event streams of the four harnesses, not only final answers


def test_checker_kappa_against_human_labels_dev_and_holdout(calibration):
    for split in ("dev", "holdout", "all"):
        a = calibration["splits"][split]["checker"]
        assert a["kappa"] >= KAPPA_MIN, (split, a, calibration["disagreements"]["checker"])
        assert a["undetermined"] == 0
    assert calibration["graders"] == ["checker"]
    # every tricky class is mostly right (a class the checker gets wrong wholesale is a bug, whatever kappa says)
    for cls, per in calibration["classes"].items():
        assert per["checker"]["right"] >= per["checker"]["n"] - 1, (cls, per)


@pytest.mark.parametrize("split,n", [("holdout2", 25), ("holdout3", 19)])
def test_later_holdouts_written_after_the_checker_changes(panio_eval, split, n):
    # holdout2: the 26 scenarios runnable first; holdout3: the eight whose commands landed later (R1, R2, R3,
    # R5, R6, R9, R10, M5), written after the changes their first grading led to
    r = panio_eval("calibrate", "--corpus", str(HERE / "labelled" / f"{split}.toml"), "--json", timeout=300)
    assert r.code == 0, r.err
    a = r.json()["splits"][split]["checker"]
    assert a["n"] >= n and a["kappa"] >= KAPPA_MIN, (a, r.json()["disagreements"])
    assert a["confusion"]["tn"] >= 8  # fails too, not only passes


def test_grade_one_answer_text_or_stream(panio_eval, tmp_path):
    ans = tmp_path / "answer.md"
    ans.write_text("~~~\npanio serial watch rpi\npanio serial send rpi 'uname -a'\npanio serial log rpi --tail 5\n~~~\n")
    r = panio_eval("grade", "R4", str(ans))
    assert r.code == 0 and r.out.startswith("R4 cold: PASS"), r.out + r.err
    ans.write_text("There is no `panio serial run`; if it's not captured, use `panio serial exec rpi 'uname -a'`.")
    r = panio_eval("grade", "R4", str(ans), "--json")
    g = r.json()
    assert r.code == 1 and g["verdict"] == "fail" and g["invented"][0].startswith("panio serial exec rpi")
    # a T1 answer as a Codex event stream: its commands are replayed in a sandbox and the lab is graded
    stream = HERE / "labelled" / "streams" / "C1-02.codex.jsonl"
    r = panio_eval("grade", "C1", str(stream), "--condition", "warm", "--json")
    g = r.json()
    assert r.code == 0 and g["verdict"] == "pass" and g["t1"]["passed"] and g["scores"]["d1"] == 2, g


R9_ANSWER = """```
panio netif mode link pico
panio netif status pico
panio netif down-hard pico
panio netif status pico
```
`mode off` is only a soft down (the carrier can stay up); down-hard cuts the adapter's power.
"""


def test_grade_refuses_a_pending_scenario_and_grades_it_once_its_command_lands(panio_eval, eval_env, tmp_path):
    ans = tmp_path / "r9.md"
    ans.write_text(R9_ANSWER)
    r = panio_eval("grade", "R9", str(ans))  # the shipped catalog: netif has landed, R9 runs
    assert r.code == 0 and r.out.startswith("R9 cold: PASS"), r.out + r.err
    # a catalog (PANIO_EVAL_CATALOG) whose R9 needs an announced command panio does not have yet
    cat = tmp_path / "catalog"
    shutil.copytree(CATALOG_DIR, cat)
    (cat / "_planned.toml").write_text((cat / "_planned.toml").read_text()
                                       + '\n[surface.children.netif.children.flap]\npositionals = [["TARGET", "?"]]\n')
    r9 = cat / "R9.toml"
    assert 'cmd = "panio netif down-hard pico"' in r9.read_text()
    r9.write_text(r9.read_text().replace('cmd = "panio netif down-hard pico"', 'cmd = "panio netif flap pico"', 1))
    env = {**eval_env, "PANIO_EVAL_CATALOG": str(cat)}
    r = panio_eval("grade", "R9", str(ans), env=env)
    assert r.code == 2 and r.out == "", r.out
    human, machine = r.err.strip().split("\n")
    assert human.startswith("panio-eval") and "R9 is pending" in human, r.err
    assert json.loads(machine)
    check = panio_eval("--check", "--json", env=env).json()
    assert check["pending"] == {"R9": ["netif flap"]}, check
    # the other scenarios of that catalog still grade
    assert panio_eval("grade", "R2", str(ans), env=env).code == 1


def test_no_false_hard_fail_on_panio_docs_skills_or_help():
    surface = Surface.live()
    texts = [(str(f.relative_to(ROOT)), f.read_text(encoding="utf-8"))
             for f in [*sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "skills").rglob("SKILL.md")), ROOT / "README.md"]]
    texts.append(("panio help tree", help_tree(real_panio())))
    false = []
    for name, text in texts:
        ev = Evidence()
        ev.add_answer(text)
        for c in ev.acted + ev.hooks:
            p = parse(surface, c.argv)
            if p.status in ("invented_command", "invented_flag"):
                false.append(f"{name}: {c.line[:120]} ({p.problem})")
    assert false == []


def test_calibrate_with_a_judge_reports_checker_judge_and_combined(panio_eval, tmp_path):
    small = tmp_path / "corpus.toml"
    small.write_text("\n".join(x for x in CORPUS.read_text().split("[[answer]]")[:1]) + "".join(
        "[[answer]]" + x for x in CORPUS.read_text().split("[[answer]]")[1:] if '"R8-0' in x or '"M2-0' in x))
    judge = f"{sys.executable} {HERE / 'fake_judge.py'}"
    r = panio_eval("calibrate", "--corpus", str(small), "--judge", judge, "--json")
    assert r.code == 0, r.err
    cal = r.json()
    assert cal["graders"] == ["checker", "judge", "combined"]
    assert cal["n"] == 10
    # the fake judge passes everything: it agrees with humans only on the passes, the checker carries the rest
    assert cal["splits"]["all"]["judge"]["confusion"]["fp"] == 4
    assert cal["splits"]["all"]["combined"]["kappa"] >= cal["splits"]["all"]["judge"]["kappa"]
    disagree = {d["id"] for d in cal["disagreements"]["judge"]}
    assert {"M2-02", "R8-02"} <= disagree
    row = next(a for a in cal["answers"] if a["id"] == "M2-02")
    assert any(d["what"] == "d4" and d["checker"] == 0 and d["judge"] == 2 for d in row["disagreements"])
    human = panio_eval("calibrate", "--corpus", str(small), "--judge", judge).out
    assert human.startswith("graders: checker, judge, combined")
