"""Runtime commands on the CLI: plan (command line + lab file -> plain data), then run the body.

A runtime command's handler is a *plan*: it reads the lab and returns a
``Step`` (the operation it runs, the target and the plain-data ``args`` of its
body). ``@runtime``
turns the plan into the argparse handler, which runs the body
(``bench_agent.commands``) with this process's dispatcher and the terminal.
A job calls the same plan to compile a step into its payload (``{"op", "args"}``,
``Step.payload``), and the worker runs the same body: one plan, one body,
whatever the road.
"""

from __future__ import annotations

import os
import sys

from bench_agent.commands import Output
from controller.cli.common import load_lab, static  # noqa: F401 - static: re-exported for the command modules

TYPE_CHECKING = False  # not typing's: this module is on every runtime command's start-up path
if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable

    Plan = Callable[[argparse.Namespace, Any], "Step"]


class Step:
    """What a runtime command does, planned: run the body of ``op`` for ``target`` with ``args``. ``op`` names
    the operation the body carries out (``power.cycle``; a body that is no single operation has a name of the
    same form: ``hardware.doctor``, ``system.print``); ``args`` are the body's, the operation's parameters
    among them by their spec's names (``spec_args``), with what the lab resolved (the channel's configuration).

    ``hosts``: op -> the host it runs on, when not the target's. ``override``: the command's words when it
    may act under --override (serial watch/stop). ``route``: for a target-less step whose operations go to
    several hosts (``doctor``: each target's own), (op, args) -> the host; only the CLI's road uses it, a
    job's operations run on its target's host. (A plain class, not a dataclass: dataclasses imports
    inspect, a tenth of an interpreter's start-up.)"""

    __slots__ = ("op", "target", "args", "hosts", "override", "route")

    def __init__(self, op: str, target: str | None, args: dict[str, Any], hosts: dict[str, Any] | None = None,
                 override: str | None = None, route: Callable[[str, dict[str, Any]], str | None] | None = None) -> None:
        self.op, self.target, self.args = op, target, args
        self.hosts = {} if hosts is None else hosts
        self.override, self.route = override, route

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Step) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        return "Step(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"

    def payload(self) -> dict[str, Any]:
        """The step as a job payload carries it, ``{"op", "args"}`` (the worker runs it on the target's host;
        ``bench_agent.jobs.steps`` reads it). No parameter's type travels beside it: the operation's spec says it."""
        return {"op": self.op, "args": self.args}


class Terminal(Output):
    """This process's stdout and stderr, written as the body goes (a long ``ping -c`` shows each line);
    in a context that captures (``common.capturing``: the MCP server), that capture."""

    def write(self, stream: str, data: str | bytes) -> None:
        from controller.cli.common import captured

        capture = captured()
        if capture is not None:
            capture.write(stream, data)
            return
        f = sys.stdout if stream == "stdout" else sys.stderr
        if isinstance(data, bytes):
            f.flush()
            f.buffer.write(data)
            f.buffer.flush()
        else:
            f.write(data)
        if stream == "stderr":
            f.flush()


def context_from_env() -> dict[str, Any]:
    """The moments a job gives its steps, when a ``panio`` runs inside one (a step's own scripts)."""
    from bench_agent.jobs import JOB_STARTED_ENV, PREVIOUS_STEP_ENV

    return {"job_started_at": os.environ.get(JOB_STARTED_ENV),
            "previous_step_started_at": os.environ.get(PREVIOUS_STEP_ENV)}


