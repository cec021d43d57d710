"""Each runtime command's `--json` shape (``@command(..., output=SHAPE)``) is declared, and true.

A body that prints JSON (``out.json``, itself or through a helper) declares its shape; each such command is
run with `--json` on one simulated bench (``panio-sim up``, shared by the module) and what it prints
validates against its shape, strictly (``shapehelp``: a listed field the output lacks fails, and so does a
field the shape does not list); and the validator itself fails on a wrong shape.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from bench_agent import commands
from shapehelp import violations

BODIES = Path(commands.__file__).parent
GROUPS = sorted(p.stem for p in BODIES.glob("*.py") if p.stem != "__init__")
for _group in GROUPS:
    __import__(f"bench_agent.commands.{_group}")


def _json_printers() -> set[str]:
    """The registered commands whose body reaches ``out.json`` (directly or through a function it calls, by
    name, across the command modules), read from the source."""
    calls: dict[str, set[str]] = {}
    registered: dict[str, str] = {}
    for group in GROUPS:
        for fn in ast.walk(ast.parse((BODIES / f"{group}.py").read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            alias = {a.asname or a.name: a.name for node in ast.walk(fn) if isinstance(node, ast.ImportFrom)
                     for a in node.names}
            names = set()
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    names.add(alias.get(node.func.id, node.func.id))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "json" \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "out":
                    names.add("<out.json>")
            calls.setdefault(fn.name, set()).update(names)
            for dec in fn.decorator_list:
                if isinstance(dec, ast.Call) and getattr(dec.func, "id", None) == "command":
                    registered[dec.args[0].value] = fn.name
    prints = {"<out.json>"}
    while True:
        more = {f for f, called in calls.items() if called & prints} - prints
        if not more:
            break
        prints |= more
    assert len(registered) == len(commands.BODIES), "a body registered other than with @command(\"NAME\", ...)"
    return {name for name, fn in registered.items() if fn in prints}


def test_every_body_that_prints_json_declares_its_shape():
    printers = _json_printers()
    assert {"serial.wait", "power.state", "hid.show", "serial.reset"} <= printers  # the reading reaches helpers
    undeclared = sorted(printers - set(commands.OUTPUTS))
    assert undeclared == [], f"these commands print JSON with no declared shape (@command(..., output=...)): {undeclared}"
    silent = sorted(set(commands.OUTPUTS) - printers)
    assert silent == [], f"these commands declare a JSON shape but never print JSON: {silent}"


# -- the validator can fail -----------------------------------------------------------------------------


def test_a_shape_naming_a_field_the_output_lacks_fails():
    out = {"target": "board0", "pid": 12, "stopped": True}
    good = commands.fields({"target": ("string", "t"), "pid": ("integer", "p"), "stopped": ("boolean", "s")})
    assert violations(out, good) == []
    wrong = commands.fields({**{k: ("string", "t") for k in ("target",)}, "pid": ("integer", "p"),
                             "stopped": ("boolean", "s"), "pids": (commands.items("integer"), "the processes")})
    assert violations(out, wrong) == ["(top): 'pids' is a required property"]
    typed = commands.fields({"target": ("string", "t"), "pid": ("string", "p"), "stopped": ("boolean", "s")})
    assert violations(out, typed) == ["pid: 12 is not of type 'string'"]
    short = commands.fields({"target": ("string", "t"), "pid?": ("integer", "p")})
    assert violations(out, short) == ["(top): Additional properties are not allowed ('stopped' was unexpected)"]
    open_ = commands.fields({"target": ("string", "t")}, extra="and the lab's table")
    assert violations(out, open_) == []
    nested = commands.items(commands.fields({"seq": ("integer", "s")}))
    assert violations([{"seq": 1}, {"seq": "2"}], nested) == ["1/seq: '2' is not of type 'integer'"]


# -- every command's real output, on the simulated bench ----------------------------------------------

TESSERACT = pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract (OCR) is not installed")
# Commands with a shape that this bench cannot run; each says why (their shapes are read from the operations).
NOT_ON_SIM = {
    "serial.reset": "a simulated console is a PTY: it has no DTR line to pulse",
    "serial.dtr": "a simulated console is a PTY: it has no DTR line to pulse",
    "netif.mode": "it sets a real link's admin state, and the simulated bench has no link of its own",
}
STAGE = "kernel.img"
# (id, command, argv, commands before, commands after, exit statuses); "{dir}": the module's folder
CASES = [
    ("serial.watch", "serial.watch", "serial watch board0 --json", [], [], (0,)),
    ("serial.stop", "serial.stop", "serial stop board0 --json", [], ["serial watch board0"], (0,)),
    ("serial.log", "serial.log", "serial log board0 --tail 5 --json", ["serial send board0 date"], [], (0,)),
    ("serial.send", "serial.send", "serial send board0 --json -- pwd", [], [], (0,)),
    ("serial.transact", "serial.transact", "serial transact board0 --json --until root@sim --timeout-ms 10000 "
     "-- id", [], [], (0,)),
    ("serial.wait", "serial.wait", "serial wait board0 --since-now --timeout-ms 200", [], [], (0,)),
    ("serial.evidence", "serial.evidence", "serial evidence board0 --max-bytes 300",
     ["serial send board0 uptime"], [], (0,)),
    ("serial.status", "serial.status", "serial status board0", [], [], (0,)),
    ("serial.devices", "serial.devices", "serial devices --json", [], [], (0,)),
    ("power.state", "power.state", "power-state board0 --json", [], [], (0,)),
    ("system.ping", "system.ping", "ping board0 -c 2 --json", [], [], (0,)),
    ("hardware.discover", "hardware.discover", "discover --json", [], [], (0,)),
    ("hardware.configure", "hardware.configure", "configure board9 --json", [], [], (0,)),
    ("hardware.doctor", "hardware.doctor", "doctor --json", [], [], (0, 1)),  # 1: the report says what is wrong
    ("video.show", "video.show", "video show board0 --json", [], [], (0,)),
    ("video.watch", "video.watch", "video watch board0 --json", [], [], (0,)),
    ("video.stop", "video.stop", "video stop board0 --json", [], ["video watch board0"], (0,)),
    ("video.shot", "video.shot", "video shot board0 -o {dir}/shot.png --json", [], [], (0,)),
    ("video.shot-stdout", "video.shot", "video shot board0 -o - --json", [], [], (0,)),
    pytest.param("video.read", "video.read", "video read board0 --json", [], [], (0,), marks=TESSERACT,
                 id="video.read"),
    pytest.param("video.wait-text", "video.wait", "video wait board0 --text (?i)sim --timeout 30000 --json", [],
                 [], (0,), marks=TESSERACT, id="video.wait-text"),
    ("video.wait-image", "video.wait", "video wait board0 --image {dir}/needle.png --timeout 30000 --json",
     ["video shot board0 -o {dir}/needle.png"], [], (0,)),
    ("hid.show", "hid.show", "hid show board0 --json", [], [], (0,)),
    ("hid.serve", "hid.serve", "hid serve board0 --json", [], ["hid stop board0"], (0,)),
    ("hid.send", "hid.send", "hid send board0 --json key ENTER", [], [], (0,)),
    ("hid.stop", "hid.stop", "hid stop board0 --json", ["hid serve board0"], [], (0,)),
    ("netboot.tftp_root", "netboot.tftp_root", "netboot tftp-root board0 --json", [], [], (0,)),
    ("netboot.stage", "netboot.stage", f"netboot stage board0 {{dir}}/stage/{STAGE} --json", [], [], (0,)),
    ("netboot.start", "netboot.start", "netboot start board0 --json", [], ["netboot stop board0"], (0,)),
    ("netboot.status", "netboot.status", "netboot status board0 --json", [], [], (0,)),
    ("netboot.stop", "netboot.stop", "netboot stop board0 --json", ["netboot start board0"], [], (0,)),
    ("netif.status", "netif.status", "netif status board0 --json", [], [], (0,)),
    # the hook backend only runs `true`: no link is touched
    ("netif.down_hard", "netif.down_hard", "netif down-hard board0 --json", [], [], (0,)),
]


def _argv(line: str, folder: Path) -> list[str]:
    return line.replace("{dir}", str(folder)).split()


@pytest.fixture(scope="module")
def shapes_bench(video_bench, tmp_path_factory):
    """``video_bench`` (its screen captured) booted, its console captured, and a netboot channel served by
    panio's own TFTP server on the loopback link (no root, no DHCP), with a file to stage."""
    import socket

    folder = tmp_path_factory.mktemp("shapes")
    (folder / "stage").mkdir()
    (folder / "stage" / STAGE).write_bytes(b"not really a kernel\n")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # a free port for TFTP (UDP), not 69
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    video_bench.wait_shell()
    video_bench("serial", "watch", "board0")
    video_bench("netboot", "set", "-t", "board0", "--interface", "lo", "--server", "panio", "--tftp-port", str(port),
                "--tftp-root", str(folder / "tftp"), "--stage-from", str(folder / "stage"),
                "--hard-down", "hook", "--hard-down-cmd", "true", "--hard-up-cmd", "true")
    (folder / "tftp").mkdir()
    try:
        yield video_bench, folder
    finally:
        for argv in (["netboot", "stop", "board0"], ["hid", "stop", "board0"], ["serial", "stop", "board0"]):
            video_bench(*argv, check=False)


def test_every_shape_is_run_on_the_simulated_bench_or_says_why_not():
    run = {c.values[1] if hasattr(c, "values") else c[1] for c in CASES}
    assert sorted(set(commands.OUTPUTS) - run - set(NOT_ON_SIM)) == []
    assert not run & set(NOT_ON_SIM)


@pytest.mark.parametrize("case, name, line, before, after, codes", CASES, ids=[
    c.id if hasattr(c, "id") else c[0] for c in CASES])
def test_json_output_fits_its_declared_shape(shapes_bench, case, name, line, before, after, codes):
    bench, folder = shapes_bench
    for step in before:
        bench(*_argv(step, folder))
    try:
        r = bench(*_argv(line, folder), check=False)
    finally:
        for step in after:
            bench(*_argv(step, folder), check=False)
    assert r.code in codes, r.err
    output = json.loads(r.out)
    assert violations(output, commands.OUTPUTS[name]) == [], json.dumps(output, indent=1)[:3000]
