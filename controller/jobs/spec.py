"""Job files: parse, validate (file:line errors), check each step against panio's own CLI, build payloads.

A job file is TOML::

    name = "smoke"                    # default: the file's stem
    target = "pico"                   # or: tags = ["pi5"] (first matching target)
    timeout_s = 600                   # the whole job (default: no limit but the steps')
    lease_wait_s = 300                # how long to wait for the target's lease

    [[steps]]
    name = "agent answers"
    run = "panio ping ${target}"      # a panio command line; ${var} = earlier captures
    timeout_s = 30                    # default 60
    expect_exit = 0                   # or a list: [0, 1]
    expect_output = "seq=1"           # a regex the output must match
    capture = { rtt = 'time=(\\S+)' } # group 1 (or the whole match) -> ${rtt}
    screenshot = true                 # keep the target's screen after it (step-NN.png)

    [triage]
    ignore = ['rtt=\\S+']            # more of what always changes between runs (docs/triage.md)

Everything is rejected *before* anything is queued: TOML errors, unknown
keys, bad regexes, unknown variables, steps that do not parse against the
live command tree (with argparse's reason), and steps that are not runtime
commands (``controller.cli.commands.RUNTIME``): a job never edits the lab
file, configures a hook or manages jobs.

When a job is created for a target, each step is *planned* (``plan_steps``):
its command line is parsed again and handed to the command's own plan (the
CLI handler's ``plan``, ``controller.cli.runtime``), which resolves the
target's channels from the lab into plain-data ``args``. The payload carries
``run = {"op", "args"}`` (``controller.cli.runtime.Step.payload``); the worker
runs that operation's body (``bench_agent.commands``) with no lab file. A
``${var}`` captured by an earlier step stays a placeholder in ``args`` until the
step runs, and a whole ``${var}`` then becomes the kind the operation's spec
gives that parameter (``bench_agent.jobs.steps.bind``): no type travels beside
it. A plan that fails (a channel the target lacks) becomes a step that fails
the same way when it runs, as it did when each step was a ``panio`` child.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from typing import Any

from bench_agent import shellwords
from bench_agent.errors import ConfigInvalid, NotConfigured, UsageError
from bench_agent.jobs.steps import VAR_RE
from controller.lab.locate import locate
from controller.lab.model import Lab
from controller.lab.schema import (Field, Problem, TableSpec, _bool, _dotted, _name, _nonempty_string, _one_of,
                                   _positive_number, _string, _string_list, _table, _table_array, check_table)

DEFAULT_STEP_TIMEOUT_S = 60.0
BUILTIN_VARS = {"target", "job_id"}


def _exit_codes(path, value: Any) -> None:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise Problem(path, f"{_dotted(path)} = [] can never pass: give an exit status 0-255 or a list of them")
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= 255:
            raise Problem(path, f"{_dotted(path)} must be an exit status 0-255 or a list of them, not {item!r}")


def _regex(path, value: Any) -> None:
    _compiled(path, value)


def _compiled(path, value: Any):
    """``value`` as the job runner matches it (``bench_agent.patterns``: Python's syntax, bounded, and tried on
    inputs that make a catastrophic pattern backtrack), or the ``Problem`` that names the key."""
    from bench_agent import patterns

    _nonempty_string(path, value)
    try:
        return patterns.check(value)
    except UsageError as err:
        raise Problem(path, f"{_dotted(path)}: {err.message}") from None


def _captures(path, value: Any) -> None:
    if not isinstance(value, dict):
        raise Problem(path, f"{_dotted(path)} must be a table of NAME = 'regex'")
    for var, pattern in value.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var) or var in BUILTIN_VARS:
            raise Problem(path + (var,), f"{_dotted(path + (var,))}: {var!r} is not a usable variable name")
        if _compiled(path + (var,), pattern).groups > 1:
            raise Problem(path + (var,), f"{_dotted(path + (var,))} has several groups; keep one (group 1 is captured)")


def _regex_list(path, value: Any) -> None:
    if not isinstance(value, list):
        raise Problem(path, f"{_dotted(path)} must be a list of regular expressions, like ['rtt=\\S+']")
    for i, item in enumerate(value):
        _regex(path + (i,), item)


# [triage] ignore = ['...']: what else always changes between two runs of this job (docs/triage.md)
TRIAGE = TableSpec({"ignore": Field(_regex_list)}, "triage table")
STEP = TableSpec({
    "name": Field(_nonempty_string),
    "run": Field(_nonempty_string, required=True),
    "timeout_s": Field(_positive_number),
    "expect_exit": Field(_exit_codes),
    "expect_output": Field(_regex),
    "reject_output": Field(_regex),
    "capture": Field(_captures),
    "continue_on_failure": Field(_bool),
    "screenshot": Field(_bool),
}, "step")
JOB = TableSpec({
    "name": Field(_nonempty_string),
    "description": Field(_string),
    "target": Field(_name),
    "tags": Field(_string_list),
    "timeout_s": Field(_positive_number),
    "lease_wait_s": Field(_positive_number),
    "lease_ttl_s": Field(_positive_number),
    "on_unhealthy": Field(_one_of(("wait", "skip"))),
    "steps": Field(_table_array(STEP), required=True),
    "triage": Field(_table(TRIAGE)),
}, "job file")


def _invalid(path: Path, text: str, where: tuple, message: str, hint: str | None = None) -> ConfigInvalid:
    line, col = locate(text, where)
    return ConfigInvalid(f"{path}:{line}:{col}: {message}",
                         hint=f"{hint or 'fix the job file'}; nothing was queued",
                         file=str(path), line=line, column=col)


def load(path: Path) -> dict:
    """Parse and validate a job file; ``ConfigInvalid`` names file, line and column."""
    from controller.lab import tomlfile

    return parse(path, tomlfile.read(path, "job file"))


def parse(path: Path | str, text: str) -> dict:
    """A job from its text, as ``load`` makes it from a file (the controller API gets the text and the file's
    name, ``path``, which its errors name as ``job check``'s do)."""
    from controller.lab import tomlfile

    def validate(data: dict) -> None:
        check_table((), data, JOB)
        if not data["steps"]:
            raise Problem(("steps",), "a job needs at least one [[steps]]")

    from bench_agent import patterns

    with patterns.probing(f"job file {Path(path).name}"):  # a file's patterns share one CPU budget to check
        data = tomlfile.parse(path, text, validate, "fix the job file; nothing was queued")
    data.setdefault("name", Path(path).stem)
    return {"data": data, "text": text, "path": path}


def _check_step(job: dict, idx: int, step: dict, known_vars: set[str], parser) -> list[str]:
    """Tokens of the step's command line, after checking them against the CLI tree."""
    where = ("steps", idx, "run")
    try:
        argv = shellwords.split(step["run"])  # shlex's own split is quadratic in a word's length
    except ValueError as exc:
        raise _invalid(job["path"], job["text"], where, f"steps[{idx}].run: cannot split the command line: {exc}")
    if argv and argv[0] == "panio":
        argv = argv[1:]
    if not argv:
        raise _invalid(job["path"], job["text"], where, f"steps[{idx}].run names no panio command")
    if "--lab" in argv or any(a.startswith("--lab=") for a in argv):
        raise _invalid(job["path"], job["text"], where, f"steps[{idx}].run: drop --lab; the job runs against its own lab")
    for token in argv + [step.get("expect_output", ""), step.get("reject_output", "")]:
        for var in VAR_RE.findall(token):
            if var not in known_vars:
                raise _invalid(job["path"], job["text"], where, f"steps[{idx}]: ${{{var}}} is not captured by an "
                               f"earlier step (known: {', '.join(sorted(known_vars))})")
    _parse_against_cli(job, idx, argv, parser)
    return argv


def _parse_against_cli(job: dict, idx: int, argv: list[str], parser) -> None:
    from controller.cli.commands import COMMANDS, near_command

    if argv[0] not in COMMANDS:
        near = near_command(argv[0])
        raise _invalid(job["path"], job["text"], ("steps", idx, "run"),
                       f"steps[{idx}].run: unknown panio command {argv[0]!r} (see `panio --help`)",
                       hint=f"did you mean `panio {near}`? fix the job file" if near else None)
    try:
        args = parser.parse_args(_stand_ins(argv))
    except UsageError as err:
        raise _invalid(job["path"], job["text"], ("steps", idx, "run"), f"steps[{idx}].run: {err.message}") from None
    except SystemExit:
        raise _invalid(job["path"], job["text"], ("steps", idx, "run"),
                       f"steps[{idx}].run: --help is not a test step") from None
    _runtime_only(job, idx, argv[0], getattr(args, "subcommand", None))


class _Captured(str):
    """A whole ``${var}`` argument at check time: its value exists only when the step runs, and is checked then
    (type, bounds, choices). At check time it stands in as "1" and passes any type and choice; when a step is
    planned it stays ``${var}``, and ``kind`` records the type its option's converter makes ("int", "float"):
    a number the operation's spec does not type cannot come from a variable (``_spec_typed``)."""

    kind = "str"


class _AnyCaptured:
    """``action.choices`` that also admit a ``_Captured`` stand-in; everything else as before."""

    def __init__(self, choices) -> None:
        self.choices = choices

    def __contains__(self, value) -> bool:
        return isinstance(value, _Captured) or value in self.choices

    def __iter__(self):
        return iter(self.choices)


def _stand_ins(argv: list[str]) -> list[str]:
    """``argv`` for the check: a whole ``${var}`` (also as ``--opt=${var}``) becomes a ``_Captured``, a variable
    inside other text becomes "1" (``--pattern 'rtt ${rtt}'`` is text whatever the value)."""
    out: list[str] = []
    for arg in argv:
        option, eq, value = arg.partition("=")
        if arg.startswith("--") and eq and VAR_RE.fullmatch(value):
            out += [option, _Captured("1")]
        else:
            out.append(_Captured("1") if VAR_RE.fullmatch(arg) else VAR_RE.sub("1", arg))
    return out


def _defer_captured(parser) -> None:
    """Let every argument of the tree take a ``_Captured`` stand-in unchecked (see ``_Captured``)."""
    import argparse
    import functools

    def lenient(convert):
        @functools.wraps(convert)
        def parse(text):
            if isinstance(text, _Captured):
                text.kind = _kind_of(convert)
                return text
            return convert(text)
        return parse

    todo, seen = [parser], set()
    while todo:
        p = todo.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())  # a command name is never a variable
                continue
            if callable(action.type):
                action.type = lenient(action.type)
            if action.choices is not None:
                action.choices = _AnyCaptured(action.choices)


