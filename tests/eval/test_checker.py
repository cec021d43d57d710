"""The T0 checker: parse against the live tree, order-aware matching, trap predicates, no LLM."""

from scenarios import checker
from scenarios.evidence import Evidence
from scenarios.matching import matches
from scenarios.scenario import load_all
from scenarios.surface import Surface, planned_spec

LIVE = Surface.live()
PLANNED = LIVE.overlay(planned_spec())
SC = {s.id: s for s in load_all()}


def answer(text: str) -> Evidence:
    ev = Evidence()
    ev.add_answer(text)
    return ev


def test_parse_classifies_invented_commands_flags_and_the_convention():
    assert LIVE.parse(["adb", "reboot", "tablet"]).status == "invented_command"
    assert LIVE.parse(["flash", "pico"]).missing == "flash"
    assert LIVE.parse(["power", "set", "-t", "pico", "--shelly", "1.2.3.4"]).status == "invented_flag"
    p = LIVE.parse(["serial", "add", "pico", "bmc", "--device", "/dev/ttyUSB1"])
    assert p.status == "convention" and "-t TARGET" in p.problem
    p = PLANNED.parse(["serial", "send", "-t", "pico", "uname -a"])
    assert p.status == "convention" and "positional" in p.problem
    assert LIVE.parse(["serial", "add", "-t", "p", "--device", "x", "--sense", "DTR", "c"]).status == "malformed"
    ok = LIVE.parse(["serial", "add", "bmc", "-t", "pico", "--device", "/dev/ttyUSB1", "--baud", "9600"])
    assert ok.status == "ok" and ok.flags["--target"] == "pico" and ok.positionals == ["bmc"]


def test_matching_honours_placeholders_regex_values_aliases_and_extra_flags():
    assert matches(PLANNED, "panio serial log pico --since <seq>", ["serial", "log", "pico", "--since", "1234"])
    assert not matches(PLANNED, "panio serial log pico --since <seq>", ["serial", "log", "pico", "--tail", "5"])
    assert matches(PLANNED, "panio serial log dut --interface bmc *", ["serial", "log", "dut", "-i", "bmc", "--tail", "20"])
    assert not matches(PLANNED, "panio serial log dut --interface bmc *", ["serial", "log", "dut", "--tail", "20"])
    pat = "panio power set -t pico --cycle-cmd 're:.*shellyplug.*192\\.0\\.2\\.41.*'"
    assert matches(LIVE, pat, ["power", "set", "--target", "pico", "--cycle-cmd", "/opt/shellyplug -d 192.0.2.41 cycle", "--timeout-s", "5"])
    assert not matches(LIVE, pat, ["power", "set", "-t", "pico", "--cycle-cmd", "curl http://10.0.0.1/relay"])
    assert matches(LIVE, "panio netboot set -t pico --tftp-root ~/tftp/pico", ["netboot", "set", "-t", "pico", "--tftp-root", "$HOME/tftp/pico/"])
    assert matches(LIVE, "panio shelly *", ["shelly", "add", "pico"])  # invented paths compare raw


def test_extraction_reads_code_blocks_pipes_subshells_and_skips_negated_mentions():
    ev = answer("There is no `panio flash`, so instead:\n```bash\n$ cp out/kernel.img \"$(panio netboot tftp-root pico)/kernel_2712.img\"\n"
                "panio serial log pico --tail 50 | head  # first lines\n```\nThen run `panio netboot start pico`.")
    assert [c.text for c in ev.acted] == ["panio netboot tftp-root pico", "panio serial log pico --tail 50",
                                          "panio netboot start pico"]
    assert [c.text for c in ev.commands if c.rejected] == ["panio flash"]  # named only to be denied


def test_reference_passes_and_order_matters():
    r4 = SC["R4"]
    good = checker.check(r4, answer("```\npanio serial watch pico\npanio serial send pico 'uname -a'\npanio serial log pico --since 812\n```"), PLANNED, "preloaded")
    assert good.verdict == "pass" and good.scores["d6"] == 2 and good.scores["d4"] == 2
    swapped = checker.check(r4, answer("```\npanio serial send pico 'uname -a'\npanio serial watch pico\npanio serial log pico --since 812\n```"), PLANNED, "preloaded")
    assert swapped.scores["d6"] == 1 and swapped.verdict == "fail"
    assert any(t.id == "send-needs-watch" and t.respected is False for t in swapped.traps)


def test_invented_command_is_a_hard_fail_and_convention_errors_cost_formation():
    c7 = SC["C7"]
    r = checker.check(c7, answer("```\npanio target add tablet\npanio adb set -t tablet --serial ABC123\npanio adb reboot tablet\n```"), LIVE)
    assert r.scores["d4"] == 0 and r.verdict == "fail" and "adb reboot" in r.invented[0]
    r4 = checker.check(SC["R4"], answer("```\npanio serial watch pico\npanio serial send -t pico 'uname -a'\n```"), PLANNED)
    assert r4.scores["d3"] < 2 and r4.verdict == "fail"


