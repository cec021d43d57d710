"""The CLI as an agent meets it: help that teaches, light start-up, one error shape, the import rule."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli.commands import COMMANDS
from controller.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
HEAVY = {"celery", "redis", "paramiko", "cv2", "sqlalchemy", "mcp", "kombu", "numpy", "pytesseract", "serial", "tomlkit"}


def leaves(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from leaves(child, path + (name,))


ALL = [(" ".join(p), parser) for p, parser in leaves(build_parser(full=True))]


def test_every_command_is_reachable():
    assert {p.split()[0] for p, _ in ALL} == set(COMMANDS)


@pytest.mark.parametrize("path, parser", ALL, ids=[p for p, _ in ALL])
def test_every_command_help_has_summary_example_and_see_also(path, parser):
    text = parser.format_help()
    assert parser.description and len(parser.description.splitlines()[0]) > 10, path
    assert "example:\n  panio " in text, f"{path}: no example"
    assert "see also:" in text, f"{path}: no see-also"


def test_top_level_help_points_at_the_skill_and_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "controller.cli.main", "--help"], capture_output=True, text=True).stdout
    assert "panio skill" in out
    for name in COMMANDS:
        assert re.search(rf"^  {re.escape(name)}\s", out, re.M), name


@pytest.mark.parametrize("argv", [["--help"], ["target", "list"], ["config", "show"], ["serial", "--help"],
                                  ["power", "set", "--help"], ["skill", "--list"]])
def test_no_heavy_import_at_start_up(panio, argv):
    panio("init")
    code = ("import sys, json\nfrom controller.cli.main import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))\n")
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=panio.env)
    loaded = set(json.loads(p.stderr.strip().splitlines()[-1]))
    assert not (loaded & HEAVY), f"{argv} imported {loaded & HEAVY}"


def test_unknown_command_suggests_and_never_tracebacks(panio):
    r = panio.fails("targt", "list", code=2)
    assert "panio target" in r.err
    r = panio.fails("flash", code=2)
    assert r.error["command"] == "flash"


def test_bad_flag_is_one_usage_line_pointing_at_help(panio):
    r = panio.fails("target", "list", "--jsn", code=2)
    assert "panio target list --help" in r.err


@pytest.mark.parametrize("argv", [["--tokn", "s3cr3t-XYZ"], ["--tokn=s3cr3t-XYZ"], ["--json", "--tokn", "s3cr3t-XYZ"]])
def test_a_misspelt_option_is_named_but_its_value_never_echoed(panio, argv):
    """A secret typed after a misspelt option must not reach the terminal or a CI log through the error."""
    r = panio.fails("job", "list", *argv, code=2)
    assert "s3cr3t-XYZ" not in r.out + r.err
    assert "--tokn" in r.error["message"] and "1 value not shown" in r.error["message"]
    assert "stray" in panio.fails("job", "list", "stray", code=2).error["message"]  # a stray word is shown


def test_group_without_subcommand_prints_its_help(panio):
    r = panio("serial")
    assert "add" in r.out and "devices" in r.out


def test_exit_status_doc_lists_every_error():
    from bench_agent.errors import ALL_ERRORS

    doc = (ROOT / "docs" / "exit-status.md").read_text()
    for cls in ALL_ERRORS:
        assert re.search(rf"^\|\s*{cls.exit_status}\s*\|\s*`{cls.code}`", doc, re.M), f"{cls.code} ({cls.exit_status}) not documented"


def test_internal_errors_are_reported_without_traceback(panio, tmp_path):
    panio("init")
    code = ("import sys\nfrom controller.cli import main as m\n"
            "def boom(args): raise RuntimeError('kaboom')\n"
            "import controller.cli.lab.target as t\nt.list_ = boom\nsys.exit(m.main(['target','list']))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=panio.env)
    assert p.returncode == 70
    assert "Traceback" not in p.stderr and "kaboom" in p.stderr
    assert json.loads(p.stderr.strip().splitlines()[-1])["error"] == "internal"
