"""The MCP server: the SDK's low-level ``Server`` on stdio, one tool call at a time.

Uses the official ``mcp`` SDK, major version 2 (see docs/mcp.md for why): the
low-level server gives exact control over the advertised input schemas and
annotations and over the split between a failed command (a result with
``isError``) and a malformed call (a JSON-RPC error). The ``initialize``
handshake accepts revisions 2024-11-05 through 2025-11-25.

This is the only module that imports the SDK; ``panio mcp`` imports it on start.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from controller.mcp import args as tool_args
from controller.mcp import results, runner
from controller.mcp.tools import BY_NAME, TOOLS, ToolSpec

INSTRUCTIONS = (
    "panio drives hardware test benches. Start with target_list; every other tool takes a target, but "
    "bisect_status (a bisection's range, first bad build and probes, from the results database). "
    "Tools that change a target (serial_send, serial_transact, hid_send, action_run, power_on, power_off, "
    "power_cycle) "
    "are marked destructive or not read-only. A failed command comes back with isError and panio's exit code "
    "and JSON error; after an unreachable (4) or timeout (22) failure of a changing tool the outcome is unknown. "
    "Serial tools need the capture running (`panio serial watch TARGET` in a shell)."
)


def log(text: str) -> None:
    """Diagnostics go to stderr; stdout is the protocol."""
    sys.stderr.write(f"panio mcp: {text}\n")
    sys.stderr.flush()


class PanioTools:
    """The handlers: list the tool table, check a call, run its panio command."""

    def __init__(self, lab: Path, command: runner.Command) -> None:
        self.lab, self.command = lab, command  # command: the CLI's road (``controller.cli.main.run_captured``)
        self.one_at_a_time = anyio.Lock()

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(t) for t in TOOLS])

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = BY_NAME.get(params.name)
        if tool is None:
            near = tool_args.did_you_mean(params.name, list(BY_NAME))
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}{near}; tools: {', '.join(BY_NAME)}",
                           data={"tool": params.name, "tools": list(BY_NAME)})
        try:
            values = tool_args.check(tool, params.arguments)
        except tool_args.BadArguments as err:
            raise MCPError(types.INVALID_PARAMS, str(err), data={"tool": tool.name}) from None
        argv = tool.argv(values)
        deadline_s = tool.deadline_s(values, self._peek_lab())
        try:
            async with self.one_at_a_time:
                done = await runner.run(self.command, self.lab, argv, deadline_s)
        except anyio.get_cancelled_exc_class():
            log(f"{tool.name}: {results.command_line(argv)} -> cancelled by the client; stopped")
            raise
        text, is_error = results.render(done, tool.changes_target)
        outcome = "stopped at its deadline" if done.timed_out else f"exit {done.code}"
        log(f"{tool.name}: {results.command_line(argv)} -> {outcome} in {done.elapsed_s:.2f} s")
        if tool.image and not is_error:
            return _image_result(done.out)
        if tool.output_schema is not None and not is_error:
            return _structured_result(text, done.out)
        return _text_result(text, is_error)

    def _peek_lab(self) -> Any:
        """The lab, only to size deadlines (hook and action timeouts); the command reports a bad lab itself."""
        from bench_agent.errors import PanioError
        from controller.lab import load

        try:
            return load(self.lab)
        except (PanioError, OSError):
            return None


def _text_result(text: str, is_error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)


def _structured_result(text: str, out: str) -> types.CallToolResult:
    """The command's JSON twice: as text (what a client without outputSchema reads) and as structuredContent."""
    import json

    try:
        obj = json.loads(out)
    except ValueError:  # cut at the capture's limit: no structure to give, so the call cannot succeed as declared
        return _text_result(f"{text}\n(the output is not the JSON this tool declares: it was cut or malformed)", True)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=obj, is_error=False)


def _image_result(out: str) -> types.CallToolResult:
    """A screenshot: the PNG as image content, then the `signal=<s> hash=<h>` line (video_shot)."""
    import json

    shot = json.loads(out)
    line = f"signal={shot['signal']} hash={shot['hash']}"
    return types.CallToolResult(content=[types.ImageContent(data=shot["png_b64"], mime_type="image/png"),
                                         types.TextContent(text=line)], is_error=False)


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(name=spec.name, title=spec.title, description=spec.description,
                      input_schema=spec.input_schema(), output_schema=spec.output_schema,
                      annotations=types.ToolAnnotations.model_validate(spec.annotations(), by_name=False))


def build(lab: Path, version: str, command: runner.Command) -> Server:
    handlers = PanioTools(lab, command)
    return Server("panio", version=version, title="panio: hardware test benches", instructions=INSTRUCTIONS,
                  on_list_tools=handlers.list_tools, on_call_tool=handlers.call_tool)


async def serve(lab: Path, version: str, command: runner.Command) -> None:
    from controller.mcp.wire import CheckedStdin

    server = build(lab, version, command)
    stdin = CheckedStdin(sys.stdin.buffer, log)  # malformed JSON-RPC gets its -32700/-32600 reply
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):
        stdin.attach(write_stream)
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(lab: Path, version: str, command: runner.Command) -> None:
    """Serve until the client closes; each tool call runs ``command`` (``controller.cli.main.run_captured``)."""
    started = time.monotonic()
    log(f"serving {len(TOOLS)} tools over stdio for lab {lab}")
    anyio.run(serve, lab, version, command)
    log(f"client closed the connection after {time.monotonic() - started:.1f} s")
