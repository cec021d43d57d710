"""A runtime command passes each operation parameter it declares on to the operation as the spec names it
(``controller.cli.runtime.spec_args``): no plan lists them by hand, so a flag added from the spec cannot be
parsed and then dropped on the way."""

from __future__ import annotations

import pytest

from bench_agent import ops

COMMANDS = [  # (the command line up to its options, the operation its flags are the parameters of)
    ("serial log pico", "serial.log"), ("serial send pico hi", "serial.send"),
    ("serial transact pico hi --until x", "serial.transact"), ("serial wait pico", "serial.wait"),
    ("serial evidence pico", "serial.evidence"), ("serial dtr pico --ms 5", "serial.dtr"),
    ("serial stop pico", "serial.stop"),
    ("video shot pico", "video.shot"), ("video read pico", "video.read"), ("video wait pico --text x", "video.wait"),
    ("netboot stop pico", "netboot.stop"), ("netboot status pico", "netboot.status"),
    ("power on pico", "power.on"), ("power-cycle pico", "power.cycle"), ("power-state pico", "power.state"),
    ("hid send", "hid.send"),  # its options before its target and words (the rest is its HID command)
]
TAILS = {"hid send": ["pico", "key", "a"]}


def _value(param):
    """A value of ``param`` other than its default, within its bounds, and its words on the command line."""
    if param.kind is bool:
        return (not param.default), []
    if param.kind in (int, float):
        value = param.kind(param.minimum if param.minimum is not None and param.minimum != param.default else 1)
        if value == param.default:
            value = param.kind(param.maximum if param.maximum is not None else value + 1)
        return value, [str(value)]
    return "7", ["7"]


@pytest.fixture
def planned(panio):
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/null", "--power-button")
    panio("video", "set", "-t", "pico", "--device", "/dev/video9")
    panio("netboot", "set", "-t", "pico", "--interface", "eth9")
    panio("power", "set", "-t", "pico", "--on-cmd", "true", "--off-cmd", "true")
    panio("hid", "set", "-t", "pico", "--device", "/dev/null")
    from controller.cli.main import build_parser
    from controller.lab import load

    parser, lab = build_parser(full=True), load(str(panio.lab))

    def plan(words: list[str]):
        args = parser.parse_args(words)
        return args.func.plan(args, lab)

    return parser, plan


@pytest.mark.parametrize("line,op", COMMANDS)
def test_every_declared_parameter_reaches_the_operation(planned, line, op):
    parser, plan = planned
    base = line.split()
    flags = {a.dest: a for a in _subparser(parser, base[:2])._actions}
    declared = [p for p in ops.spec(op).params if p.name in flags and flags[p.name].option_strings]
    assert declared, f"{line}: no flag of {op}'s spec"
    for param in declared:
        action = flags[param.name]
        value, words = _value(param)
        flag = action.option_strings[-1] if param.kind is not bool else action.option_strings[0]
        step = plan(base + [flag, *words] + TAILS.get(line, []))
        assert step.args.get(param.name) == value, (line, flag, step.args)
        assert "command" not in step.args, step.args  # the parser's own word is no parameter (hid.send's)


def _subparser(parser, words: list[str]):
    import argparse

    p = parser
    for word in words:  # down the tree while the words name commands (`power-cycle pico`: one)
        sub = next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            break
        p = sub.choices[word]
    return p
