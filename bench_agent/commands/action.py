"""The body of ``panio action run TARGET NAME``.

``opts``: ``target``, ``name``, ``action`` (its table: command, timeout_s,
requires_power, max_args), ``args`` (words appended to its command: the
operation's parameter), ``power`` and ``sense`` (for a ``requires_power`` action).
"""

from __future__ import annotations

from bench_agent.commands import Call, Output, command
from bench_agent.errors import HookFailed


@command("action.run")
def run(call: Call, opts: dict, out: Output, context: dict) -> None:
    from bench_agent.commands.power import require_on

    from bench_agent.ops.action import check_args

    target, name, act = opts["target"], opts["name"], opts["action"]
    extra = check_args(opts.get("args"), act.get("max_args"), target, name)  # refused before power is read
    if act.get("requires_power") and require_on(call, target, opts.get("power"), opts.get("sense"),
                                                f"action {name} requires power") == "unknown":
        out.note(f"note: cannot read {target}'s power state (no state_cmd or power_sense_signal); "
                 f"running {name} anyway")
    request = {"target": target, "name": name, "command": act["command"], "timeout_s": act.get("timeout_s")}
    if extra:  # the limit travels beside the command, as configuration a worker checks against its own
        request.update(args=extra, max_args=act.get("max_args"))
    result = call("action.run", request)
    out.write("stdout", result["stdout"])
    out.write("stderr", result["stderr"])
    if result["exit"] != 0:
        from bench_agent.hooks import HookResult, failed

        err = failed(HookResult([], result["exit"], result["stdout"], result["stderr"]),
                     f"action {name} of {target}", act["command"])
        raise HookFailed(err.message, target=target, action=name, **err.details)
