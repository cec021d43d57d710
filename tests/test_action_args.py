"""panio action run TARGET NAME [ARG ...] (issue 42's leftover): an action takes arguments only if its lab table
says how many (max_args); each arrives as one word of the hook's argv, verbatim (a real child writes its argv to a
file), from the command line, a job step's captured variable and a bisection's ${build.NAME}; bounded; and a
worker's own lab file, not the message, says how many an action takes."""

from __future__ import annotations

import json
import sys

import pytest

from bench_agent import ops
from bench_agent.errors import Refused, UsageError
from bench_agent.jobs.host_config import HostConfig
from conftest import lab as lab_data
from jobhelp import job_file

RECORD = """\
import json, sys
from pathlib import Path
Path(sys.argv[1]).write_text(json.dumps(sys.argv[2:]))
print("argv recorded")
"""
HOSTILE = ["two words", "it's \"quoted\"", "a;b", "$(touch pwned)", "`id`", "-x", "--flag=1", "", "*", "\\n\n"]


@pytest.fixture
def rec(panio, tmp_path):
    """pico, whose action `flash` records the words after its own two in ``argv.json`` (up to 12 arguments) and
    whose action `plain` records them too but takes none."""
    script = tmp_path / "record.py"
    script.write_text(RECORD)
    out = tmp_path / "argv.json"
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "flash", "-t", "pico", "--command", f"{sys.executable} {script} {out}", "--max-args", "12")
    panio("action", "add", "plain", "-t", "pico", "--command", f"{sys.executable} {script} {out}")
    return out


def test_arguments_arrive_verbatim_as_single_words_never_through_a_shell(panio, rec, tmp_path):
    r = panio("action", "run", "pico", "flash", "--", *HOSTILE)
    assert r.out == "argv recorded\n"
    assert json.loads(rec.read_text()) == HOSTILE
    assert not (tmp_path / "pwned").exists()
    panio("action", "run", "pico", "flash", "/srv/builds/v6.9/Image")  # no `--` needed when none starts with '-'
    assert json.loads(rec.read_text()) == ["/srv/builds/v6.9/Image"]
    panio("action", "run", "pico", "flash")  # none at all: the command as the lab has it
    assert json.loads(rec.read_text()) == []


def test_refused_unless_the_lab_opts_in_naming_the_action_and_the_fix(panio, rec):
    r = panio.fails("action", "run", "pico", "plain", "image.uf2", code=2)
    assert "action plain of pico takes no arguments" in r.err and "max_args = N" in r.err and "--max-args" in r.err
    assert (r.error["error"], r.error["action"], r.error["target"]) == ("usage", "plain", "pico")
    assert not rec.exists()
    panio.fails("action", "run", "pico", "flash", "image.uf2", "-x", code=2)  # an option of panio's: unknown
    assert not rec.exists()


def test_bounds_count_length_total_and_nul(panio, rec):
    assert "at most 12 arguments, not 13" in panio.fails("action", "run", "pico", "flash", *"a" * 13, code=2).err
    assert "4097 characters" in panio.fails("action", "run", "pico", "flash", "x" * 4097, code=2).err
    panio("action", "run", "pico", "flash", "x" * 4096)
    assert json.loads(rec.read_text()) == ["x" * 4096]
    assert "in all, more than 32768" in panio.fails("action", "run", "pico", "flash", *["y" * 4000] * 9, code=2).err
    with pytest.raises(UsageError, match="NUL"):  # no command line can carry one; an MCP call or a step could try
        ops.call("action.run", {"target": "pico", "name": "flash", "command": "true", "args": ["a\0b"],
                                "max_args": 2})
    with pytest.raises(UsageError, match="takes no arguments"):  # the operation itself refuses, on every road
        ops.call("action.run", {"target": "pico", "name": "flash", "command": "true", "args": ["a"]})
    with pytest.raises(UsageError, match="list of text"):
        ops.call("action.run", {"target": "pico", "name": "flash", "command": "true", "args": [1], "max_args": 2})


def test_the_lab_key_its_flag_and_list(panio, rec):
    assert lab_data(panio)["targets"]["pico"]["actions"]["flash"]["max_args"] == 12
    assert "plain" in panio("action", "list", "pico").out
    assert "[takes up to 12 arguments]" in panio("action", "list", "pico").out
    assert "flash: " in panio("target", "show", "pico").out and "[takes up to 12 arguments]" in panio("target", "show", "pico").out
    listed = {a["name"]: a for a in panio("action", "list", "pico", "--json").json()}
    assert listed["flash"]["max_args"] == 12 and "max_args" not in listed["plain"]
    panio.fails("action", "add", "big", "-t", "pico", "--command", "true", "--max-args", "65", code=2)
    panio.lab.write_text(panio.lab.read_text().replace("max_args = 12", "max_args = 0"))
    assert "max_args" in panio.fails("action", "list", "pico", code=5).err


