"""`panio mcp` end to end against the simulated bench (panio-sim): serial and power tools through a real client.

Send a command and read it back with serial_wait; power-cycle and see the
second boot; a target-changing tool that fails as timeout says the outcome is
unknown; a call past its deadline is stopped with everything it started; a
call runs in the server's own process (no `panio` child) and its text is the
CLI's for the same command, success or failure.
"""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path

import anyio

from bench_agent.process import pid_alive
from bench_agent.sim.console import PROMPT
from controller.mcp import results, runner
from jobhelp import wait_gone
from mcp_client import connect, failure

BANNER = "panio simulated board board0"


def test_send_and_read_back_then_power_cycle_shows_the_second_boot(sim_bench):
    async def go():
        async with connect(sim_bench.env) as c:
            status = await c.ok_json("serial_status", {"target": "board0"})
            epoch, cursor = status["epoch"], status["rx"]["cursor"]

            # First boot seen through MCP: power-cycle, then wait for the banner and the shell prompt.
            assert await c.ok("power_cycle", {"target": "board0"}) == "board0: power-cycled (cycle_cmd)"
            boot = await c.ok_json("serial_wait", {"target": "board0", "epoch": epoch, "since": cursor,
                                                   "pattern": re.escape(PROMPT), "timeout_ms": 15000})
            assert boot["status"] == "matched" and BANNER in boot["text"]

            # Send a command and read its output back from the cursor the wait returned.
            sent = await c.ok("serial_send", {"target": "board0", "text": "echo mcp-roundtrip-42"})
            assert "sent" in sent
            echo = await c.ok_json("serial_wait", {"target": "board0", "epoch": epoch, "since": boot["cursor"],
                                                   "pattern": r"\nmcp-roundtrip-42\r?\n", "timeout_ms": 10000})
            assert echo["status"] == "matched" and "echo mcp-roundtrip-42" in echo["text"]

            reply = await c.ok_json("serial_transact", {"target": "board0", "text": "uname -a",
                                                        "until": re.escape(PROMPT), "timeout_ms": 10000})
            assert reply["status"] == "matched" and reply["sent_bytes"] == len("uname -a\r")
            assert "Linux" in reply["text"]
            assert await c.ok("power_state", {"target": "board0"}) == "Power ON (board0)"
            dash = await c.ok_json("serial_transact", {"target": "board0", "text": "--help", "newline": True,
                                                       "until": re.escape(PROMPT), "timeout_ms": 10000})
            assert "sh: --help: not found" in dash["text"]  # typed, not parsed as a flag

            # The second boot.
            assert await c.ok("power_cycle", {"target": "board0"}) == "board0: power-cycled (cycle_cmd)"
            again = await c.ok_json("serial_wait", {"target": "board0", "epoch": epoch, "since": dash["cursor"],
                                                    "pattern": re.escape(PROMPT), "timeout_ms": 15000})
            assert again["status"] == "matched" and BANNER in again["text"]
            log = await c.ok("serial_log", {"target": "board0", "tail": 500})
            evidence = await c.ok_json("serial_evidence", {"target": "board0", "epoch": epoch,
                                                           "since": again["cursor"] - 12})
            return log, evidence, epoch, again["cursor"]

    log, evidence, epoch, end = anyio.run(go)
    lines = log.splitlines()
    assert sum(BANNER in line for line in lines) == 2, log  # two boots, both started through MCP
    assert any("mcp-roundtrip-42" in line for line in lines) and all(re.match(r"\[[\d:.]+\] #\d+", l) for l in lines)
    assert evidence["epoch"] == epoch and evidence["window"] == {"from": end - 12, "to": end}
    exact = b"".join(base64.b64decode(r["data_b64"]) for r in evidence["records"] if "data_b64" in r)
    assert exact.endswith(PROMPT.encode()) and len(exact) == 12


