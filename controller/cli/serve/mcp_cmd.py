"""panio mcp: serve the runtime commands as MCP tools over stdio (for agent harnesses)."""

from __future__ import annotations

import argparse
import os
import sys

DESCRIPTION = """\
Serve panio's runtime commands as Model Context Protocol (MCP) tools over
stdio, for an agent harness (Claude Code, any MCP client). The harness starts
it and keeps it running; stdout is the protocol, diagnostics go to stderr.
Each tool call runs the matching panio command against this lab file inside
the server's own process (no child panio per call; hooks and actions still
run as their own processes), with the CLI's text and exit code. Configuration
stays in the CLI.

Tools:
{tools}

Tools marked * change the target. A failed command comes back with isError,
the exit code and the JSON error; a malformed call (unknown tool, missing
target, out-of-range argument) is a JSON-RPC error."""

EPILOG = """\
example:
  panio --lab ~/lab.toml mcp              # what a harness runs; by hand it just waits for MCP on stdin
  claude mcp add panio -- panio mcp
  claude mcp add panio -- panio --lab ~/lab.toml mcp
  any harness: { "mcpServers": { "panio": { "command": "panio", "args": ["mcp"] } } }

see also: docs/mcp.md, panio skill, panio target list"""


def register(p: argparse.ArgumentParser, name: str) -> None:
    from controller.mcp.tools import TOOLS

    width = max(len(t.name) for t in TOOLS) + 3
    lines = [f"  {(t.name + ('*' if t.changes_target else '')).ljust(width)}{t.title}" for t in TOOLS]
    p.description = DESCRIPTION.format(tools="\n".join(lines))
    p.epilog = EPILOG
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from controller.cli.main import run_captured, version

    lab = Path(os.path.abspath(args.lab_path))
    if sys.stdin.isatty():
        sys.stderr.write("panio mcp: speaking MCP on stdin/stdout; an MCP client starts this "
                         "(see `panio mcp --help`). Ctrl-D stops it.\n")
    if not lab.exists():
        sys.stderr.write(f"panio mcp: warning: no lab file at {lab} ({args.lab_source}); "
                         "tools will fail with not_configured until it exists (`panio init`)\n")
    from controller.mcp import server  # the SDK loads only here, never for `panio --help`

    server.main(lab, version(), run_captured)  # each tool call: the CLI's own road, in this process
    return 0
