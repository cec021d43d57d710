"""`panio mcp` through a real MCP client: the SDK's stdio client spawning `panio mcp` as a subprocess.

Handshake at every accepted protocol revision, the tool table with its
annotations and bounds, target_list against a fixture lab, and every error
path: a failing command (isError with exit code and JSON), a malformed call
(unknown tool, missing target, out-of-range or wrong-typed argument: a
JSON-RPC error that names the bound, and nothing runs).
"""

from __future__ import annotations


import anyio
import mcp_types as types
import pytest

from mcp_client import connect, failure

REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
TOOLS = {"target_list", "serial_status", "serial_wait", "serial_evidence", "serial_log", "serial_send",
         "serial_transact", "action_list", "action_run", "power_state", "power_on", "power_off", "power_cycle",
         "video_shot", "video_read", "video_wait", "hid_send", "bisect_status"}
NO_TARGET = {"target_list", "bisect_status"}
CHANGERS = {"serial_send", "serial_transact", "action_run", "power_on", "power_off", "power_cycle", "hid_send"}


@pytest.fixture
def lab(panio):
    panio("init")
    panio("host", "add", "bench1", "--ssh", "lab@bench1.example")
    panio("target", "add", "pico", "--description", "Raspberry Pi 5", "--tag", "pi5")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/null")
    panio("serial", "add", "bmc", "-t", "pico", "--device", "/dev/null", "--baud", "9600")
    panio("action", "add", "logs", "-t", "pico", "--command", "true", "--host", "bench1")
    panio("target", "add", "far", "--host", "bench1")
    return panio


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


@pytest.mark.parametrize("version", REVISIONS)
def test_handshake_at_each_revision_then_tools_work(lab, version):
    async def go():
        async with connect(lab.env, version=version) as c:
            assert c.init.protocol_version == version
            assert c.init.server_info.name == "panio"
            assert c.init.capabilities.tools is not None
            tools = await c.tools()
            assert set(tools) == TOOLS
            assert all(t.annotations.read_only_hint is (n not in CHANGERS) for n, t in tools.items())
            targets = await c.ok_json("target_list")
            assert [t["name"] for t in targets] == ["pico", "far"]

    run(go)


def test_tools_carry_annotations_and_bounds(lab):
    async def go():
        async with connect(lab.env) as c:
            return await c.tools()

    tools = run(go)
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints is not None and hints.title, name
        assert hints.read_only_hint is (name not in CHANGERS), name
        if name in CHANGERS:
            assert hints.destructive_hint is not None and hints.idempotent_hint is not None, name
        required = tool.input_schema.get("required", [])
        assert set(required) <= set(tool.input_schema["properties"]), name
        assert tool.input_schema["additionalProperties"] is False
        assert ("target" in required) is (name not in NO_TARGET), name
    assert tools["power_off"].annotations.destructive_hint is True
    assert tools["power_on"].annotations.destructive_hint is False
    assert tools["power_on"].annotations.idempotent_hint is True
    assert tools["power_cycle"].annotations.idempotent_hint is False
    assert tools["target_list"].annotations.open_world_hint is False
    wait = tools["serial_wait"].input_schema
    assert set(wait["required"]) == {"target", "epoch", "since"}
    assert (wait["properties"]["timeout_ms"]["minimum"], wait["properties"]["timeout_ms"]["maximum"]) == (0, 3600000)
    assert (wait["properties"]["max_bytes"]["minimum"], wait["properties"]["max_bytes"]["maximum"]) == (1, 1048576)
    assert wait["properties"]["max_output_bytes"]["minimum"] == 4096
    assert wait["properties"]["max_output_bytes"]["maximum"] == 8388608
    transact = tools["serial_transact"].input_schema["properties"]
    assert transact["timeout_ms"] == {**transact["timeout_ms"], "minimum": 1, "maximum": 3600000, "default": 30000}
    assert transact["newline"]["default"] is True and transact["pace_ms"]["maximum"] == 10000
    assert tools["serial_evidence"].input_schema["properties"]["max_bytes"]["default"] == 65536
    assert tools["serial_log"].input_schema["properties"]["tail"]["maximum"] == 5000
    assert set(tools["serial_transact"].input_schema["required"]) == {"target", "text", "until"}


