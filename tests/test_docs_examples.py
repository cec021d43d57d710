"""Every `panio ...` line in a code block of the docs and README parses against the live CLI.

Agents copy these lines; an example that names a command or flag panio does not
have teaches them to invent. Placeholders in capitals (TARGET, N, ...) stand for
values, `...` marks an elided line, and a line may continue with a backslash.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from controller.cli.main import build_parser
from clihelp import concrete

ROOT = Path(__file__).resolve().parent.parent
# commands.md is the parser's own --help (scripts/cli_reference.py), wrapped prose included: nothing to check.
DOCS = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "commands.md") + [ROOT / "README.md"]


def examples(path: Path) -> list[str]:
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if not line.startswith("panio "):  # output ("panio: error ..."), other programs
                continue
            for part in commands(line):
                if part.startswith("panio ") and "..." not in part and "…" not in part:
                    out.append(part)
    return out


def commands(line: str) -> list[str]:
    """The commands of a shell line: split at `;` and `|` and cut at a `#` comment, each outside quotes
    (a hook's quoted pipeline is one argument), so `a "x | y"; b | c  # note` is ``['a "x | y"', 'b']``."""
    out, start, quote, piped = [], 0, "", False
    for i, ch in enumerate(line + ";"):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            line = line[:i]
            ch = ";"
        if not quote and ch in ";|":
            if not piped:
                out.append(line[start:i].strip())
            piped, start = ch == "|", i + 1
            if i >= len(line):
                break
    return out


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_doc_examples_parse_against_the_live_cli(path):
    parser = build_parser(full=True)
    bad = []
    for line in examples(path):
        argv = [concrete(a) for a in shlex.split(line.replace("[", "").replace("]", ""))[1:]]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                parser.parse_args(argv)
        except SystemExit:  # --help in an example
            pass
        except Exception as exc:  # UsageError from Parser.error
            bad.append(f"{line}: {exc}")
    assert bad == []


def test_the_docs_have_examples_to_check():
    assert sum(len(examples(p)) for p in DOCS) > 60


# What the docs name as *not* a panio command ("There is no `panio shelly`"): each must stay unknown.
NOT_COMMANDS = {"panio flash", "panio shelly", "panio shellyplug", "panio adb reboot",
                "panio job list --tokn SECRET"}  # security.md: a misspelt option, whose value is not echoed


def code_spans(path: Path) -> list[str]:
    """The inline `panio ...` code spans of a page (its fenced blocks are `examples`' to check)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return [" ".join(span.split()) for span in re.findall(r"`(panio [a-z][^`]*)`", text)
            if not re.match(r"panio [\w-]+:", span)]  # output quoted in prose ("panio mcp: serving ...")


def _subcommands(parser):
    import argparse

    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def span_problems(parser, span: str) -> list[str]:
    """What of ``span`` panio does not have: its command words (down the tree, alternatives `a|b`, `a/b` and
    `{a,b}` each) and each option it names on that command. Placeholders and values are not checked."""
    try:
        words = shlex.split(span.replace("[", " ").replace("]", " "))[1:]
    except ValueError:
        words = span.split()[1:]
    p, path = parser, ["panio"]
    for i, word in enumerate(words):
        choices = _subcommands(p)
        if choices is None or word.startswith("-"):
            break
        alternatives = re.split(r"[|/,]", word.strip("{}"))
        missing = [a for a in alternatives if a not in choices]
        if missing:
            return [] if not word.islower() or word in ("...", "…") else [f"no command `{' '.join(path)} {missing[0]}`"]
        if len(alternatives) > 1:
            return []  # several commands: their options are not checked
        p, path = choices[word], path + [word]
    else:
        i = len(words)
    return [f"`{' '.join(path)}` has no option {w.split('=')[0]}" for w in words[i:]
            if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", w) and w.split("=")[0] not in p._option_string_actions]


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_every_command_and_option_the_prose_names_exists(path):
    """An inline `panio ...` in the docs names a command and options panio has (or one it says panio has not)."""
    parser = build_parser(full=True)
    bad = [f"`{span}`: {problem}" for span in code_spans(path) if span not in NOT_COMMANDS
           for problem in span_problems(parser, span)]
    assert bad == []


def test_what_the_docs_say_panio_has_not_it_has_not():
    parser = build_parser(full=True)
    assert all(span_problems(parser, span) for span in NOT_COMMANDS)
    assert sum(len(code_spans(p)) for p in DOCS) > 300
    assert span_problems(parser, "panio serial wait pico --since-moment") == [
        "`panio serial wait` has no option --since-moment"]
    assert span_problems(parser, "panio power cycle pico") == ["no command `panio power cycle`"]


def test_the_jobs_page_lists_exactly_the_runtime_commands():
    from controller.cli.commands import runtime_names

    text = " ".join((ROOT / "docs" / "jobs.md").read_text().split())
    listed = text[text.index("The allowed commands are:"):text.index("(the table is `RUNTIME`")]
    assert re.findall(r"`([^`]+)`", listed) == runtime_names()


def _resolves(ref: str) -> bool:
    """``ref`` (`bench_agent/jobs/steps.py`, `bench_agent.jobs.steps.execute`, `controller/cli/runtime.run_step`)
    is a file, or a module and the attributes after it."""
    import importlib

    if (ROOT / ref).exists():
        return True
    parts = re.split(r"[./]", ref.removesuffix(".py"))
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name, None)
        return obj is not None
    return False


def test_every_module_function_and_file_of_panio_the_docs_name_exists():
    """The docs name panio's own modules, functions and files (for contributors and for agents reading them): a
    rename or a move that leaves a page naming the old place fails here."""
    named = {ref for p in DOCS for ref in re.findall(
        r"`((?:bench_agent|controller|tests|benchmarks|scripts)(?:[./][A-Za-z_][\w-]*)+(?:\.[a-z]+)?)(?:\(\))?`",
        p.read_text())}
    assert len(named) > 100
    assert sorted(ref for ref in named if not _resolves(ref)) == []
