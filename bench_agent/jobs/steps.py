"""Run one job step: a compiled runtime command, in this process, bounded in time, judged by its expectations.

When the job was created, the step's command line was compiled to
``run = {"op": NAME, "args": {...}}`` (``controller.jobs.spec``): the body the
CLI runs for the same command line (``bench_agent.commands``), named by its
operation, with the lab's configuration already in ``args``. ``${var}``
placeholders stay in ``args`` until the step runs (``bind``); a whole
``${var}`` then becomes the kind the operation's spec gives that parameter.
A payload an older panio wrote (``{"command", "opts", "typed"}``) is read as
the same step (``normalised``).

``execute`` runs the body in a thread of its own, with the lease token in
every request, and records what it prints (stdout and stderr, in order, as the
terminal would show them) plus, when it fails, the error exactly as the CLI
reports it (one human line, one JSON line). Past its deadline (within
``POLL_S``), or when the job is canceled or its lease lost (asked every
``STOP_CHECK_S``: a database read, not 20 a second), the step is stopped: every
process it started (hooks, helpers) is killed, through ``bench_agent.process``'s
scope, and the body's thread is left to end on its own bounded wait.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable

from bench_agent.errors import InternalError, PanioError, UsageError

VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
OUTPUT_LIMIT = 1_000_000
POLL_S = 0.05
STOP_CHECK_S = 0.25  # how often a running step asks whether it was canceled (a cancel lands within a second)
# A job's moments, for `serial wait --since-step`/`--since-job` (a `panio` a step's own script runs inside a
# job reads them from its environment; the job's own steps get them as the body's context).
from bench_agent.jobs import JOB_STARTED_ENV, PREVIOUS_STEP_ENV  # noqa: E402,F401 - said once, in the package


POWER_SWITCHES = {"power.on": "on", "power.off": "off", "power.cycle": "cycle"}


def normalised(run: dict[str, Any]) -> dict[str, Any]:
    """A step's ``run`` as this panio writes it, ``{"op", "args"}`` (or ``{"deferred": argv}``). An older panio
    wrote ``{"command", "opts", "typed"}`` (a job queued before an upgrade, a sealed message kept in the
    database): the same step, read here, the one place that knows the old form. Its ``typed`` is not needed:
    the operation's spec types the step's arguments (``bind``)."""
    if "command" not in run or "op" in run:
        return run
    return {"op": run["command"], "args": run.get("opts") or {}}


def kind(step: dict) -> str | None:
    """What a planned step does: the operation its command line compiled to (``power.off``, ``serial.watch``:
    ``run["op"]``), never its words. The one place a job step's kind is read (the lab probe, the power watch,
    the health gate). None while it is ``deferred`` (a captured value names what only the lab resolves: it is
    planned when it runs, ``planned``)."""
    run = normalised(step.get("run") or {})
    return None if "deferred" in run else run.get("op")


def switches_power(step: dict) -> str | None:
    """"on", "off" or "cycle" when the step switches its target's power, else None."""
    return POWER_SWITCHES.get(kind(step) or "")


def reads_console(step: dict) -> bool:
    """The step works a serial console (``serial.*``): a stopped capture or a closed port can fail it."""
    return (kind(step) or "").startswith("serial.")


def substitute(text: str, variables: dict[str, str]) -> str:
    return VAR_RE.sub(lambda m: variables.get(m.group(1), m.group(0)), text)


def command_line(step: dict, variables: dict[str, str]) -> str:
    """The step's command as it runs (or would have run) with ``variables``, for records and reports."""
    import shlex

    if "argv" not in step:  # a payload from an older panio carries only the command text
        return substitute(step.get("command", ""), variables)
    return "panio " + shlex.join(substitute(a, variables) for a in step["argv"])


def known_variables(job_id: int, target: str) -> dict[str, str]:
    """The variables every step has before any capture."""
    return {"target": target, "job_id": str(job_id)}


def bind(run: dict[str, Any], variables: dict[str, str]) -> dict[str, Any]:
    """The step's ``args`` with every ``${var}`` filled. A whole-``${var}`` argument becomes the kind its
    operation's spec gives that parameter (int, float: ``spec_param``), as the command line would have made it;
    a value that is not of that kind is a usage error naming the flag."""
    given = run.get("args") or {}
    args = _fill(given, variables)
    for name, template in given.items():
        if isinstance(template, str) and VAR_RE.fullmatch(template):
            param = spec_param(run["op"], name)
            if param is not None and param.kind in (int, float):
                args[name] = _number(param, args[name])
    return args


def spec_param(op: str, name: str):
    """Parameter ``name`` of operation ``op``'s spec (a ``bench_agent.ops.Param``), or None: not one of its
    parameters, or ``op`` names a body that is no single operation (``hardware.doctor``, ``system.print``)."""
    from bench_agent import ops

    try:
        return ops.spec(op).param(name)
    except UsageError:
        return None


