"""Each operation's facts are written once, in its spec, and the CLI, MCP and `job check` are derived from it.

These tests walk the live surfaces and compare them with ``ops.spec``: a bound
typed a second time somewhere would drift, and fail here.
"""

from __future__ import annotations

import argparse

import pytest

from bench_agent import ops
from bench_agent.errors import UsageError
from bench_agent.ops.spec import HUGE

GROUPS = ("serial", "power", "action", "daemons", "system")


def all_specs():
    for group in GROUPS:
        __import__(f"bench_agent.ops.{group}")
    return dict(ops.SPECS)


def test_every_operation_has_a_full_spec():
    specs = all_specs()
    assert {"serial.wait", "serial.send", "power.cycle", "power.state", "action.run", "daemons.stop"} <= set(specs)
    for name, spec in specs.items():
        for p in spec.params:
            assert p.help, f"{name}.{p.name} has no help"
            if p.name.endswith("_ms"):
                assert p.unit == "ms", f"{name}.{p.name}: a duration carries its unit"
        if any(p.name in ("timeout_ms", "timeout_s") for p in spec.params):
            assert spec.deadline is not None, f"{name} has a timeout but no deadline"
    reads = {"serial.log", "serial.status", "serial.evidence", "serial.wait", "power.state", "system.ping"}
    assert not any(specs[n].side_effect for n in reads)
    changes = {"serial.send", "serial.transact", "serial.reset", "serial.dtr", "serial.connect", "power.on",
               "power.off", "power.cycle", "action.run"}
    assert all(specs[n].side_effect for n in changes)
    assert [n for n, s in specs.items() if s.interactive] == ["serial.connect"]


def _runtime_commands():
    """(argparse parser, operation) for every runtime leaf command that maps onto one operation."""
    from controller.cli.main import build_parser

    top = build_parser(full=True)
    groups = {a.dest: a for a in top._actions if isinstance(a, argparse._SubParsersAction)}["command"].choices
    out = []
    for group, prefix in (("serial", "serial"), ("power", "power")):
        sub = next(a for a in groups[group]._actions if isinstance(a, argparse._SubParsersAction)).choices
        for verb, parser in sub.items():
            if f"{prefix}.{verb}" in ops.SPECS:
                out.append((f"{group} {verb}", parser, f"{prefix}.{verb}"))
    out += [("power-cycle", groups["power-cycle"], "power.cycle"), ("power-state", groups["power-state"], "power.state")]
    return out


def test_cli_flags_take_type_bounds_and_defaults_from_the_spec():
    all_specs()
    seen = 0
    for command, parser, op in _runtime_commands():
        spec = ops.spec(op)
        for action in parser._actions:
            param = spec.param(action.dest)
            if param is None:
                continue
            seen += 1
            if param.kind is bool:
                assert isinstance(action, argparse._StoreTrueAction), (command, action.dest)
                continue
            assert action.default == (None if param.required else param.default), (command, action.dest)
            assert action.required == param.required, (command, action.dest)
            if param.maximum is not None:
                with pytest.raises(argparse.ArgumentTypeError, match="must be"):
                    action.type(str(int(param.maximum) + 1))
                assert action.type(str(int(param.maximum))) == param.maximum
                if param.maximum < HUGE:
                    assert str(int(param.maximum)) in action.help, (command, action.dest, action.help)
            if param.minimum is not None and param.kind is int:
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type(str(int(param.minimum) - 1))
    assert seen >= 25  # every serial and power flag above was compared


def test_mcp_schemas_and_annotations_come_from_the_spec():
    from controller.mcp.tools import TOOLS

    for tool in TOOLS:
        if tool.op is None:
            assert tool.annotations()["readOnlyHint"] is True
            continue
        spec = ops.spec(tool.op)
        hints = tool.annotations()
        assert hints["readOnlyHint"] is (not spec.side_effect), tool.name
        if spec.side_effect:
            assert hints["destructiveHint"] is spec.extra.get("destructive", True), tool.name
        props = tool.input_schema()["properties"]
        for arg in tool.args:
            if arg.param is None:
                continue
            param = spec.param(arg.param)
            schema = props[arg.name]
            assert schema.get("minimum") == param.minimum, (tool.name, arg.name)
            if param.maximum is not None and param.maximum < HUGE:
                assert schema["maximum"] == param.maximum, (tool.name, arg.name)
            if not param.required and param.default is not None:
                assert schema["default"] == param.default, (tool.name, arg.name)
            # a tool may ask for more than its operation needs (serial_wait names its cursor; only the CLI can
            # start from a moment), never less
            if param.required:
                assert arg.name in tool.input_schema().get("required", []), (tool.name, arg.name)


def test_a_spec_bound_changed_once_changes_cli_and_mcp(monkeypatch):
    """The proof that nothing is copied: move a bound in the spec and both surfaces follow."""

    from controller.cli.common import spec_type
    from controller.mcp.tools import from_spec

    spec = ops.spec("serial.send")
    narrowed = tuple(p._replace(maximum=500) if p.name == "pace_ms" else p for p in spec.params)
    monkeypatch.setitem(ops.SPECS, "serial.send", spec._replace(params=narrowed))
    with pytest.raises(argparse.ArgumentTypeError, match="from 0 to 500 ms"):
        spec_type("serial.send", "pace_ms")("501")
    assert from_spec("serial.send", "pace_ms", "--pace-ms").schema()["maximum"] == 500
    with pytest.raises(UsageError, match="pace_ms must be from 0 to 500 ms"):
        ops.SPECS["serial.send"].validate({"text": "x", "pace_ms": 501})


def test_job_check_validates_step_arguments_against_the_spec(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    job = tmp_path / "job.toml"
    job.write_text("target = 'pico'\n[[steps]]\nrun = 'serial wait ${target} --epoch 1 --since 0 "
                   "--timeout-ms 3600001'\n")
    r = panio.fails("job", "check", str(job), code=5)
    assert "--timeout-ms: must be from 0 to 3600000 ms, not 3600001" in r.err and "job.toml:3" in r.err
    job.write_text("target = 'pico'\n[[steps]]\nrun = 'serial transact ${target} x --until y --timeout-ms 0'\n")
    assert "must be from 1 to 3600000 ms" in panio.fails("job", "check", str(job), code=5).err
