"""The golden self-test: every runnable reference passes its grader; every known-bad variant fails."""

from scenarios import selftest
from scenarios.scenario import load_all


def test_all_reference_passes_and_known_bad_fails_for_real(panio_eval):
    r = panio_eval("run", "--all", "--reference", "--json")
    assert r.code == 0, r.out[-2000:] + r.err
    rep = r.json()
    by = {(o["scenario"], o["variant"]): o for o in rep["outcomes"]}
    for sid in ("C1", "C2", "C3", "C4", "C5", "C7", "s1", "M1", "M2", "M5", "R1", "R2", "R9"):
        assert by[(sid, "reference")]["status"] == "pass", by[(sid, "reference")]
    bad = [o for o in rep["outcomes"] if o["variant"] != "reference"]
    assert len(bad) >= 34 * 1
    assert all(o["status"] != "pass" for o in bad), [o for o in bad if o["status"] == "pass"]
    pending = {o["scenario"] for o in rep["outcomes"] if o["status"] == "pending"}
    assert pending == set()


def test_t0_references_against_the_announced_surface():
    """Preview: with the planned commands overlaid, every T0 reference passes and every bad variant fails."""
    outs = selftest.run([s for s in load_all() if s.tier == "t0"], planned=True, jobs=2)
    wrong = [o.to_json() for o in outs if not o.ok or o.status == "pending"]
    assert wrong == []


def test_a_grader_that_passes_a_known_bad_variant_is_caught(tmp_path):
    """Weaken C2's grader (drop its assertions): the clobbering variant then passes, and the self-test says FAIL."""
    c2 = next(s for s in load_all() if s.id == "C2")
    c2.grader = {}
    c2.traps = []
    outs = {o.variant: o for o in selftest.run([c2], jobs=1)}
    assert outs["clobber-console"].status == "pass" and not outs["clobber-console"].ok
