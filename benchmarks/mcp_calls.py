"""An MCP tool call, in-process, against the same command as a `panio` child (what each call cost before).

One `panio mcp` session (the official SDK's stdio client) and one lab with a
target whose power state comes from a hook (`echo on`). Alternating, call by
call (ABAB, so machine noise hits both sides alike):

  A  the `power_state` tool through the session (the server runs the command
     in its own process: issue 21, item 2);
  B  the same command as the server ran it before, one child per call:
     `python -P -m controller.cli.main --lab LAB power-state pico`.

Both run the same hook. Prints each side's median, the median of the paired
ratios A/B, the load average, and the goal beside it: A <= 0.5x B.

    .venv/bin/python benchmarks/mcp_calls.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 0.5
PANIO = str(Path(sys.executable).parent / "panio")


async def measure(env: dict[str, str], lab: Path, rounds: int) -> tuple[list[float], list[float]]:
    import mcp_types as types
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from bench_agent.process import panio_argv

    child = [*panio_argv(), "--lab", str(lab), "power-state", "pico"]
    inproc: list[float] = []
    children: list[float] = []
    params = StdioServerParameters(command=PANIO, args=["mcp"], env=env)
    with open(os.devnull, "w") as quiet:  # the server logs each call on stderr
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            init = await session.send_request(
                types.InitializeRequest(params=types.InitializeRequestParams(
                    protocol_version="2025-11-25", capabilities=types.ClientCapabilities(),
                    client_info=types.Implementation(name="panio-bench", version="0"))),
                types.InitializeResult)
            session.adopt(init)
            await session.send_notification(types.InitializedNotification())
            for i in range(rounds + 1):  # the first round warms both sides and is dropped
                start = time.perf_counter()
                r = await session.call_tool("power_state", {"target": "pico"})
                a = time.perf_counter() - start
                assert not r.is_error, r.content
                start = time.perf_counter()
                subprocess.run(child, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                b = time.perf_counter() - start
                if i:
                    inproc.append(a)
                    children.append(b)
    return inproc, children


def main() -> int:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lab = Path(tmp) / "lab.toml"
        env = {**os.environ, "PANIO_LAB": str(lab), "PANIO_STATE_DIR": tmp, "HOME": tmp}
        for argv in (["init"], ["target", "add", "pico"], ["power", "set", "-t", "pico", "--state-cmd", "echo on"]):
            subprocess.run([PANIO, *argv], env=env, check=True, stdout=subprocess.DEVNULL)
        inproc, children = anyio.run(measure, env, lab, opts.rounds)
    ratio = statistics.median(a / b for a, b in zip(inproc, children))
    load = os.getloadavg()[0]
    print(f"{'side':<42} {'median ms':>10}   ({opts.rounds} rounds, alternating A B A B)")
    print(f"{'A  power_state through panio mcp':<42} {statistics.median(inproc) * 1000:>10.1f}")
    print(f"{'B  the same command as a panio child':<42} {statistics.median(children) * 1000:>10.1f}")
    met = "met" if ratio <= GOAL else "NOT met"
    print(f"median of paired ratios A/B = {ratio:.3f}   goal <= {GOAL}: {met}   (load average {load:.1f})")
    return 0  # measured: met or not is in the line above (a failed benchmark is one that could not measure)


if __name__ == "__main__":
    sys.exit(main())
