"""Group help pages, did-you-mean and the hints a newcomer needs, as an agent meets them."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from controller.cli.groups import GROUPS


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_group_page_has_examples_that_parse_and_a_see_also(panio, group):
    from controller.cli.main import build_parser

    text = panio(group, "--help").out
    assert "example:\n  panio " in text and "see also: " in text
    parser = build_parser(full=True)
    for example in GROUPS[group][0]:
        parser.parse_args(shlex.split(example)[1:])  # a UsageError here is an example that drifted


def test_every_command_group_has_a_group_page():
    from controller.cli.commands import RUNTIME

    groups = {name for name, verbs in RUNTIME.items() if verbs}  # every group with subcommands
    assert sorted(groups - set(GROUPS)) == []


@pytest.mark.parametrize("argv,hint", [
    (["serial", "wacth", "pico"], "did you mean `panio serial watch`?"),
    (["target", "lsit"], "did you mean `panio target list`?"),
    (["power", "cycle", "pico"], "did you mean `panio power-cycle`?"),
    (["power", "state", "pico"], "did you mean `panio power-state`?"),
    (["serial", "log", "-t", "pico", "--tail", "5"], "with no -t: `panio serial log pico --tail 5`"),
    (["power-cycle", "--target=pico"], "with no -t: `panio power-cycle pico`"),
])
def test_typos_get_a_pointer(panio, argv, hint):
    assert hint in panio.fails(*argv, code=2).error["hint"]


def test_a_setup_commands_own_error_keeps_its_hint(panio):
    r = panio.fails("serial", "add", "console", "-t", "pico", code=2)
    assert "--device" in r.err and "positional" not in r.err


def test_a_target_name_in_the_wrong_case_suggests_the_real_one(panio):
    panio("init")
    panio("target", "add", "board0")
    r = panio.fails("target", "show", "Board0", code=3)
    assert r.error["hint"] == "did you mean 'board0'? target names are lowercase"
    assert "target add" not in r.err
    assert "did you mean 'board0'?" in panio.fails("power-state", "boadr0", code=3).err


@pytest.mark.parametrize("verb", ["up", "down", "status"])
def test_panio_sim_verbs_describe_themselves(verb):
    from pathlib import Path

    sim = str(Path(sys.executable).parent / "panio-sim")
    out = subprocess.run([sim, verb, "--help"], capture_output=True, text=True, timeout=30).stdout
    usage, description = out.split("\n\n")[:2]
    assert len(description) > 20 and "example:\n  panio-sim" in out and "see also:" in out
