"""`panio --help` and the new commands' --help stay light: no Celery, Redis, paramiko or SQLAlchemy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from controller.cli.commands import QUICK

HEAVY = ("celery", "kombu", "redis", "paramiko", "sqlalchemy", "psycopg")


@pytest.mark.parametrize("argv", [["--help"], ["job", "--help"], ["job", "run", "--help"], ["lease", "--help"],
                                  ["worker", "--help"], ["suite", "run", "--help"], ["schedule", "add", "--help"],
                                  ["ping", "--help"], ["host", "trust", "--help"]])
def test_help_imports_nothing_heavy(argv, tmp_path):
    probe = ("import sys, json; from controller.cli.main import main; import io, contextlib\n"
             "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
             "    try: code = main(sys.argv[1:])\n"
             "    except SystemExit as e: code = e.code\n"
             "print(json.dumps({'code': code, 'out': out.getvalue(), 'mods': sorted(sys.modules)}))")
    r = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=30,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and result["out"].strip()
    if len(argv) == 3 or argv[0] in ("worker", "ping"):  # a leaf command: summary, example, see-also
        assert "example:" in result["out"] and "see also:" in result["out"], result["out"]
    heavy = [m for m in result["mods"] if m.split(".")[0] in HEAVY]
    assert heavy == [], heavy


def test_the_interpreter_starts_without_an_import_hook_for_panio(tmp_path):
    """`make install`'s editable install is one plain .pth line: setuptools' finder hook (pathlib, re,
    fnmatch at every Python start-up) would roughly double `panio --help`."""
    r = subprocess.run([sys.executable, "-c", "import sys, json; print(json.dumps(sorted(sys.modules)))"],
                       capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    hooks = [m for m in json.loads(r.stdout) if m.startswith("__editable__")]
    assert hooks == [], f"an import hook runs at every start-up: {hooks} (see [tool.setuptools] in pyproject.toml)"


def test_agent_speaks_versioned_json_lines():
    lines = "\n".join(json.dumps(x) for x in [
        {"v": 1, "id": 1, "op": "system.ping", "args": {"payload": [1, "a"]}},
        {"v": 9, "id": 2, "op": "system.ping"},
        {"v": 1, "id": 3, "op": "nosuch.op"},
    ]) + "\nnot json\n"
    r = subprocess.run([sys.executable, "-m", "bench_agent.agent"], input=lines, capture_output=True, text=True,
                       timeout=30)
    hello, *replies = [json.loads(x) for x in r.stdout.splitlines()]
    assert hello["panio_agent"] == 1 and r.returncode == 0
    assert replies[0] == {"id": 1, "ok": True, "result": {"pong": [1, "a"]}}
    assert replies[1]["error"]["error"] == "usage" and replies[1]["error"]["versions"] == [1]
    assert replies[2]["error"]["message"] == "unknown operation 'nosuch.op'"
    assert replies[3]["id"] is None and replies[3]["error"]["error"] == "usage"


# What a reading command must not pay for (issue 24): the heavy libraries, and panio's own lease, job, daemon
# and child-process machinery, which a read never uses. `--help` builds no parser at all.
HEAVY_FOR_READS = HEAVY + ("cv2", "pytesseract", "mcp", "mcp_types", "numpy", "serial", "tomlkit")
PANIO_MACHINERY = ("bench_agent.leases.base", "bench_agent.leases.guard", "bench_agent.jobs.host_config",
                   "bench_agent.jobs.steps", "bench_agent.serial.client", "bench_agent.serial.supervisor",
                   "bench_agent.serial.device", "bench_agent.process", "controller.backends")
SLOW_STDLIB = ("dataclasses", "inspect", "typing", "shutil", "locale", "datetime",  # each a share of a start-up
               "gettext", "contextlib", "importlib", "pathlib", "urllib.parse", "ipaddress", "json")


@pytest.mark.parametrize("argv", [["--help"], ["target", "list"], ["config", "show"],
                                  ["serial", "log", "t0", "--tail", "5"]])
def test_reading_commands_import_nothing_they_do_not_use(argv, panio):
    panio("init")
    panio("target", "add", "t0")
    panio("serial", "add", "console", "-t", "t0", "--device", "/dev/ttyS0")
    write_log = ("import time\nfrom bench_agent.serial import files\nfrom bench_agent.serial.logstore import DATA, "
                 f"LogWriter\nfrom pathlib import Path\np = files.log_path('t0', 'console', Path({str(panio.state)!r}))\n"
                 "p.parent.mkdir(parents=True, exist_ok=True)\n"
                 "w = LogWriter(p)\nfor i in range(20): w.append(DATA, 1, b'line %d\\r\\n' % i, time.time_ns())\n"
                 "w.close()\n")
    subprocess.run([sys.executable, "-c", write_log], env=panio.env, check=True, timeout=30)
    probe = ("import sys, io\nfrom controller.cli.main import main\n"  # the probe imports json only after
             "out, sys.stdout = sys.stdout, io.StringIO()\ncode = main(sys.argv[1:])\n"
             "out, sys.stdout, mods = sys.stdout, out, sorted(sys.modules)\nimport json\n"
             "print(json.dumps({'code': code, 'out': out.getvalue(), 'mods': mods}))")
    r = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=30, env=panio.env)
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, r.stderr
    if argv[0] == "serial":
        assert "line 19" in result["out"] and "line 14" not in result["out"], result["out"]
    mods = result["mods"]
    assert [m for m in mods if m.split(".")[0] in HEAVY_FOR_READS] == []
    assert [m for m in mods if m in PANIO_MACHINERY] == []
    assert [m for m in mods if m in SLOW_STDLIB] == []
    if argv == ["--help"]:
        assert [m for m in mods if m in ("argparse", "enum", "re")] == [], "--help is a static text"
    if tuple(argv[:2]) in QUICK:  # parsed without argparse, the lab's parse read back from its cache
        unused = ("argparse", "enum", "re", "functools", "hashlib", "_hashlib", "tomllib", "controller.cli.parsing",
                  "controller.cli.groups", "controller.lab.schema")
        assert [m for m in mods if m in unused] == []
        if argv[0] != "serial":  # an operation's spec is a named tuple: `serial log` imports collections for it
            assert "collections" not in mods


def _quick_shapes():
    """Command lines ``main`` may parse without argparse: each flag set in each order, with and without
    ``--lab``, each option alone in both spellings, all of them together, options before the positionals;
    and lines it must leave to argparse (help, typos, abbreviations, bad or missing values, conflicts)."""
    import itertools

    from controller.cli.main import _quick_words

    taken, left = [], []
    for (name, sub), quick in QUICK.items():
        flags, options, spec = _quick_words(quick)
        flags = tuple(flags)
        pos = ["t0"] * len(quick.get("positionals", ()))
        head = [name, sub, *pos]
        for n in range(len(flags) + 1):
            for chosen in itertools.permutations(flags, n):
                for lab in ([], ["--lab", "/x/lab.toml"], ["--lab=/x/lab.toml"]):
                    taken.append([*lab, *head, *chosen])
        value = {"interface": "console"}
        one_of = tuple(spec.exclusive or ()) if spec else ()
        for option, dest in options.items():
            text = value.get(dest, "5")
            taken += [[*head, option, text], [name, sub, option, text, *pos]]
            if option.startswith("--"):
                taken.append([*head, f"{option}={text}"])
                left += [[*head, option[:-1], text], [*head, option], [*head, option, "-5"], [*head, option, text,
                                                                                              option, text]]
            if dest not in value:
                left += [[*head, option, "x"], [*head, option, "1e3"]]
        if options:
            together = [w for option, dest in options.items() if option.startswith("--") and dest not in
                        one_of[1:] for w in (option, value.get(dest, "5"))]
            taken.append([*head, *together, *flags])
            a, b = [o for o, d in options.items() if d in one_of][:2]
            left += [[*head, a, "5", b, "6"], [*head, "-iconsole"], [*head, "-i=console"]]
        left += [[*head, "-h"], [*head, "--help"], [*head, flags[0][:-1]], [*head, "extra"],
                 [*head, "--lab", "/x/lab.toml"], ["--lab", "/x", "--lab", "/y", *head], ["--lab", "-x", *head],
                 ["--lab=", *head], [name, "--json", sub, *pos], [*head, "--"]]
        if pos:
            left.append([name, sub])
    return taken, left


@pytest.mark.parametrize("argv", _quick_shapes()[0], ids=" ".join)
def test_the_quick_parse_is_argparses(argv):
    """What ``main`` parses without argparse is what argparse parses from the same line (the handler too)."""
    from controller.cli.main import _find_command, _parse, _quick_parse

    name = _find_command(argv)
    quick = _quick_parse(name, argv)
    assert quick is not None, argv
    slow, extra = _parse(name, argv)
    assert (vars(quick[0]), quick[1]) == (vars(slow), extra)


@pytest.mark.parametrize("argv", _quick_shapes()[1], ids=" ".join)
def test_any_other_line_goes_to_argparse(argv):
    from controller.cli.main import _find_command, _quick_parse

    assert _quick_parse(_find_command(argv), argv) is None
