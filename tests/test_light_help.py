"""`panio --help` and the new commands' --help stay light: no Celery, Redis, paramiko or SQLAlchemy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
