"""A real MCP client for the tests: the SDK's stdio client spawning `panio mcp` as a subprocess."""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

PANIO = str(Path(sys.executable).parent / "panio")


class Client:
    """One initialized session; ``call`` returns (is_error, text), ``error`` expects a JSON-RPC error."""

    def __init__(self, session: ClientSession, init: types.InitializeResult) -> None:
        self.session = session
        self.init = init

    async def tools(self) -> dict[str, types.Tool]:
        return {t.name: t for t in (await self.session.list_tools()).tools}

    async def call(self, name: str, arguments: dict | None = None, timeout_s: float = 60) -> tuple[bool, str]:
        r = await self.session.call_tool(name, arguments or {}, read_timeout_seconds=timeout_s)
        assert len(r.content) == 1 and r.content[0].type == "text"
        return r.is_error, r.content[0].text

    async def ok(self, name: str, arguments: dict | None = None, timeout_s: float = 60) -> str:
        is_error, text = await self.call(name, arguments, timeout_s)
        assert not is_error, text
        return text

    async def ok_json(self, name: str, arguments: dict | None = None, timeout_s: float = 60):
        return json.loads(await self.ok(name, arguments, timeout_s))

    async def error(self, name: str, arguments: dict | None = None) -> MCPError:
        try:
            r = await self.session.call_tool(name, arguments or {})
        except MCPError as err:
            return err
        raise AssertionError(f"{name} {arguments}: expected a JSON-RPC error, got a result: {r}")


def failure(text: str) -> tuple[int, dict]:
    """The exit code and the one-line JSON error object of an isError result's text."""
    head = text.splitlines()[0]
    assert "failed: exit code " in head, text
    code = int(head.split("failed: exit code ")[1].split()[0])
    obj = next(json.loads(line) for line in text.splitlines() if line.startswith("{") and '"error"' in line)
    assert obj["exit"] == code, text
    return code, obj


@asynccontextmanager
async def connect(env: dict[str, str], *, version: str = "2025-11-25", lab: Path | None = None, errlog=None,
                  cwd: Path | None = None):
    """Spawn `panio [--lab LAB] mcp`, initialize at protocol ``version``, yield a ``Client``."""
    args = (["--lab", str(lab)] if lab else []) + ["mcp"]
    params = StdioServerParameters(command=PANIO, args=args, env=env, cwd=cwd)
    kwargs = {"errlog": errlog} if errlog is not None else {}
    async with stdio_client(params, **kwargs) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=120) as session:
            init = await session.send_request(
                types.InitializeRequest(params=types.InitializeRequestParams(
                    protocol_version=version, capabilities=types.ClientCapabilities(),
                    client_info=types.Implementation(name="panio-tests", version="0"))),
                types.InitializeResult)
            session.adopt(init)
            await session.send_notification(types.InitializedNotification())
            yield Client(session, init)
