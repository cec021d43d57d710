"""Each operation's facts are written once, in its spec, and the CLI, MCP and `job check` are derived from it.

These tests walk the live surfaces and compare them with ``ops.spec``: a bound
typed a second time somewhere would drift, and fail here.
"""

from __future__ import annotations

import argparse

import pytest

from bench_agent import ops
from bench_agent.errors import UsageError
from bench_agent.ops.spec import HUGE, REQUIRED

GROUPS = ("serial", "power", "action", "daemons", "system", "video", "hid", "netboot", "netif")


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
    for group in GROUPS:
        if group not in groups:
            continue
        sub = next(a for a in groups[group]._actions if isinstance(a, argparse._SubParsersAction)).choices
        for verb, parser in sub.items():
            op = f"{group}.{verb.replace('-', '_')}"
            if op in ops.SPECS:
                out.append((f"{group} {verb}", parser, op))
    out += [("power-cycle", groups["power-cycle"], "power.cycle"), ("power-state", groups["power-state"], "power.state")]
    return out


def test_every_group_has_runtime_commands_derived_from_its_spec():
    all_specs()
    derived = {op.split(".")[0] for _, _, op in _runtime_commands()}
    assert derived == {"serial", "power", "action", "daemons", "video", "hid", "netboot", "netif"}


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
            if param.kind is bool:  # the flag turns the default over
                kind = argparse._StoreFalseAction if param.default else argparse._StoreTrueAction
                assert isinstance(action, kind), (command, action.dest)
                continue
            assert action.default == (None if param.required else param.default), (command, action.dest)
            assert action.required == param.required, (command, action.dest)
            if param.maximum is not None:
                with pytest.raises(argparse.ArgumentTypeError, match="must be"):
                    action.type(str(int(param.maximum) + 1))
                assert action.type(str(int(param.maximum))) == param.maximum
                if param.maximum < HUGE:  # the help as --help shows it (the formatter adds bounds and default)
                    shown = parser._get_formatter()._get_help_string(action)
                    assert str(int(param.maximum)) in shown, (command, action.dest, shown)
                    if param.default not in (None, REQUIRED):
                        assert f"default {param.default}" in shown, (command, action.dest, shown)
            if param.minimum is not None and param.kind is int:
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type(str(int(param.minimum) - 1))
    assert seen >= 40  # every serial, power, video, hid, netboot, netif and daemons flag above was compared


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


def _bounded_flags():
    """(command, op, param, flag) for every runtime flag whose spec has a numeric upper bound."""
    all_specs()
    out = []
    for command, parser, op in _runtime_commands():
        for action in parser._actions:
            param = ops.spec(op).param(action.dest)
            if param is not None and param.kind in (int, float) and param.maximum is not None \
                    and param.maximum < HUGE and action.option_strings:
                out.append((command, op, param.name, action.option_strings[-1]))
    return out


@pytest.mark.parametrize("command,op,name,flag", _bounded_flags(), ids=lambda v: str(v))
def test_a_bound_narrowed_in_the_spec_moves_cli_mcp_and_validation_together(monkeypatch, command, op, name, flag):
    """Mutation, on every group: narrow one bound in the spec, rebuild the surfaces, and each of them follows."""
    from controller.cli.main import build_parser
    from controller.mcp.tools import from_spec

    spec = ops.spec(op)
    old = spec.param(name)
    lower = old.minimum if old.minimum is not None else 0
    narrow = lower + 1 if old.kind is int else lower + (old.maximum - lower) / 2
    monkeypatch.setitem(ops.SPECS, op, spec._replace(params=tuple(
        p._replace(maximum=narrow) if p.name == name else p for p in spec.params)))
    too_big = str(int(narrow) + 1) if old.kind is int else str(narrow + 0.01)
    with pytest.raises(UsageError, match=f"argument [^:]*{flag}: must be"):  # the CLI, built anew, refuses it
        build_parser(full=True).parse_args([*command.split(), flag, too_big, "t1"])
    assert from_spec(op, name).schema()["maximum"] == narrow  # the MCP tool's schema
    with pytest.raises(UsageError, match=f"{name} must be"):  # every road in: job steps, workers, SSH agent
        ops.SPECS[op].param(name).check(float(too_big) if old.kind is float else int(too_big))


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


