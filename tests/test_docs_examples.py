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
            line = re.split(r"\s+#", line)[0]
            for part in line.split(";"):
                part = part.split(" | ")[0].strip()
                if part.startswith("panio ") and "..." not in part and "…" not in part:
                    out.append(part)
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