def test_target_list_reports_the_fixture_lab(lab):
    async def go():
        async with connect(lab.env) as c:
            return await c.ok_json("target_list")

    pico, far = run(go)
    assert pico["description"] == "Raspberry Pi 5" and pico["tags"] == ["pi5"]
    assert pico["channels"] == ["serial"]
    assert pico["channel_details"] == [{"kind": "serial", "name": "console", "host": None},
                                       {"kind": "serial", "name": "bmc", "host": None}]
    assert pico["hosts"] == [None, "bench1"]  # null: this machine; bench1 runs the `logs` action
    assert far["host"] == "bench1" and far["hosts"] == ["bench1"] and far["channel_details"] == []


def test_lab_flag_before_mcp_selects_the_lab(lab, tmp_path):
    other = tmp_path / "other.toml"
    lab("--lab", str(other), "init")
    lab("--lab", str(other), "target", "add", "solo")

    async def go():
        async with connect(lab.env, lab=other) as c:
            return await c.ok_json("target_list")

    assert [t["name"] for t in run(go)] == ["solo"]


def test_failing_command_is_an_error_result_with_exit_code_and_json(lab):
    async def go():
        async with connect(lab.env) as c:
            missing = await c.call("action_list", {"target": "nope"})
            listed = await c.ok_json("action_list", {"target": "pico"})
            ambiguous = await c.call("serial_log", {"target": "pico"})
            return missing, listed, ambiguous

    (is_error, text), listed, (amb_error, amb_text) = run(go)
    assert is_error
    code, obj = failure(text)
    assert code == 3 and obj["error"] == "not_configured" and "nope" in obj["message"]
    assert text.splitlines()[0].startswith("`panio action list --json -- nope` failed: exit code 3")
    assert "outcome is unknown" not in text  # a reading tool
    assert listed == [{"name": "logs", "description": "", "command": "true", "requires_power": False,
                       "host": "bench1"}]
    assert amb_error  # two interfaces and none chosen: the CLI's usage error, passed through
    code, obj = failure(amb_text)
    assert code == 2 and "console, bmc" in obj["message"]


def test_bisect_status_is_what_panio_bisect_status_json_prints(lab, tmp_path):
    """Read through the CLI's road: no bisection yet is the CLI's error (3); after a real bisection (eight builds,
    b06 the first bad one), the newest or a named one is `panio bisect status --json`, byte for byte parsed; an
    id below 1 is a malformed call."""
    from bisecthelp import bisect, deploy_actions

    none_yet = lab.fails("bisect", "status", "--json", code=3).error

    async def before():
        async with connect(lab.env) as c:
            return await c.call("bisect_status")

    is_error, text = run(before)
    assert is_error and failure(text) == (3, none_yet)
    deploy_actions(lab, "pico")
    done = bisect(lab, tmp_path, "pico")
    cli = lab("bisect", "status", "--json").json()

    async def after():
        async with connect(lab.env) as c:
            tools = await c.tools()
            return (tools["bisect_status"], await c.ok_json("bisect_status"),
                    await c.ok_json("bisect_status", {"id": done["id"]}), await c.call("bisect_status", {"id": 7}),
                    await c.error("bisect_status", {"id": 0}))

    tool, newest, named, (missing, missing_text), bad_id = run(after)
    assert tool.annotations.read_only_hint is True and "required" not in tool.input_schema
    assert newest == named == cli and cli["first_bad"] == "b06" and cli["probes"][0]["job_id"] >= 1
    assert missing and failure(missing_text) == (3, lab.fails("bisect", "status", "7", "--json", code=3).error)
    assert bad_id.code == types.INVALID_PARAMS and "minimum 1" in bad_id.message


def test_bad_lab_file_fails_every_tool_as_a_result(lab):
    lab.lab.write_text("[targets.pico\n")

    async def go():
        async with connect(lab.env) as c:
            return await c.call("target_list")

    is_error, text = run(go)
    code, obj = failure(text)
    assert is_error and code == 5 and obj["error"] == "config_invalid"


