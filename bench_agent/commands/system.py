"""The bodies of ``panio ping`` and of the commands that only print what the lab file says.

``system.ping`` opts: ``target``, ``host`` (its name, for the lines), ``count``,
``interval_s``, ``json``. ``system.print``: ``stdout``, the text the controller
rendered from the lab when the command was planned (``target show``, ``config
show``, ``action list``...): a job runs against the lab as it was when it was
queued, so that text is what the step prints.
"""

from __future__ import annotations

import time

from bench_agent.commands import Call, Output, command, fields, items
from bench_agent.errors import DeviceError, from_json

PING = fields({
    "target": ("string", "the target"),
    "host": ("string", "the control host that answered (local: this machine)"),
    "count": ("integer", "round trips made"),
    "times_ms": (items("number"), "each round trip's time, in ms"),
})


@command("system.ping", output=PING)
def ping(call: Call, opts: dict, out: Output, context: dict) -> None:
    target, host = opts["target"], opts.get("host") or "local"
    times_ms = []
    for seq in range(1, opts.get("count", 1) + 1):
        if seq > 1 and opts.get("interval_s"):
            time.sleep(opts["interval_s"])
        start = time.perf_counter()
        reply = call("system.ping", {"payload": seq})
        times_ms.append(round((time.perf_counter() - start) * 1000, 3))
        if reply.get("pong") != seq:
            raise DeviceError(f"{target}: ping {seq} answered {reply!r}", target=target)
        if not opts.get("json"):
            out.say(f"{target} ({host}): seq={seq} time={times_ms[-1]:.3f} ms")
    if opts.get("json"):
        out.json({"target": target, "host": host, "count": opts.get("count", 1), "times_ms": times_ms})


@command("system.print")
def print_(call: Call, opts: dict, out: Output, context: dict) -> None:
    out.write("stdout", opts.get("stdout", ""))
    if opts.get("stderr"):
        out.write("stderr", opts["stderr"])
    if opts.get("error"):
        raise from_json(opts["error"])


@command("system.fail")
def fail(call: Call, opts: dict, out: Output, context: dict) -> None:
    """A step whose plan failed when the job was created (a channel the target lacks): it fails so when it runs."""
    raise from_json(opts["error"])