def _kind_of(convert) -> str:
    """The type an argparse converter makes ("int", "float", "str"): as the converter says it (panio's own
    number types, ``controller.cli.common``), else found by trying it on sample values."""
    if getattr(convert, "kind", None) in ("int", "float", "str"):
        return convert.kind
    for sample in ("1", "3000", "1.5"):
        try:
            value = convert(sample)
        except Exception:  # noqa: BLE001 - argparse converters raise several kinds; the next sample may pass
            continue
        return {int: "int", float: "float"}.get(type(value), "str")
    return "str"


def _runtime_only(job: dict, idx: int, name: str, subcommand: str | None) -> None:
    """A step runs a runtime command (``controller.cli.commands.RUNTIME``): never a lab edit, a hook, a job."""
    from controller.cli.commands import refuse_in_job

    why = refuse_in_job(name, subcommand)
    if why:
        raise _invalid(job["path"], job["text"], ("steps", idx, "run"), f"steps[{idx}].run: {why}")


@functools.cache  # one command tree per process: a suite plans many jobs
def _lenient_parser():
    from controller.cli.main import build_parser

    parser = build_parser(full=True)
    _defer_captured(parser)
    return parser


def compile_steps(job: dict) -> list[dict]:
    parser = _lenient_parser()
    known = set(BUILTIN_VARS)
    out = []
    for idx, step in enumerate(job["data"]["steps"]):
        argv = _check_step(job, idx, step, known, parser)
        expect = step.get("expect_exit", 0)
        out.append({
            "name": step.get("name", f"step {idx + 1}"),
            "argv": argv,
            "command": "panio " + shlex.join(argv),
            "timeout_s": float(step.get("timeout_s", DEFAULT_STEP_TIMEOUT_S)),
            "expect_exit": expect if isinstance(expect, list) else [expect],
            "expect_output": step.get("expect_output"),
            "reject_output": step.get("reject_output"),
            "capture": step.get("capture", {}),
            "continue_on_failure": step.get("continue_on_failure", False),
            "screenshot": step.get("screenshot", False),
        })
        known |= set(step.get("capture", {}))
    return out