def test_cross_argument_rules_live_in_the_spec_and_every_surface_applies_them(monkeypatch, panio):
    """`needs` and `exclusive` are written once; the op, the MCP tool and its schema take them from the spec."""
    from controller.mcp.tools import TOOLS

    all_specs()
    log, evidence = ops.spec("serial.log"), ops.spec("serial.evidence")
    with pytest.raises(UsageError, match="--to needs --from"):
        log.validate({"last": 5})
    with pytest.raises(UsageError, match="give at most one of --tail, --since, --from"):
        log.validate({"tail": 5, "since": 3})
    with pytest.raises(UsageError, match="--since needs --epoch"):
        evidence.validate({"since": 10})
    tools = {t.name: t for t in TOOLS}
    assert tools["serial_log"].rules() == ({"to": "from"}, ("tail", "since", "from"))
    assert tools["serial_evidence"].input_schema()["dependentRequired"] == {"since": ["epoch"]}
    # mutation: a rule added in the spec reaches the MCP tool without touching it
    monkeypatch.setitem(ops.SPECS, "serial.evidence", evidence._replace(needs={"since": "epoch",
                                                                                           "max_bytes": "epoch"}))
    assert tools["serial_evidence"].rules()[0] == {"since": "epoch", "max_bytes": "epoch"}
    # the CLI meets the same rule through the operation
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/null")
    assert "--to needs --from" in panio.fails("serial", "log", "pico", "--to", "5", code=2).err


def test_the_pytest_plugin_restates_no_operation_default():
    """A plugin method's optional operation arguments default to None: the spec's default applies (no drift)."""
    import inspect

    from controller.plugin import handles

    all_specs()
    checked = 0
    for cls, group in ((handles.SerialHandle, "serial"), (handles.HidHandle, "hid")):
        for verb in ("send", "transact", "wait"):
            method, spec = getattr(cls, verb, None), ops.SPECS.get(f"{group}.{verb}")
            if method is None or spec is None:
                continue
            for name, p in inspect.signature(method).parameters.items():
                param = spec.param(name)
                if param is not None and not param.required and p.default is not inspect.Parameter.empty \
                        and param.kind is not bool:
                    assert p.default is None, f"{cls.__name__}.{verb}({name}={p.default!r}) restates the spec"
                    checked += 1
    assert checked >= 5


# The parameters of a runtime command's operation that are not flags of their own name, and how the command gives
# each: the rest of the whole command's plan. A parameter added to a spec that no flag and no line here gives
# fails below, before an agent finds it in an MCP schema that the CLI cannot reach.
NOT_A_FLAG = {
    ("serial.watch", "interfaces"): "every [[serial]] table of the target, from the lab",
    ("serial.send", "newline"): "--no-newline turns it over",
    ("serial.transact", "newline"): "--no-newline turns it over",
    ("serial.wait", "since_time_ns"): "--since-time S, --since-step, --since-job (the body makes the ns)",
    ("power.on", "power"): "the target's [power] table, from the lab",
    ("power.off", "power"): "the target's [power] table, from the lab",
    ("power.cycle", "power"): "the target's [power] table, from the lab",
    ("power.state", "power"): "the target's [power] table, from the lab",
    ("action.run", "timeout_s"): "the action's timeout_s, from the lab",
    ("action.run", "args"): "the ARG words after NAME (the action's max_args says how many)",
    ("daemons.stop", "names"): "the NAME arguments, or --all",
    ("video.wait", "image_b64"): "--image FILE, read and encoded by the plan",
    ("hid.send", "command"): "the words after the target",
}


def test_every_parameter_of_a_runtime_commands_operation_has_a_road_from_the_command_line():
    all_specs()
    commands = _runtime_commands()
    for command, parser, op in commands:
        flags = {a.dest for a in parser._actions}
        for param in ops.spec(op).params:
            assert param.name in flags or (op, param.name) in NOT_A_FLAG, (
                f"panio {command}: {op}'s parameter {param.name} has no flag and no other road (NOT_A_FLAG)")
    ops_of = {op for _, _, op in commands}
    for op, name in NOT_A_FLAG:  # no line outlives its parameter
        assert op in ops_of and ops.spec(op).param(name) is not None, (op, name)
