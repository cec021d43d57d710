"""Named actions: run a project's command bound to a target (action.run).

The command is split by shlex's rules (``shellwords``) and executed without a shell, with
``PANIO_TARGET`` and ``PANIO_ACTION`` in its environment, bounded by its
``timeout_s`` (default 600). Its output is returned, not streamed.

Arguments (``panio action run pico flash IMAGE``) are appended to the
command's words as they are: each one word, never split or read by a shell.
An action takes them only if its lab table says how many (``max_args``);
the limit travels as configuration beside the command, so a worker takes
both from its own lab file (``bench_agent.jobs.host_config``), and the
arguments alone travel as the request's data.
"""

from __future__ import annotations

from typing import Any

from bench_agent import hooks
from bench_agent.errors import UsageError
from bench_agent.ops import operation
from bench_agent.ops.spec import Param, s_deadline

DEFAULT_TIMEOUT_S = 600.0
ARG_MAX_CHARS = 4096  # one argument: a path or a version, never a file's contents
ARGS_MAX_CHARS = 32768  # all of them: far below the kernel's argv limit (ARG_MAX, 2 MiB on Linux)


@operation("action.run", side_effect=True, destructive=True, deadline=s_deadline("timeout_s", DEFAULT_TIMEOUT_S),
           params=(Param("timeout_s", float, "how long the action may run", default=None, unit="s", minimum=0.001,
                         maximum=86400.0),
                   Param("args", list, "arguments appended to the action's command, each one word (the action's "
                                       "max_args says how many it takes)", default=None)))
def run(target: str, name: str, command: str, timeout_s: float | None = None, args: list[str] | None = None,
        max_args: int | None = None) -> dict[str, Any]:
    """``{"exit", "stdout", "stderr"}`` of the action; a non-zero exit is returned, not raised."""
    extra = check_args(args, max_args, target, name)
    result = hooks.run(command, name=f"action {name} of {target}", check=False,
                       timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
                       env={"PANIO_TARGET": target, "PANIO_ACTION": name}, extra_args=extra)
    return {"target": target, "action": name, "exit": result.returncode, "stdout": result.stdout,
            "stderr": result.stderr}


def check_args(args: Any, max_args: Any, target: str, name: str) -> list[str]:
    """``args`` if action ``name`` of ``target`` may take them (at most ``max_args``, its lab table's), else a
    usage error saying why and how to allow them. Each is text without NUL, bounded, as is their total."""
    args = [] if args is None else args
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise UsageError(f"action {name}: arguments must be a list of text, not {args!r}", argument="args")
    if not args:
        return []
    limit = max_args if isinstance(max_args, int) and not isinstance(max_args, bool) else 0
    if limit <= 0:
        raise UsageError(f"action {name} of {target} takes no arguments (got {len(args)})",
                         hint=f"to let it take them, set `max_args = N` in [targets.{target}.actions.{name}] of the "
                              "lab file (or add the action with --max-args N)",
                         argument="args", target=target, action=name)
    if len(args) > limit:
        raise UsageError(f"action {name} of {target} takes at most {limit} argument{'s' * (limit != 1)}, "
                         f"not {len(args)}", hint="raise its max_args in the lab file", argument="args",
                         target=target, action=name)
    for i, arg in enumerate(args, 1):
        if "\0" in arg:
            raise UsageError(f"action {name}: argument {i} contains a NUL character", argument="args")
        if len(arg) > ARG_MAX_CHARS:
            raise UsageError(f"action {name}: argument {i} is {len(arg)} characters, more than {ARG_MAX_CHARS}",
                             argument="args")
    total = sum(map(len, args))
    if total > ARGS_MAX_CHARS:
        raise UsageError(f"action {name}: the arguments are {total} characters in all, more than {ARGS_MAX_CHARS}",
                         argument="args")
    return list(args)