def planner(lab: Lab):
    """For ``panio job run`` (the lab is here): plan a ``deferred`` step once its variables are known."""
    return lambda target, argv: _plan(argv, _lenient_parser(), lab, target)


def plan_steps(steps: list[dict], lab: Lab, target: str, path: Path | str | None = None) -> list[dict]:
    """``steps`` (from ``compile_steps``) with what each runs on ``target``: ``run = {op, args}``. A step the
    plan refuses is the job file's fault: the error names the file (``path``) and the step."""
    parser = _lenient_parser()
    out = []
    for idx, step in enumerate(steps, 1):
        try:
            run = _plan(step["argv"], parser, lab, target)
        except UsageError as err:
            named = f"step {idx}" + ("" if step["name"] == f"step {idx}" else f" ({step['name']})")
            raise UsageError(f"{path}: {named}: {err.message}" if path else f"{named}: {err.message}",
                             hint=err.hint, step=idx, **err.details) from None
        out.append({**step, "run": run})
    return out


def _plan(argv: list[str], parser, lab: Lab, target: str) -> dict:
    import json

    from bench_agent.errors import PanioError, Refused
    from bench_agent.jobs.steps import substitute

    argv = [substitute(a, {"target": target}) for a in argv]
    variable = any(VAR_RE.search(a) for a in argv)
    words = []
    for arg in argv:
        option, eq, value = arg.partition("=")
        if arg.startswith("--") and eq and VAR_RE.fullmatch(value):
            words += [option, _Captured(value)]
        else:
            words.append(_Captured(arg) if VAR_RE.fullmatch(arg) else arg)
    args = parser.parse_args(words)
    args.job_target = target  # controller.cli.runtime.job_target: what a plan may want to know of its job
    if getattr(args, "override", False):
        err = Refused("--override is for an operator beside a job; a job step already holds its target's lease",
                      hint="drop --override and --reason from the step")
        return {"op": "system.fail", "args": {"error": err.to_json()}}
    if getattr(args.func, "static", False):
        if variable:  # what it prints depends on a value captured when the job runs
            return {"deferred": argv}
        from controller.cli.runtime import printed

        return {"op": "system.print", "args": printed(args.func, args, lab)}
    try:
        planned = args.func.plan(args, lab)
    except PanioError as err:  # fails when the step runs, as the command would (the lab's fault: incomplete)
        if variable:  # a captured value names what the lab resolves (an interface, an action): plan it then
            return {"deferred": argv}
        return {"op": "system.fail", "args": {"error": err.to_json()}}
    _spec_typed(planned, words)
    return json.loads(json.dumps(planned.payload()))