def test_wait_that_times_out_is_an_error_that_still_returns_the_bytes(sim_bench):
    async def go():
        async with connect(sim_bench.env) as c:
            status = await c.ok_json("serial_status", {"target": "board0"})
            return await c.call("serial_wait", {"target": "board0", "epoch": status["epoch"],
                                                "since": status["rx"]["cursor"], "pattern": "never-printed",
                                                "timeout_ms": 300})

    is_error, text = anyio.run(go)
    code, obj = failure(text)
    assert is_error and code == 22 and obj["error"] == "timeout" and obj["status"] == "timeout"
    assert "outcome is unknown" not in text  # serial_wait only reads
    partial = json.loads(text.split("output before the failure:\n", 1)[1])
    assert partial["status"] == "timeout" and partial["cursor"] == obj["cursor"]


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_changing_tool_failing_as_timeout_says_the_outcome_is_unknown(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--off-cmd", _script(tmp_path, "hang", "sleep 30"), "--timeout-s", "0.5",
          "--on-cmd", _script(tmp_path, "bad", "echo relay 3 not found >&2; exit 5"))

    async def go():
        async with connect(panio.env) as c:
            return (await c.call("power_off", {"target": "pico"}), await c.call("power_on", {"target": "pico"}),
                    await c.call("power_on", {"target": "pico", "level": "hard"}))

    (off_err, off), (on_err, on), (lvl_err, lvl) = anyio.run(go)
    code, obj = failure(off)
    assert off_err and code == 22 and obj["error"] == "timeout"
    assert results.UNKNOWN_OUTCOME in off
    code, obj = failure(on)
    assert on_err and code == 9 and "relay 3 not found" in obj["message"]
    assert results.UNKNOWN_OUTCOME not in on  # the hook ran and said no: the outcome is known
    code, obj = failure(lvl)
    assert lvl_err and code == 3 and obj["error"] == "not_configured"


def test_call_past_its_deadline_is_stopped_with_everything_it_started(panio, tmp_path, monkeypatch):
    pidfile = tmp_path / "action.pid"
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "soak", "-t", "pico", "--command",
          _script(tmp_path, "soak", f"echo $$ > {pidfile}; exec sleep 60"))
    for name in ("PANIO_STATE_DIR", "HOME"):  # the call runs in this process: the test's own state, as the server's
        monkeypatch.setenv(name, panio.env[name])

    started = time.monotonic()
    from controller.cli.main import run_captured  # what `panio mcp` hands its server

    done = anyio.run(runner.run, run_captured, panio.lab, ["action", "run", "pico", "soak"], 5)
    assert done.timed_out and time.monotonic() - started < 40  # the deadline, not the action's 60 s
    text, is_error = results.render(done, changes_target=True)
    code, obj = failure(text)
    assert is_error and code == 22 and "within 5 s" in obj["message"] and results.UNKNOWN_OUTCOME in text
    wait_gone(int(pidfile.read_text()), what="the action process outlived the call")


def test_action_output_cannot_corrupt_the_protocol_stream(panio, tmp_path):
    fake = '{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}'
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "chatty", "-t", "pico", "--command", _script(
        tmp_path, "chatty", f"echo '{fake}'; yes x | head -n 100000 | tr -d '[:space:]'; echo; echo progress >&2"))

    async def go():
        async with connect(panio.env) as c:
            out = await c.ok("action_run", {"target": "pico", "name": "chatty"})
            return out, await c.ok_json("target_list")

    out, targets = anyio.run(go)
    assert out.startswith(fake) and "x" * 100000 in out and out.endswith("note: progress")
    assert [t["name"] for t in targets] == ["pico"]  # the session is intact