MALFORMED = [
    ("no_such_tool", {}, "unknown tool 'no_such_tool'; tools: target_list"),
    ("power_cyle", {"target": "pico"}, "unknown tool 'power_cyle'; did you mean 'power_cycle'?"),
    ("serial_read", {"target": "pico"}, "unknown tool 'serial_read'; tools:"),  # never pointed at serial_send
    ("serial_log", {"target": "pico", "lines": 5}, "unknown argument(s) lines (arguments:"),
    ("serial_wait", {"target": "pico", "epoch": 1, "since": 0, "timeout": 5000},
     "unknown argument(s) timeout; did you mean 'timeout_ms'?"),
    ("video_wait", {"target": "pico"}, "missing required argument 'text'"),
    ("hid_send", {"target": "pico", "command": "key ENTER"},
     "command must be of type array, got string 'key ENTER' (one HID command as an array of words, "
     "e.g. [\"key\", \"ENTER\"])"),
    ("serial_status", {}, "missing required argument 'target'"),
    ("power_cycle", {"level": "hard"}, "missing required argument 'target'"),
    ("serial_wait", {"target": "pico", "epoch": 1, "since": 0, "timeout_ms": 3600001},
     "timeout_ms = 3600001 is above the maximum 3600000"),
    ("serial_wait", {"target": "pico", "epoch": 1, "since": 0, "max_output_bytes": 100},
     "max_output_bytes = 100 is below the minimum 4096"),
    ("serial_transact", {"target": "pico", "text": "x", "until": "#", "timeout_ms": 0},
     "timeout_ms = 0 is below the minimum 1"),
    ("serial_send", {"target": "pico", "text": "x", "pace_ms": 10001}, "pace_ms = 10001 is above the maximum 10000"),
    ("serial_log", {"target": "pico", "tail": 5001}, "tail = 5001 is above the maximum 5000"),
    ("serial_evidence", {"target": "pico", "max_bytes": 0}, "max_bytes = 0 is below the minimum 1"),
    ("serial_wait", {"target": "pico", "epoch": 1}, "missing required argument 'since'"),
    ("serial_wait", {"target": "pico", "epoch": "1", "since": 0}, "epoch must be of type integer, got string '1'"),
    ("serial_send", {"target": "pico", "text": "x", "newline": "no"}, "newline must be of type boolean"),
    ("serial_send", {"target": "pico"}, "missing required argument 'text'"),
    ("serial_status", {"target": "pico", "verbose": True}, "unknown argument(s) verbose"),
    ("serial_status", {"target": "-h"}, "'-h' is not a valid name"),
    ("serial_log", {"target": "pico", "tail": 5, "since": 3}, "at most one of tail, since, from"),
    ("serial_log", {"target": "pico", "to": 9}, "to needs from"),
    ("serial_evidence", {"target": "pico", "since": 10}, "since needs epoch"),
    ("action_run", {"target": "pico"}, "missing required argument 'name'"),
]


def test_malformed_calls_are_json_rpc_errors_and_run_nothing(lab):
    server_log = lab.lab.parent / "server.err"  # a real file: the SDK hands it to the child as its stderr

    async def go():
        with open(server_log, "w") as errlog:
            async with connect(lab.env, errlog=errlog) as c:
                errors = [await c.error(name, args) for name, args, _ in MALFORMED]
                await c.ok("target_list")  # the session survives them all
        return errors

    for (name, args, expected), err in zip(MALFORMED, run(go)):
        assert err.code == types.INVALID_PARAMS, (name, args, err)
        assert expected in err.message, (name, args, err.message)
    ran = [line for line in server_log.read_text().splitlines() if "->" in line]
    assert len(ran) == 1 and ran[0].startswith("panio mcp: target_list:"), ran


