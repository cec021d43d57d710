"""The MCP tools whose result is a command's JSON advertise its declared shape as outputSchema and return the
JSON as structuredContent (beside the same text as before), read through the SDK's own client, which checks
the one against the other."""

from __future__ import annotations

import json
import re

import anyio
import jsonschema

from bench_agent import commands
from bench_agent.sim.console import PROMPT
from mcp_client import connect
from shapehelp import violations


def test_a_json_tool_declares_its_output_schema_and_returns_structured_content_that_fits(sim_bench):
    async def go():
        async with connect(sim_bench.env) as c:
            tools = await c.tools()
            results = {}
            for name, args in (("serial_status", {"target": "board0"}),
                               ("serial_transact", {"target": "board0", "text": "uname -a",
                                                    "until": re.escape(PROMPT), "timeout_ms": 10000})):
                r = await c.session.call_tool(name, args)  # the SDK validates structuredContent against the schema
                results[name] = r
            return tools, results

    tools, results = anyio.run(go)
    assert {n for n, t in tools.items() if t.output_schema} == {"serial_status", "serial_wait", "serial_evidence",
                                                                 "serial_transact"}
    commands.body("serial.status")  # its group declares its shape on import
    assert tools["serial_status"].output_schema == commands.OUTPUTS["serial.status"]
    assert tools["power_state"].output_schema is None and tools["video_shot"].output_schema is None
    for name, r in results.items():
        schema = tools[name].output_schema
        assert not r.is_error and r.structured_content is not None, r.content
        jsonschema.validate(r.structured_content, schema)
        assert violations(r.structured_content, schema) == []  # every field it returns is one the shape lists
        assert json.loads(r.content[0].text) == r.structured_content  # the text stays the command's JSON
    assert results["serial_transact"].structured_content["status"] == "matched"