def test_cancelled_call_stops_the_command_and_what_it_started(panio, tmp_path):
    pidfile = tmp_path / "action.pid"
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "soak", "-t", "pico", "--command",
          _script(tmp_path, "soak", f"echo $$ > {pidfile}; exec sleep 60"))

    async def go():
        async with connect(panio.env) as c:
            async with anyio.create_task_group() as tg:
                tg.start_soon(c.call, "action_run", {"target": "pico", "name": "soak"})
                with anyio.fail_after(60):  # the action is running: now the client gives up on the call
                    while not (pidfile.exists() and pidfile.read_text().strip()):
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
            pid = int(pidfile.read_text())
            with anyio.move_on_after(60):  # the server stops it on the cancellation (wait_gone below asserts it)
                while pid_alive(pid):
                    await anyio.sleep(0.05)
            return pid, await c.ok_json("action_list", {"target": "pico"})

    pid, actions = anyio.run(go)
    wait_gone(pid, what="the action process outlived the cancelled call")
    assert [a["name"] for a in actions] == ["soak"]  # the server serves the next call


def test_calls_run_one_at_a_time(panio, tmp_path):
    spans = tmp_path / "spans"
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "nap", "-t", "pico", "--command", _script(
        tmp_path, "nap", f"python3 -c 'import time; print(time.time())' >> {spans}; sleep 0.7; "
                         f"python3 -c 'import time; print(time.time())' >> {spans}"))

    async def go():
        async with connect(panio.env) as c:
            async with anyio.create_task_group() as tg:
                for _ in range(2):
                    tg.start_soon(c.ok, "action_run", {"target": "pico", "name": "nap"})

    anyio.run(go)
    start1, end1, start2, end2 = (float(x) for x in spans.read_text().split())
    assert start2 >= end1, "the second call started before the first one ended"


def test_a_call_runs_in_the_server_not_in_a_panio_child(panio, tmp_path):
    """Before: every call ran `python -P -m controller.cli.main --lab LAB ...`; the action's parent was that child."""
    parents = tmp_path / "parents"
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "who", "-t", "pico", "--command", _script(
        tmp_path, "who", f"tr '\\0' ' ' < /proc/$PPID/cmdline >> {parents}; echo >> {parents}; echo $PPID >> {parents}"))

    async def go():
        async with connect(panio.env) as c:
            for _ in range(3):
                await c.ok("action_run", {"target": "pico", "name": "who"})

    anyio.run(go)
    lines = parents.read_text().splitlines()
    cmdlines, pids = lines[0::2], {int(p) for p in lines[1::2]}
    assert len(cmdlines) == 3 and len(pids) == 1, lines  # one process ran all three calls: the server
    assert all(c.rstrip().endswith(" mcp") and "controller.cli.main" not in c for c in cmdlines), cmdlines


def test_a_tools_text_is_the_clis_for_the_same_command(panio, tmp_path):
    """Success (stdout, with stderr notes), a failing hook (exit 9), a usage error (2) and a static command:
    each tool result is exactly what rendering the `panio` process's own output gives."""
    from controller.mcp.tools import BY_NAME

    panio("init")
    panio("target", "add", "pico", "--description", "a board")
    panio("power", "set", "-t", "pico", "--on-cmd", _script(tmp_path, "bad", "echo relay 3 not found >&2; exit 5"),
          "--state-cmd", _script(tmp_path, "plugstate", "echo on"))
    panio("action", "add", "chatty", "-t", "pico", "--command",
          _script(tmp_path, "chatty", "echo line one; echo progress >&2; echo line two"))
    calls = [("action_run", {"target": "pico", "name": "chatty"}), ("power_on", {"target": "pico"}),
             ("power_state", {"target": "pico"}), ("action_run", {"target": "pico", "name": "nosuch"}),
             ("target_list", {}), ("action_list", {"target": "pico"})]

    async def go():
        async with connect(panio.env) as c:
            return [await c.call(name, args) for name, args in calls]

    got = anyio.run(go)
    for (name, args), (is_error, text) in zip(calls, got):
        tool = BY_NAME[name]
        argv = tool.argv(args)
        cli = panio("--lab", str(panio.lab), *argv, check=False)
        finished = runner.Finished(argv, cli.code, cli.out, cli.err, 0.0, 60.0)
        assert (text, is_error) == results.render(finished, tool.changes_target), (name, cli.err)
    assert [e for e, _ in got] == [False, True, False, True, False, False]
    assert failure(got[1][1])[0] == 9 and failure(got[3][1])[0] == 3