def test_a_job_step_passes_a_captured_variable_as_one_word(panio, rec, tmp_path):
    panio("action", "add", "say", "-t", "pico", "--command", "/bin/echo image=/srv/b 7/Image.gz")
    body = """
target = "pico"
[[steps]]
run = "action run ${target} say"
capture = { image = 'image=(.*)' }
[[steps]]
run = "action run ${target} flash ${image} 'x ${image}' -- --verify ${target}"
expect_output = "argv recorded"
"""
    r = panio("job", "run", job_file(tmp_path, body))
    assert "complete, passed" in r.out, r.out
    assert json.loads(rec.read_text()) == ["/srv/b 7/Image.gz", "x /srv/b 7/Image.gz", "--verify", "pico"]


def test_a_job_step_with_arguments_for_an_action_that_takes_none_fails_as_the_command_would(panio, rec, tmp_path):
    body = "target = 'pico'\n[[steps]]\nrun = 'action run ${target} plain extra'\n"
    r = panio("job", "run", job_file(tmp_path, body), check=False)
    assert r.code == 14 and "exit status in [0]: got 2" in r.out, r.out  # the step's usage error, 2
    assert "action plain of pico takes no arguments" in panio("job", "logs", "1", "--step", "1").out
    assert not rec.exists()
    r = panio.fails("job", "check", job_file(tmp_path, body, "again.toml"), code=2)  # said before any run
    assert r.error["step"] == 1 and "step 1: action plain of pico takes no arguments" in r.error["message"]


def test_a_bisection_flashes_each_build_by_its_artifact(panio, tmp_path):
    log = tmp_path / "flashed"
    panio("init")
    panio("target", "add", "pico")
    panio("action", "add", "flash", "-t", "pico", "--max-args", "1", "--command",
          f"sh -c 'echo \"$1\" >> {log}; case \"$1\" in *bad*) echo BUG: broken;; esac' flash")
    builds = tmp_path / "builds.txt"
    builds.write_text("".join(f"b{i} image=/srv/b{i}-{'bad' if i >= 4 else 'good'}.img\n" for i in range(1, 7)))
    job = job_file(tmp_path, 'name = "boot"\n[[steps]]\nrun = "panio action run ${target} flash ${build.image}"\n'
                             'reject_output = "BUG:"\n')
    r = panio("bisect", "start", job, "--target", "pico", "--good", "b1", "--bad", "b6", "--builds", str(builds),
              "--json", timeout=120).json()
    assert r["first_bad"] == "b4", r
    flashed = log.read_text().splitlines()
    assert flashed and set(flashed) <= {f"/srv/b{i}-{'bad' if i >= 4 else 'good'}.img" for i in range(1, 7)}
    assert "/srv/b4-bad.img" in flashed and "/srv/b3-good.img" in flashed


WORKER_LAB = """
[hosts.h1]
ssh = "ops@h1.invalid"
[targets.t1]
host = "h1"
[targets.t1.actions.flash]
command = "true"
max_args = 2
[targets.t1.actions.plain]
command = "true"
"""


def test_a_worker_takes_max_args_from_its_own_lab_file(tmp_path):
    """A broker message may carry arguments but not the limit: a different max_args is refused, an absent one is
    the host's, and an action the host's file lets take none refuses them (bench_agent.jobs.host_config)."""
    path = tmp_path / "lab.toml"
    path.write_text(WORKER_LAB)
    config = HostConfig(path, "h1")
    func = ops.lookup("action.run")
    code = func.__code__
    taken = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    params = {p.name for p in ops.SPECS["action.run"].params}

    def enforce(args: dict) -> dict:
        return config.enforce("action.run", {"target": "t1", **args}, params, taken)

    assert enforce({"name": "flash", "args": ["a"]})["max_args"] == 2
    assert enforce({"name": "plain", "args": ["a"]})["max_args"] is None
    with pytest.raises(Refused, match="max_args differs"):
        enforce({"name": "plain", "args": ["a"], "max_args": 5})
    with pytest.raises(Refused, match="max_args differs"):
        enforce({"name": "flash", "args": ["a"] * 9, "max_args": 9})


def test_the_mcp_tool_passes_the_arguments_as_words(panio, rec):
    import anyio

    from mcp_client import connect

    async def go():
        async with connect(panio.env) as c:
            schema = (await c.tools())["action_run"].input_schema["properties"]["args"]
            ran = await c.ok("action_run", {"target": "pico", "name": "flash", "args": ["-v", "a b; rm -rf /"]})
            refused = await c.call("action_run", {"target": "pico", "name": "plain", "args": ["x"]})
            return schema, ran, refused

    schema, ran, (is_error, text) = anyio.run(go)
    assert schema["type"] == "array" and schema["items"] == {"type": "string"}
    assert "argv recorded" in ran and json.loads(rec.read_text()) == ["-v", "a b; rm -rf /"]
    assert is_error and "exit code 2" in text and "takes no arguments" in text
