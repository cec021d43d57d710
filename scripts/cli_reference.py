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

A runtime command that prints JSON (with `--json`, or always: `serial wait`,
`status`, `evidence`) shows its shape below its help: each field, its type
and what it means (`a.b`: field b of object a; `a[].b`: of each item of list
a; `?`: may be absent). The shape is declared once, beside the command's body
(`@command("serial.status", output=...)` in `bench_agent/commands/`); this
page and the MCP tools' `outputSchema` are generated from it, and a test runs
every such command on the simulated bench and validates its output against
it.

"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps sub-commands only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(parser: argparse.ArgumentParser, path: list[str], out: list[str], shown: set[str]) -> None:
    level = "#" * min(len(path) + 1, 4)
    out.append(f"{level} panio {' '.join(path)}\n\n```text\n{parser.format_help().rstrip()}\n```\n\n")
    name = _body_of(path)
    if name is not None:
        out.append(_shape_text(name))
        shown.add(name)
    for word, child in _subparsers(parser).items():
        _walk(child, [*path, word], out, shown)


def _body_of(path: list[str]) -> str | None:
    """The runtime command (``bench_agent.commands``) behind ``panio PATH`` that declares a JSON shape."""
    from bench_agent import commands

    words = [w.replace("-", "_") for w in path]
    if len(path) == 2:
        names = [".".join(words)]
    else:  # the top-level runtime commands: power-state, power-cycle, ping, discover, configure, doctor
        names = [path[0].replace("-", "."), f"system.{words[0]}", f"hardware.{words[0]}"]
    for name in names:
        try:
            commands.body(name)  # imports its group, which registers its shape
        except Exception:  # noqa: BLE001 - not a runtime command's name
            continue
        if name in commands.OUTPUTS:
            return name
    return None


def _shape_text(name: str) -> str:
    from bench_agent import commands

    shape = commands.OUTPUTS[name]
    how = "prints" if name in commands.ALWAYS_JSON else "`--json` prints"
    if shape["type"] == "array":
        head, rows = f"{how} a list, each item:", _rows(shape["items"], "")
    else:
        head, rows = f"{how}:", _rows(shape, "")
    table = "\n".join(f"| `{field}` | {kind} | {meaning} |" for field, kind, meaning in rows)
    return f"{head}\n\n| field | type | meaning |\n|---|---|---|\n{table}\n\n"


def _rows(shape: dict, prefix: str) -> list[tuple[str, str, str]]:
    """(field, type, meaning) of an object's fields, the fields of its nested objects after each."""
    rows = []
    required = set(shape.get("required", ()))
    for key, sub in shape.get("properties", {}).items():
        field = prefix + key + ("" if key in required else "?")
        meaning = sub.get("description", "").replace("|", "\\|")
        rows.append((field, _kind(sub), meaning))
        rows += _rows(_object_of(sub), f"{prefix}{key}{_path_of(sub)}.") if _object_of(sub) else []
    return rows


def _object_of(sub: dict) -> dict | None:
    """The object inside a field (itself, its list's items, its table's values) whose fields get rows too."""
    for inner in (sub, sub.get("items"), sub.get("additionalProperties")):
        if isinstance(inner, dict) and "properties" in inner:
            return inner
    return None


def _path_of(sub: dict) -> str:
    return "[]" if isinstance(sub.get("items"), dict) else ".NAME" if isinstance(
        sub.get("additionalProperties"), dict) else ""


def _kind(sub: dict) -> str:
    kinds = sub["type"] if isinstance(sub["type"], list) else [sub["type"]]
    words = []
    for k in kinds:
        if k == "array":
            inner = _kind(sub["items"]) if "type" in sub.get("items", {}) else ""
            words.append(f"list of {inner}" if " " in inner else f"list of {inner}s" if inner else "list")
        elif k == "object" and isinstance(sub.get("additionalProperties"), dict):
            words.append(f"table of {_kind(sub['additionalProperties'])} by name")
        else:
            words.append(k)
    return " or ".join(words)


def render() -> str:
    # panio wraps help to the terminal's width; with stdout not a terminal it uses 78 columns for everyone.
    with contextlib.redirect_stdout(io.StringIO()):
        return _render()


def _render() -> str:
    sys.path.insert(0, str(ROOT))
    from controller.cli.commands import COMMANDS
    from controller.cli.main import build_parser, top_help

    out = [HEADER, "## panio\n\n```text\n" + top_help().rstrip() + "\n```\n\n"]
    from bench_agent import commands as bodies

    commands = _subparsers(build_parser(full=True))
    shown: set[str] = set()
    for name in COMMANDS:
        _walk(commands[name], [name], out, shown)
    lost = sorted(set(bodies.OUTPUTS) - shown)
    if lost:  # a shape this page would not show: a command whose CLI words _body_of does not find
        raise SystemExit(f"no CLI command found for the JSON shapes of {', '.join(lost)}")
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