def _number(param, value: str) -> int | float:
    from bench_agent.ops.spec import _KINDS  # the spec's own words for its kinds

    try:
        return param.kind(value)
    except ValueError:
        raise UsageError(f"{param.cli_flag} got {value!r} from a captured variable: it must be "
                         f"{_KINDS[param.kind]}", argument=param.name) from None


def _fill(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        return substitute(value, variables)
    if isinstance(value, list):
        return [_fill(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, variables) for k, v in value.items()}
    return value


def planned(target: str, run: dict, variables: dict[str, str],
            planner: Callable[[str, list[str]], dict] | None) -> dict:
    """The step's ``run`` (``normalised``); a ``deferred`` one (a captured value names what only the lab resolves, as in
    ``target show ${board}``) is planned now by ``planner``, where the lab file is (``panio job run``)."""
    from bench_agent import commands
    from bench_agent.errors import Refused

    run = normalised(run)
    if "deferred" not in run:
        if run.get("op") not in commands.BODIES:
            try:
                commands.body(run.get("op") or "")
            except UsageError:
                raise Refused(f"the step names {run.get('op')!r}, which is not a runtime command: a job "
                              "step never edits the lab file, configures a hook or manages jobs",
                              hint="see `panio job check` and docs/jobs.md") from None
        return run
    argv = [substitute(a, variables) for a in run["deferred"]]
    if planner is None:
        raise UsageError(f"`panio {' '.join(argv)}` needs the lab file when it runs (a captured value names "
                         "a target, interface or action), and a worker has none",
                         hint="name it in the job file, or run the job with `panio job run` (no broker)")
    return planner(target, argv)


def execute(body: Callable[[], None], out, timeout_s: float,
            should_stop: Callable[[], str | None]) -> tuple[int | None, str | None]:
    """Run ``body`` (which writes to the ``Recorder`` ``out``) until it ends, ``timeout_s`` passes or
    ``should_stop`` names a reason. Returns (exit status, None) or (None, why it was stopped)."""
    import contextvars
    import time

    from bench_agent import process

    result: dict[str, Any] = {}

    def target() -> None:
        try:
            body()
            result["code"] = 0
        except PanioError as err:
            out.error(err)
            result["code"] = err.exit_status
        except Exception as exc:  # noqa: BLE001 - a bug in one step is that step's error, never the worker's
            err = InternalError(f"internal error: {type(exc).__name__}: {exc}",
                                hint="this is a bug in panio; the worker's log has the traceback")
            import logging

            logging.getLogger("panio.worker").exception("step body failed")
            out.error(err)
            result["code"] = err.exit_status

    with process.scope() as children:
        thread = threading.Thread(target=contextvars.copy_context().run, args=(target,), name="panio-step",
                                  daemon=True)
        thread.start()
        end = time.monotonic() + timeout_s
        asked = time.monotonic()
        why = None
        while why is None:
            thread.join(POLL_S)
            if not thread.is_alive():
                break
            now = time.monotonic()
            if now >= end:
                why = "timeout"
            elif now - asked >= STOP_CHECK_S:
                asked, why = now, should_stop()
        if why is not None:
            children.stop_all()
            return None, why
    return result.get("code", 70), None


def judge(step: dict, exit_status: int, output: str, variables: dict[str, str]) -> tuple[list[dict], dict[str, str]]:
    """The checks of a finished step and the variables it captured."""
    expected = step.get("expect_exit", [0])
    checks = [{"check": f"exit status in {expected}", "ok": exit_status in expected, "got": exit_status}]
    if step.get("expect_output"):
        pattern = substitute(step["expect_output"], variables)
        checks.append(_match_check(f"output matches /{pattern}/", pattern, output, lambda m: m is not None)[0])
    if step.get("reject_output"):
        pattern = substitute(step["reject_output"], variables)
        checks.append(_match_check(f"output does not match /{pattern}/", pattern, output, lambda m: m is None)[0])
    captured: dict[str, str] = {}
    for var, pattern in step.get("capture", {}).items():
        check, m = _match_check(f"capture {var} from /{pattern}/", pattern, output, lambda m: m is not None)
        if check["ok"]:
            captured[var] = m.group(1) if m.groups() else m.group(0)
        checks.append({**check, "got": captured.get(var)})
    return checks, captured


def _match_check(name: str, pattern: str, output: str, ok) -> tuple[dict, object]:
    """One expectation on a step's output and its match; an invalid or too slow pattern fails it, saying why."""
    from bench_agent import patterns
    from bench_agent.errors import UsageError

    try:
        m = patterns.find(pattern, output)
    except UsageError as err:
        return {"check": name, "ok": False, "error": err.message}, None
    return {"check": name, "ok": ok(m)}, m