def _spec_typed(planned, words: list[str]) -> None:
    """Refuse a whole ``${var}`` given to a number that is not a number parameter of the step's operation
    (``ping --count``, ``serial wait --since-time``: the command's own options). When the step runs, a captured
    value is made a number by the operation's spec alone (``bench_agent.jobs.steps.bind``), so nothing would
    make it one there. The job file's fault, said when the job is created, before anything runs."""
    from bench_agent.jobs.steps import spec_param

    for name, value in planned.args.items():
        if not isinstance(value, _Captured) or value.kind == "str":
            continue
        param = spec_param(planned.op, name)
        if param is None or param.kind not in (int, float):
            flag = next((words[i - 1] for i, w in enumerate(words)
                         if w is value and i and words[i - 1].startswith("-")), name)
            raise UsageError(f"`{flag} {value}`: {flag} is the command's own option, not a parameter of "
                             f"{planned.op}: a captured variable cannot give it a number (only an operation's "
                             "parameter is typed when the step runs)", hint=f"write {flag}'s value in the job file",
                             argument=name)


def select_targets(job: dict, lab: Lab, override: str | None) -> list[str]:
    """The targets a job may run on: --target, else ``target``, else every target carrying all ``tags``."""
    data = job["data"]
    if override == "":  # `--target "$BOARD"` with BOARD unset must not quietly run on the file's target
        raise UsageError("--target is empty", hint="was the variable you passed it unset? give a target name")
    if override is not None:
        lab.target(override)
        return [override]
    if data.get("target"):
        try:
            lab.target(data["target"])
        except NotConfigured as err:
            near = err.hint if err.hint and err.hint.startswith("did you mean") else None
            raise _invalid(job["path"], job["text"], ("target",), err.message,
                           hint=f"{near + ' ' if near else ''}fix the job's target, or pass --target TARGET") from None
        return [data["target"]]
    tags = set(data.get("tags", []))
    if not tags:
        raise UsageError(f"{job['path']}: the job names no target and no tags", hint="pass --target TARGET")
    hits = [n for n, t in lab.targets.items() if tags <= set(t.get("tags", []))]
    if not hits:
        raise NotConfigured(f"no target in {lab.path} carries tags {', '.join(sorted(tags))}",
                            hint="tag one with `panio target set NAME --tag TAG`", tags=sorted(tags))
    return hits


