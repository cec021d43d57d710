"""The catalog holds every seed scenario with the fields the issue asks for."""

from scenarios.drift import SEED_IDS
from scenarios.scenario import load_all


def test_every_seed_scenario_has_a_fixture_with_a_known_bad_variant():
    scs = {s.id: s for s in load_all()}
    assert sorted(scs) == sorted(SEED_IDS)
    for s in scs.values():
        assert s.goal and s.tier in ("t0", "t1") and s.bad, s.id
        assert s.reference or s.reference_prose, s.id


def test_traps_are_flagged_and_mostly_machine_checkable():
    scs = load_all()
    with_central = [s.id for s in scs if s.central_traps]
    assert set(s.id for s in scs) - set(with_central) == {"C4"}  # C4 is the no-trap baseline
    checks = [t for s in scs for t in s.traps if t.check]
    assert len(checks) >= 40


def test_t1_scenarios_assert_an_end_state_and_goals_carry_no_flags():
    for s in load_all():
        if s.tier == "t1":
            assert s.grader.get("assert") or s.grader.get("unchanged"), s.id
        assert " -t " not in s.goal and " --" not in s.goal, s.id  # the user's words, not panio's syntax


def test_m5_is_adapted_and_says_so_and_loopback_fixtures_exist():
    scs = {s.id: s for s in load_all()}
    assert "ADAPTED" in scs["M5"].notes and "--rust-only" not in scs["M5"].reference[0].cmd
    assert {i for i, s in scs.items() if s.loopback} == {"s2", "s3", "s4", "s6", "s7", "s10"}
    for i in ("s2", "s4", "s6", "s10"):
        assert scs[i].loopback["steps"] and (scs[i].loopback.get("expect") or scs[i].loopback.get("expect_json_seq"))


def test_fixture_labs_are_valid_panio_labs(tmp_path):
    import os
    import subprocess

    from scenarios.sandbox import real_panio
    from scenarios.surface import CATALOG

    for lab in sorted((CATALOG / "labs").glob("*.toml")):
        env = {**os.environ, "PANIO_LAB": str(lab), "PANIO_STATE_DIR": str(tmp_path), "HOME": str(tmp_path)}
        r = subprocess.run([real_panio(), "config", "show", "--json"], capture_output=True, text=True, env=env, timeout=30)
        assert r.returncode == 0, (lab.name, r.stderr)