def test_shell_and_text_predicates_and_judge_only_traps():
    r9 = checker.check(SC["R9"], answer("```\nsudo ip link set enx0 down\npanio netif status pico\n```"), PLANNED)
    trap = next(t for t in r9.traps if t.id == "no-manual-ifconfig")
    assert trap.respected is False and "ip link" in trap.evidence
    r1 = checker.check(SC["R1"], answer("```\npanio netboot tftp-root pico\npanio netboot start pico\n```"), PLANNED)
    assert next(t for t in r1.traps if t.id == "primary-nic").respected is None  # left to the judge
    assert next(t for t in r1.traps if t.id == "pi5-kernel-name").respected is False


def test_discovery_and_efficiency_come_from_the_stream():
    ev = Evidence(from_stream=True)
    ev.add_shell("panio --help", exit=0)
    ev.add_shell("panio target add tablet", exit=0)
    ev.add_shell("panio adb set tablet --serial ABC123", exit=2)
    r = checker.check(SC["C7"], ev, LIVE, "cold")
    assert r.scores["d1"] == 2 and r.scores["d7"] == 1
    r = checker.check(SC["C7"], ev, LIVE, "preloaded")
    assert r.scores["d1"] is None


def test_placeholders_in_stated_commands_are_not_bad_values():
    # `--baud` is int-typed in the live CLI; a stated `<baud>` is a placeholder, not a malformed value
    assert LIVE.parse(["serial", "add", "bmc", "-t", "pico", "--device", "/dev/x", "--baud", "<baud>"]).status == "ok"
    assert LIVE.parse(["serial", "add", "bmc", "-t", "pico", "--device", "/dev/x", "--baud", "fast"]).status == "malformed"


def test_mcp_tool_calls_map_to_commands():
    from scenarios.mcpmap import mcp_argv

    assert mcp_argv(PLANNED, "mcp__panio__serial_send", {"target": "pico", "text": "uname -a", "newline": False,
                                                         "pace_ms": 20}) == ["serial", "send", "pico", "uname -a", "--no-newline", "--pace-ms", "20"]
    assert mcp_argv(PLANNED, "mcp__panio__power_state", {"target": "pico"}) == ["power-state", "pico"]
    assert mcp_argv(PLANNED, "panio.power_on", {"target": "pico"}) == ["power", "on", "pico"]
    assert mcp_argv(LIVE, "mcp__panio__target_list", {}) == ["target", "list"]
    assert mcp_argv(PLANNED, "mcp__panio__teleport", {"target": "pico"}) is None


def test_reading_the_skill_or_docs_by_shell_counts_as_discovery():
    ev = Evidence(from_stream=True)
    ev.add_shell("cat $(panio skill --path)/../SKILL.md", exit=0)
    ev.add_shell("sed -n 1,40p docs/power.md", exit=0)
    assert len(ev.reads) == 1 + 1
    ev.add_shell("panio target add tablet", exit=0)
    assert checker.check(SC["C7"], ev, LIVE, "cold").scores["d1"] == 2


F = "```"


def test_comments_that_explain_are_not_rejections_but_comments_that_reject_are():
    ev = answer(f"{F}bash\n# Don't use serial reset here: dut hasn't opted into DTR.\npanio serial send dut reboot\n"
                f"panio serial send dut 'uname -a'   # not -t: the target is positional\n"
                f"panio serial reset dut   # wrong: hardware DTR\n# don't do this:\npanio serial dtr dut --ms 200\n{F}")
    assert [(c.text, c.rejected) for c in ev.commands] == [
        ("panio serial send dut reboot", False), ("panio serial send dut 'uname -a'", False),
        ("panio serial reset dut", True), ("panio serial dtr dut --ms 200", True)]
    assert checker.check(SC["s11"], ev, LIVE, "preloaded").verdict == "pass"


def test_output_is_not_shell_and_prose_mentions_without_arguments_are_not_malformed():
    ev = answer(f"{F}bash\npanio daemons\npanio daemons stop serial-pico\n{F}\nOutput looks like:\n"
                f"{F}\nserial-pico  running  pid 4242  (stop sends TERM, then kill after 5 s)\n{F}\n"
                "Note: `panio daemons stop` needs a name or `--all`.")
    r = checker.check(SC["R7"], ev, LIVE, "preloaded")
    assert r.verdict == "pass" and r.malformed == [] and not any("kill" in x for x in ev.programs)
    ev = answer(f"{F}\nlsof /dev/ttyUSB0   # find the holder\nkill 4242\n{F}")
    assert checker.check(SC["R7"], ev, LIVE, "preloaded").verdict == "fail"


