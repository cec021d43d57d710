"""Issue 40: the adversarial corpus (tests/eval/labelled/adversarial.toml) and `panio-eval calibrate` over it.

The corpus is answers written to fool the checker at the edges of the catalog's traps, each with a
human label (pass, fail, or undetermined: the answer alone cannot settle it) argued in one line.
"""

import tomllib
from pathlib import Path

from scenarios.calibrate import LABELS, Entry

HERE = Path(__file__).parent
ADVERSARIAL = HERE / "labelled" / "adversarial.toml"
SHAPES = {"unit", "claim-after-failure", "corrected", "name-mismatch", "since-zero", "invented-helper",
          "reversed-explanation", "invented-flag-in-passing", "equivalent", "plain-prose", "hid-logical",
          "mcp-stated", "runtime-in-prose"}


def test_the_adversarial_corpus_covers_every_shape_with_argued_labels():
    entries = Entry.load_all(ADVERSARIAL)
    assert len(entries) >= 60 and len({e.id for e in entries}) == len(entries)
    assert SHAPES <= {c for e in entries for c in e.classes}
    assert all(e.reason and e.label in LABELS for e in entries)
    assert {e.label for e in entries} == set(LABELS)
    assert {e.condition for e in entries} >= {"cold", "warm", "preloaded", "mcp"}
    # transcripts (`ran`) become event streams the adapters read, with the exit statuses given
    raw = {a["id"]: a for a in tomllib.loads(ADVERSARIAL.read_text())["answer"]}
    ran = [e for e in entries if "ran" in raw[e.id]]
    assert len(ran) >= 8 and all(e.text.lstrip().startswith("{") for e in ran)


SMALL = '''
[[answer]]
id = "a"
scenario = "R8"
condition = "cold"
verdict = "fail"
reason = "power-state failed, the answer still says ON"
ran = [{ cmd = "panio power-state pico", exit = 3, out = "state_cmd failed" }]
text = "pico is ON."

[[answer]]
id = "b"
scenario = "R8"
condition = "cold"
verdict = "pass"
reason = "a read"
text = "```\\npanio power-state pico\\n```\\n"

[[answer]]
id = "c"
scenario = "R6"
condition = "cold"
verdict = "undetermined"
reason = "2000 1500: pixels or logical units?"
text = "```\\npanio skill kvm-puppeting\\npanio video shot pico\\npanio hid send pico moveabs 2000 1500\\n```\\n"

[[answer]]
id = "d"
scenario = "R8"
condition = "cold"
verdict = "fail"
reason = "switches it on"
text = "```\\npanio power on pico\\n```\\n"
'''


def test_calibrate_reports_kappa_over_three_labels_the_confusion_and_each_disagreement(panio_eval, tmp_path):
    corpus = tmp_path / "small.toml"
    corpus.write_text(SMALL)
    r = panio_eval("calibrate", "--corpus", str(corpus), "--json")
    assert r.code == 0, r.err
    cal = r.json()
    a = cal["splits"]["all"]["checker"]
    assert cal["categories"] == ["pass", "fail", "undetermined"]
    assert a["n"] == 4 and set(a["confusion"]) == set(LABELS)
    assert a["confusion"]["undetermined"]["undetermined"] == 1  # the checker left c to the judge, as humans did
    assert a["confusion"]["fail"]["fail"] + a["confusion"]["fail"]["pass"] + a["confusion"]["fail"]["undetermined"] == 2
    # every disagreement is listed with the human's argument
    for d in cal["disagreements"]["checker"]:
        assert d["reason"] and d["human"] != d["checker"]
    assert a["false_pass"] == sum(1 for d in cal["disagreements"]["checker"] if d["checker"] == "pass")
    human = panio_eval("calibrate", "--corpus", str(corpus)).out
    assert "kappa=" in human and "false passes=" in human and "human undetermined:" in human


def test_calibrate_without_arguments_measures_the_adversarial_corpus(panio_eval):
    r = panio_eval("calibrate", "--json", timeout=300)
    assert r.code == 0, r.err
    cal = r.json()
    assert cal["n"] == len(Entry.load_all(ADVERSARIAL)) and cal["categories"] == list(LABELS)
    assert "kappa" in cal["splits"]["all"]["checker"]


def test_a_label_outside_pass_fail_undetermined_is_bad_input(panio_eval, tmp_path):
    corpus = tmp_path / "bad.toml"
    corpus.write_text(SMALL.replace('verdict = "undetermined"', 'verdict = "maybe"'))
    r = panio_eval("calibrate", "--corpus", str(corpus))
    assert r.code == 2 and "verdict must be one of pass, fail, undetermined" in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 2