def run_step(lab: Any, step: Step, args: argparse.Namespace | None = None, out: Output | None = None) -> None:
    """Run a planned step here: its operations through the lab's dispatcher, its text to the terminal."""
    from bench_agent import commands
    from controller import dispatch

    d = dispatch.for_lab(lab)

    def call(op: str, op_args: dict[str, Any]) -> Any:
        if step.route is not None:
            return d.call_host(step.route(op, op_args), op, op_args)
        if step.target is None:
            return d.call_host(step.hosts.get(op), op, op_args)
        if op in step.hosts:
            return d.call(step.target, op, op_args, host=step.hosts[op])
        return d.call(step.target, op, op_args)

    out = out or Terminal()
    if step.override is None or args is None:
        commands.run(step.op, call, step.args, out, context_from_env())
        return
    from controller.jobs import overrides

    with overrides.acting(args, step.target, step.override) as record:
        def acted(op: str, op_args: dict[str, Any]) -> Any:
            try:
                return call(op, op_args)
            finally:
                overrides.settle(record)  # what it prints names the job whose lease the host overrode

        commands.run(step.op, acted, {**step.args, "override": record}, out, context_from_env())


def spec_args(args: argparse.Namespace, op: str) -> dict[str, Any]:
    """The request arguments of operation ``op`` the command line gave: each parameter of its spec that the
    command declares (``common.add_param`` adds it under the parameter's own name), by that name. A plan passes
    these on as they are, so the spec names what reaches the operation; a plan adds only what the spec does not
    have (the target's channel configuration, a flag of the command's own such as --no-newline). The parsers' own
    routing names (``command``: the top-level command's word, ...) are never parameters: ``hid.send``'s
    ``command`` is the body's to build from the words."""
    from bench_agent import ops

    return {p.name: getattr(args, p.name) for p in ops.spec(op).params
            if p.name not in _ROUTING and hasattr(args, p.name)}


_ROUTING = ("command", "subcommand", "func", "verb")  # what the parsers and set_defaults put in a namespace


def job_target(args: argparse.Namespace) -> str | None:
    """The target of the job a step is planned for (``controller.jobs.spec`` says it), None on the command line.
    A job's operations all run on that target's host (a worker has no other road)."""
    return getattr(args, "job_target", None)


def on_job_host(args: argparse.Namespace, lab: Any, command: str) -> None:
    """``--host H`` in a job step: only the job target's own host can be reached; any other is refused."""
    target = job_target(args)
    if target is None or args.host is None:
        return
    own = lab.target(target).get("host")
    if args.host != own:
        from bench_agent.errors import UsageError

        raise UsageError(f"`panio {command} --host {args.host}` in a job step would run on {target}'s host "
                         f"({own or 'local'}), not {args.host}",
                         hint=f"drop --host (a step runs on its target's host), or run `panio {command}` outside the job")


def printed(handler: Callable[[argparse.Namespace], Any], args: argparse.Namespace, lab: Any) -> dict[str, Any]:
    """What a ``static`` command prints for ``args`` against ``lab``, as a ``system.print`` step's args."""
    import contextlib
    import io

    from bench_agent.errors import PanioError

    args.lab_path, args.lab_source = str(lab.path), "given"
    out, err = io.StringIO(), io.StringIO()
    error = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            handler(args)
        except PanioError as exc:
            error = exc.to_json()
    return {"stdout": out.getvalue(), "stderr": err.getvalue(), "error": error}


def runtime(plan: Plan | None = None, *,
            needs_lab: bool | Callable[[argparse.Namespace], bool] = True) -> Any:
    """The argparse handler of a runtime command planned by ``plan``; ``handler.plan`` is kept for ``job check``.
    ``needs_lab=False``: the command reads no lab file (``serial devices``), its plan gets ``None``; a
    function of the arguments says it per command line (``discover`` reads the lab only with ``--host``)."""
    if plan is None:
        return lambda p: runtime(p, needs_lab=needs_lab)

    def handler(args: argparse.Namespace) -> None:
        wanted = needs_lab(args) if callable(needs_lab) else needs_lab
        lab = load_lab(args) if wanted else None
        run_step(lab, plan(args, lab), args)

    handler.plan = plan  # type: ignore[attr-defined]
    handler.__name__ = handler.__qualname__ = plan.__name__
    handler.__doc__ = plan.__doc__
    return handler