def test_panio_as_an_argument_quoted_commands_and_hooks():
    from scenarios.shell import panio_commands

    assert panio_commands("claude mcp add panio -- panio mcp") == [["mcp"]]
    assert panio_commands("grep -rn panio docs/ | head") == []
    assert panio_commands("pip show panio && which panio") == []
    assert panio_commands("ssh -p 22 bench1 \"panio serial log pico --tail 5\"") == [["serial", "log", "pico", "--tail", "5"]]
    assert panio_commands("watch -n 1 'panio serial log pico --tail 5'") == [["serial", "log", "pico", "--tail", "5"]]
    assert panio_commands("timeout 10 sudo -E panio serial watch pico") == [["serial", "watch", "pico"]]
    assert panio_commands("echo 'panio serial watch pico'") == []
    ev = answer(f"{F}\npanio power set -t pico --cycle-cmd \"panio shelly cycle 192.0.2.41\"\n{F}")
    assert [c.text for c in ev.hooks] == ["panio shelly cycle 192.0.2.41"]
    r = checker.check(SC["C3"], ev, LIVE, "preloaded")
    assert r.scores["d4"] == 0 and "(in a hook)" in r.invented[0]


def test_the_target_is_a_role_bound_once():
    ok = checker.check(SC["R4"], answer(f"{F}\npanio serial watch $PI\npanio serial send $PI 'uname -a'\n"
                                        f"panio serial log $PI --tail 5\n{F}"), LIVE, "preloaded")
    assert ok.verdict == "pass"
    split = checker.check(SC["R4"], answer(f"{F}\npanio serial watch rpi\npanio serial send board 'uname -a'\n"
                                           f"panio serial log board --tail 5\n{F}"), LIVE, "preloaded")
    assert split.verdict == "fail" and split.scores["d6"] == 0
    named = checker.check(SC["R8"], answer(f"{F}\npanio power-state mypi\n{F}"), LIVE, "preloaded")  # the goal names pico
    assert named.verdict == "fail"
    assert checker.check(SC["R8"], answer(f"{F}\npanio power-state <target>\n{F}"), LIVE, "preloaded").verdict == "pass"


def test_negation_must_govern_the_span():
    hidden = answer("If the tablet isn't listed, run `panio adb devices` first.")
    assert [c.rejected for c in hidden.commands] == [False]
    denied = answer("`panio flash` and `panio ssh` don't exist; there is no `panio emmc` either.")
    assert all(c.rejected for c in denied.commands) and len(denied.commands) == 3
    contrast = answer("`panio serial reset dut` would pulse DTR, which dut hasn't opted into, so it errors. "
                      "Use `panio serial send dut reboot`.")
    assert [c.rejected for c in contrast.commands] == [True, False]


def test_placeholders_with_spaces_and_command_substitutions_are_values_not_redirects():
    from scenarios.shell import panio_commands

    assert panio_commands("panio serial log pico --since <seq from above>") == [["serial", "log", "pico", "--since", "<seq from above>"]]
    inner, outer = panio_commands("panio serial log pico --since=$(panio serial log pico --tail 1 --json | jq .seq)")
    assert inner == ["serial", "log", "pico", "--tail", "1", "--json"] and LIVE.parse(outer).status == "ok"
    assert panio_commands("panio serial log dut > boot.log 2>&1") == [["serial", "log", "dut"]]


def test_gemini_stream_current_tool_names_skills_and_mcp_names():
    import json

    from scenarios.adapters import parse_gemini
    from scenarios.mcpmap import add_calls

    events = [{"type": "init", "model": "gemini-2.5-pro"},
              {"type": "tool_use", "tool_name": "activate_skill", "tool_id": "a", "parameters": {"name": "panio"}},
              {"type": "tool_use", "tool_name": "grep_search", "tool_id": "g", "parameters": {"pattern": "panio"}},
              {"type": "tool_use", "tool_name": "mcp_panio_power_state", "tool_id": "m", "parameters": {"target": "pico"}},
              {"type": "message", "role": "assistant", "content": "It is on.", "delta": True},
              {"type": "result", "status": "success", "stats": {"input_tokens": 5, "output_tokens": 1}}]
    ev = add_calls(parse_gemini("\n".join(json.dumps(e) for e in events)), LIVE)
    assert ev.reads == ["skill:panio"] and ev.model == "gemini-2.5-pro"
    assert [c.text for c in ev.commands] == ["panio power-state pico"] and len(ev.mcp_calls) == 1
    failed = parse_gemini(json.dumps({"type": "result", "status": "error", "error": {"message": "quota exceeded"}}))
    assert failed.harness_error == "quota exceeded"