def test_help_stays_light_and_mcp_help_lists_the_tools(panio):
    import subprocess
    import sys

    code = ("import sys\nfrom controller.cli import main\nmain.main(['--help'])\nmain.main(['mcp', '--help'])\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'anyio', 'pydantic')]\n"
            "sys.exit(1 if bad else 0)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=panio.env, timeout=30)
    assert p.returncode == 0, p.stderr
    assert "serial_transact*" in p.stdout and "power_cycle*" in p.stdout and "target_list " in p.stdout
    assert "claude mcp add panio -- panio mcp" in p.stdout


def test_json_error_of_a_tool_result_matches_the_cli(lab):
    cli = lab.fails("action", "list", "ghost", "--json", code=3).error

    async def go():
        async with connect(lab.env) as c:
            return await c.call("action_list", {"target": "ghost"})

    is_error, text = run(go)
    _, obj = failure(text)
    assert is_error and obj == cli


def test_argv_puts_flags_first_and_positionals_after_a_double_dash():
    from controller.mcp.tools import BY_NAME

    send = BY_NAME["serial_send"].argv({"target": "pico", "text": "-h", "newline": False, "pace_ms": 5})
    assert send == ["serial", "send", "--no-newline", "--pace-ms=5", "--", "pico", "-h"]
    assert BY_NAME["serial_send"].argv({"target": "pico", "text": "x", "newline": True}) == \
        ["serial", "send", "--", "pico", "x"]
    wait = BY_NAME["serial_wait"].argv({"target": "pico", "epoch": 2, "since": 0, "pattern": "-x", "follow": True,
                                        "include_pending": False})
    assert wait == ["serial", "wait", "--epoch=2", "--since=0", "--pattern=-x", "--follow", "--", "pico"]
    assert BY_NAME["target_list"].argv({}) == ["target", "list", "--json"]
    assert BY_NAME["power_cycle"].argv({"target": "pi5", "level": "hard"}) == \
        ["power-cycle", "--level=hard", "--", "pi5"]


def test_deadlines_follow_the_tool_bound_and_the_lab(lab):
    from controller.lab import load
    from controller.mcp.tools import BY_NAME, DEFAULT_DEADLINE_S, MARGIN_S

    lab("power", "set", "-t", "pico", "--cycle-cmd", "true", "--timeout-s", "5", "--cycle-off-s", "1")
    lab("action", "add", "flash", "-t", "pico", "--command", "true", "--timeout-s", "90")
    parsed = load(lab.lab)
    assert BY_NAME["serial_wait"].deadline_s({"timeout_ms": 3600000}, parsed) == 3600 + MARGIN_S
    assert BY_NAME["serial_wait"].deadline_s({}, parsed) == 30 + MARGIN_S
    assert BY_NAME["serial_send"].deadline_s({"text": "ab", "pace_ms": 1000}, parsed) == 4 + MARGIN_S  # 2 + CR LF
    assert BY_NAME["power_cycle"].deadline_s({"target": "pico"}, parsed) == 2 * 5 + 1 + MARGIN_S
    assert BY_NAME["power_cycle"].deadline_s({"target": "far"}, parsed) == 2 * 30 + 2 + MARGIN_S
    assert BY_NAME["power_on"].deadline_s({"target": "pico"}, parsed) == 5 + MARGIN_S  # one hook
    assert BY_NAME["action_run"].deadline_s({"target": "pico", "name": "flash"}, parsed) == 90 + MARGIN_S
    assert BY_NAME["action_run"].deadline_s({"target": "pico", "name": "logs"}, None) == 600 + MARGIN_S
    assert BY_NAME["target_list"].deadline_s({}, parsed) == DEFAULT_DEADLINE_S


def test_a_bug_in_a_call_is_an_internal_error_result(tmp_path, monkeypatch):
    """The call runs in the server's process: whatever it raises is its result (70), never the server's end."""
    from controller.mcp import results, runner

    def broken(argv, out):
        raise RuntimeError("a bug")

    done = anyio.run(runner.run, broken, tmp_path / "lab.toml", ["target", "list", "--json"], 10)
    assert done.code == 70
    code, obj = failure(results.render(done, changes_target=False)[0])
    assert code == 70 and obj["error"] == "internal" and "RuntimeError: a bug" in obj["message"]


def test_a_changing_tool_says_outcome_unknown_unless_the_error_says_nothing_was_sent():
    import json

    from controller.mcp import results
    from controller.mcp.runner import Finished

    def rendered(obj):
        return results.render(Finished(["hid", "send", "--", "pico", "key", "a"], 4, "", json.dumps(obj), 0.1, 60),
                              changes_target=True)[0]

    unknown = {"error": "unreachable", "exit": 4, "message": "HID rig: no answer", "outcome": "unknown"}
    assert results.UNKNOWN_OUTCOME in rendered(unknown)
    assert results.UNKNOWN_OUTCOME not in rendered({**unknown, "message": "HID rig: cannot open", "outcome": "none"})


def test_a_project_controller_package_in_the_working_directory_does_not_shadow_panio(lab, tmp_path):
    project = tmp_path / "project"
    (project / "controller" / "cli").mkdir(parents=True)
    for init in ("controller/__init__.py", "controller/cli/__init__.py"):
        (project / init).write_text("")
    (project / "controller" / "cli" / "main.py").write_text("print('not panio')\n")

    async def go():
        async with connect(lab.env, cwd=project) as c:
            return await c.ok_json("target_list")

    assert [t["name"] for t in run(go)] == ["pico", "far"]