def target_config(lab: Lab, target: str, for_worker: bool = False) -> dict:
    """What a payload says about its target: the whole table for a runner here (``panio job run``); for a
    worker, only its host (the queue and a resend go by it): a worker reads the rest from its own lab file,
    and no hook or action command travels on the broker."""
    table = lab.target(target)
    if not for_worker:
        return dict(table)
    return {"host": table["host"]} if table.get("host") else {}


def payload(job: dict, steps: list[dict], target: str, job_id: int, lab: Lab, for_worker: bool = False) -> dict:
    from bench_agent.triage import compare as triage

    data = job["data"]
    table = lab.target(target)
    return {"job_id": job_id, "name": data["name"], "target": target, "steps": plan_steps(steps, lab, target, job["path"]),
            "lab_key": lab.key,  # the host keeps the target's captures and leases per lab (bench_agent.paths)
            "target_config": target_config(lab, target, for_worker),
            "timeout_s": data.get("timeout_s"), "lease_wait_s": data.get("lease_wait_s", 300),
            "lease_ttl_s": data.get("lease_ttl_s", 30),
            # what triage compares a run with its last pass by (bench_agent.triage.compare)
            "inputs": triage.inputs(job["text"], dict(table), table.get("tags", []), triage.panio_version()),
            "triage": {"ignore": list((data.get("triage") or {}).get("ignore", []))}}


def prepare(path: Path, lab: Lab, target: str | None) -> tuple[dict, list[dict], list[str]]:
    """Everything checked before a job is created: (job, compiled steps, candidate targets)."""
    job = load(path)
    steps = compile_steps(job)
    return job, steps, select_targets(job, lab, target)