def test_a_reasonable_variant_of_an_expected_value_passes_and_a_wrong_one_does_not():
    def verdict(sid, block):
        return checker.check(SC[sid], answer(f"{F}\n{block}\n{F}"), LIVE, "preloaded").verdict

    assert verdict("R4", "panio serial watch pico\npanio serial send pico 'uname -a; hostname'\npanio serial log pico --tail 5") == "pass"
    assert verdict("R4", "panio serial watch pico\npanio serial send pico 'uname'\npanio serial log pico --tail 5") == "fail"
    assert verdict("s11", "panio serial send dut 'sudo systemctl reboot'") == "pass"
    assert verdict("s11", "panio serial send dut 'poweroff'") == "fail"
    assert verdict("s9", "panio serial reset dut\npanio serial dtr dut --ms 4500") == "pass"


def test_only_the_clause_that_ends_in_the_colon_introduces_a_block():
    block = "\n```\npanio netif mode ffx pico\npanio power-cycle pico\npanio netif status pico\n```\n"
    rejected = lambda intro: [c.rejected for c in answer(intro + block).commands if c.text.startswith("panio netif")]
    assert rejected("Don't do this:") == [True, True]
    assert rejected("That is the idea. Wrong:") == [True, True]
    # a negation earlier on the line governs its own sentence or clause, not the commands below
    assert rejected("Don't take the address from `panio serial log pico`: it can be stale. Use this instead:") == [False, False]
    assert rejected("Don't `kill` the old process by hand; panio handles it:") == [False, False]
    ok = checker.check(SC["R2"], answer("Don't read the console for it; switch and ask netif:" + block), LIVE)
    assert ok.verdict == "pass", ok.reasons


def test_r9_hand_trap_is_about_driving_the_link_not_reading_it():
    steps = "panio netif mode link pico\npanio netif status pico\n{}\npanio netif down-hard pico\npanio netif status pico\n"
    for line, walked in [("ip link show enx0", False), ("ifconfig enx0", False), ("ip -br link show enx0", False),
                         ("sudo ip link set enx0 down", True), ("sudo ip -4 link set dev enx0 down", True),
                         ("sudo ifconfig enx0 down", True), ("sudo networksetup -setnetworkserviceenabled USB off", True)]:
        res = checker.check(SC["R9"], answer("```\n" + steps.format(line) + "```\n"), LIVE)
        trap = next(t for t in res.traps if t.id == "no-manual-ifconfig")
        assert trap.respected is (not walked), (line, trap)
        assert (res.verdict == "fail") is walked, (line, res.reasons)


def test_commands_are_read_in_text_order_prose_and_blocks_interleaved():
    text = ("First open the companion skill: `panio skill kvm-puppeting`.\n\n```\npanio video shot pico\n```\n"
            "Then act with `panio hid send pico key F2`.\n")
    assert [c.text for c in answer(text).acted] == ["panio skill kvm-puppeting", "panio video shot pico",
                                                    "panio hid send pico key F2"]
    res = checker.check(SC["R6"], answer(text), LIVE)
    assert res.scores["d6"] == 2 and res.verdict == "pass", (res.matched, res.reasons)


def test_a_trap_against_a_flag_panio_lacks_matches_only_commands_that_carry_it():
    m5 = SC["M5"]
    right = checker.check(m5, answer("```\npanio setup --host bench1 --code-only\n```"), LIVE)
    assert next(t for t in right.traps if t.id == "no-rust-only").respected is True and right.scores["d5"] == 2
    carried = checker.check(m5, answer("```\npanio setup --rust-only --host bench1\n```"), LIVE)
    assert next(t for t in carried.traps if t.id == "no-rust-only").respected is False
    assert carried.verdict == "fail" and carried.scores["d4"] == 0


def test_steps_of_one_group_come_in_any_order_and_the_rest_stays_ordered():
    r1 = SC["R1"]
    steps = ["panio serial watch pico", "panio netboot tftp-root pico", "panio netboot start pico"]
    tail = ["panio power-cycle pico", "panio serial log pico --tail 50"]
    kernel = "Copy it as kernel_2712.img.\n"
    for first in (steps, steps[::-1]):
        res = checker.check(r1, answer(kernel + "```\n" + "\n".join(first + tail) + "\n```"), LIVE)
        assert res.scores["d6"] == 2 and res.verdict == "pass", (res.matched, res.reasons)
    # a reboot before the serve is out of order (D6 = 1), and the central serve-before-reboot trap fails it
    late = checker.check(r1, answer(kernel + "```\n" + "\n".join([steps[0], steps[1], tail[0], steps[2], tail[1]]) + "\n```"), LIVE)
    assert late.scores["d6"] == 1 and late.verdict == "fail", late.matched
    assert [t.id for t in late.traps if t.respected is False] == ["serve-before-reboot"]
