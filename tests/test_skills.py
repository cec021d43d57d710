"""The bundled skills: printed, listed, located, and every command they mention is real."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import skills
from clihelp import concrete
from controller.cli.main import build_parser


def test_skill_prints_the_main_skill_with_front_matter(panio):
    out = panio("skill").out
    assert out.startswith("---\nname: panio\ndescription: ")
    assert "## Traps" in out and "panio skill kvm-puppeting" in out


def test_companion_list_and_path(panio):
    assert "moveabs" in panio("skill", "kvm-puppeting").out and "32767" in panio("skill", "kvm-puppeting").out
    listed = {row["name"] for row in panio("skill", "--list", "--json").json()}
    assert listed == {"panio", "kvm-puppeting"}
    path = Path(panio("skill", "--path").out.strip())
    assert path.name == "SKILL.md" and path.read_text().startswith("---\nname: panio")
    assert Path(panio("skill", "--path", "kvm-puppeting").out.strip()).exists()
    r = panio.fails("skill", "nope", code=3)
    assert "kvm-puppeting" in r.err and r.error["hint"] == "see `panio skill --list`"
    assert panio.fails("skill", "kvm", code=3).error["hint"] == "did you mean `panio skill kvm-puppeting`?"


def test_skills_ship_inside_the_wheel_package():
    assert {"panio", "kvm-puppeting"} <= set(skills.names())
    for name in skills.names():
        assert skills.description(name)




def _mentioned_commands(text: str) -> list[str]:
    """Commands in backticks, minus the ones the text says do not exist ("no `panio shelly`")."""
    cmds = []
    for m in re.finditer(r"`(panio [^`]+)`", text):
        if re.search(r"\bno\s*$", text[max(0, m.start() - 12):m.start()]):
            continue
        for part in m.group(1).split(" → "):
            part = " ".join(part.split())
            if part.startswith("panio ") and "..." not in part and "COMMAND" not in part:
                cmds.append(part)
    return cmds


@pytest.mark.parametrize("name", ["panio", "kvm-puppeting"])
def test_every_command_a_skill_mentions_parses_against_the_live_cli(name):
    parser = build_parser(full=True)
    bad = []
    for cmd in _mentioned_commands(skills.path(name).read_text()):
        argv = [concrete(a) for a in shlex.split(cmd.replace("[", "").replace("]", ""))[1:]]
        try:
            parser.parse_args(argv)
        except Exception as exc:  # UsageError from Parser.error
            bad.append(f"{cmd}: {exc}")
    assert bad == []
