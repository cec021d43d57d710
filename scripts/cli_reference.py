"""Write docs/commands.md from the live command tree: every command's --help, as panio prints it.

    python scripts/cli_reference.py           # rewrite docs/commands.md
    python scripts/cli_reference.py --check   # exit 1 if docs/commands.md is stale (tests/test_docs_site.py)

The page is generated, never edited: change a command's help and run this again.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "commands.md"

HEADER = """\
# Command reference

Every `panio` command's `--help`, generated from the live command tree by
`scripts/cli_reference.py` (a test fails when this page is stale). Start with
`panio skill` for the mental model; [exit statuses](exit-status.md) are listed
on their own page.

"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps sub-commands only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(parser: argparse.ArgumentParser, path: list[str], out: list[str]) -> None:
    level = "#" * min(len(path) + 1, 4)
    out.append(f"{level} panio {' '.join(path)}\n\n```text\n{parser.format_help().rstrip()}\n```\n\n")
    for name, child in _subparsers(parser).items():
        _walk(child, [*path, name], out)


def render() -> str:
    # panio wraps help to the terminal's width; with stdout not a terminal it uses 78 columns for everyone.
    with contextlib.redirect_stdout(io.StringIO()):
        return _render()


def _render() -> str:
    sys.path.insert(0, str(ROOT))
    from controller.cli.commands import COMMANDS
    from controller.cli.main import build_parser, top_help

    out = [HEADER, "## panio\n\n```text\n" + top_help().rstrip() + "\n```\n\n"]
    commands = _subparsers(build_parser(full=True))
    for name in COMMANDS:
        _walk(commands[name], [name], out)
    return "".join(out).rstrip() + "\n"


def main() -> int:
    check = "--check" in sys.argv[1:]
    text = render()
    if check:
        if not PAGE.exists() or PAGE.read_text() != text:
            sys.stderr.write(f"{PAGE.relative_to(ROOT)} is stale: run `python scripts/cli_reference.py`\n")
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
