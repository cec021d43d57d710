"""The bodies of ``panio serial watch|stop|log|send|transact|wait|evidence|status|reset|dtr|devices``.

``opts`` carries ``target``, the resolved interface (``iface``, the lab's table)
or all of them (``interfaces``), ``interface`` (the name the user gave, for
hints), ``json`` and the command's own flags (see ``controller.cli.channels.serial_runtime``).
"""

from __future__ import annotations

from bench_agent.commands import Call, Output, command, fields, items, maybe, passed
from bench_agent.errors import DeviceError, NotRunning, Timeout, Unreachable, UsageError

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    from typing import Any

# What each command prints with --json (`wait`, `evidence` and `status` always print it). "unknown" stands
# for a value panio cannot know (no capture running, nothing sent yet), hence the "...|string" kinds.
OVERRIDE = maybe(fields({"job_id": ("string|null", "the job whose lease was overridden"),
                         "holder": ("string|null", "who held the lease")}))
WATCH = fields({
    "target": ("string", "the target"),
    "pid": ("integer", "the capture's supervisor process"),
    "epoch": ("integer", "the capture epoch: cursors count from it"),
    "already_running": ("boolean", "it was capturing before (nothing started)"),
    "interfaces": (items("string"), "the interfaces captured"),
    "override": (OVERRIDE, "the lease overridden (--override), or null"),
})
STOP = fields({
    "target": ("string", "the target"),
    "pid": ("integer", "the supervisor stopped"),
    "epoch": ("integer|null", "the epoch it was capturing"),
    "stopped": ("boolean", "true"),
    "how": ("string", "how it ended (request, SIGTERM, SIGKILL)"),
    "override": (OVERRIDE, "the lease overridden (--override), or null"),
    "legacy?": ("boolean", "a capture started before panio kept captures per lab"),
    "note?": ("string", "where that capture's logs stay"),
})
LINE = fields({
    "time": ("string", "when it arrived (ISO 8601)"),
    "epoch": ("integer", "the capture epoch"),
    "seq?": ("integer", "the line's sequence number (--since takes it)"),
    "text?": ("string", "the line, control bytes rendered"),
    "complete?": ("boolean", "false: no line end yet (a prompt)"),
    "gap?": ("string", "a gap in the capture instead of a line: its reason"),
    "next_seq?": ("integer", "a gap: the sequence number after it"),
})
LOG = fields({
    "target": ("string", "the target"),
    "interface": ("string", "the interface read"),
    "lines": (items(LINE), "the lines of the window, oldest first"),
    "next_seq": ("integer", "the next line's sequence number"),
    "last_seq": ("integer|null", "the last line's (null: nothing captured)"),
    "running": ("boolean", "the capture runs"),
    "evicted_before?": ("integer", "lines before this one were evicted (the log's size limit)"),
    "more_after?": ("integer", "the window was cut: poll again with --since this"),
})
SENT = fields({
    "interface": ("string", "the interface written to"),
    "sent_bytes": ("integer", "bytes written (line ending included)"),
    "epoch": ("integer", "the capture epoch"),
    "cursor": ("integer", "the receive cursor at the send: wait --since it for the reply"),
})
WAITED = {
    "status": ("string", "matched, timeout, cap (max bytes), disconnect or fault"),
    "interface": ("string", "the interface read"),
    "epoch": ("integer", "the capture epoch"),
    "since": ("integer", "the cursor asked for"),
    "start": ("integer", "the cursor of the first byte returned (later than since: evicted bytes)"),
    "cursor": ("integer", "where to continue from (after the match, else after the bytes)"),
    "end": ("integer", "the cursor after the last byte read"),
    "evicted_bytes": ("integer", "bytes between since and start no longer in the log"),
    "elapsed_ms": ("number", "how long it waited"),
    "bytes": ("integer", "bytes returned"),
    "text": ("string", "the bytes as text (undecodable bytes escaped)"),
    "data_b64?": ("string", "the exact bytes, base64 (dropped when output_truncated)"),
    "match?": (fields({"start": ("integer", "cursor"), "end": ("integer", "cursor"), "text": ("string", "matched"),
                       "groups": (items("string|null"), "the pattern's groups")}), "the match (--pattern)"),
    "matches?": (items("object"), "--follow: every match"),
    "ended?": ("string", "--follow: why the wait ended"),
    "pending?": ("string", "--include-pending: bytes after the match"),
    "epoch_changed?": ("boolean", "the capture restarted since the epoch asked for (wait --epoch)"),
    "output_truncated?": ("boolean", "cut to --max-output-bytes"),
    "fault?": ("string", "what failed (status fault)"),
    "capture_stopped?": ("boolean", "status disconnect: panio's capture stopped, not the device"),
}
WAIT = fields(WAITED)
TRANSACT = fields({**WAITED, "sent_bytes": ("integer", "bytes written before the wait (line ending included)")})
RECORD = fields({
    "kind": ("string", "data, sent, gap, ..."),
    "epoch": ("integer", "the capture epoch"),
    "cursor": ("integer", "the receive cursor of its first byte"),
    "rx_time": ("string|null", "when it was received (ISO 8601)"),
    "bytes?": ("integer", "data: bytes in the window"),
    "data_b64?": ("string", "data: the exact bytes, base64"),
    "text?": ("string", "data: the bytes as text"),
    "partial?": ("boolean", "data: cut by the window"),
    "note?": ("object", "not data: what the record says (sent: sent_bytes and text)"),
})
EVIDENCE = fields({
    "target": ("string", "the target"),
    "interface": ("string", "the interface read"),
    "observed_at": ("string", "when panio looked (ISO 8601)"),
    "epoch": ("integer|string", "the current capture epoch (unknown: never captured)"),
    "capturing": ("boolean", "the capture runs"),
    "requested": (fields({"epoch": ("integer|null", "--epoch"), "since": ("integer|null", "--since"),
                          "max_bytes": ("integer", "--max-bytes")}), "what was asked"),
    "epoch_changed": ("boolean", "the capture restarted since --epoch"),
    "retained": (fields({"first_cursor": ("integer|null", "the oldest byte kept"),
                         "end_cursor": ("integer", "after the newest")}), "what the log still holds"),
    "evicted": ("boolean", "bytes from --since on were evicted"),
    "cap": ("boolean", "more bytes than --max-bytes: the window was cut"),
    "window": (fields({"from": ("integer", "cursor"), "to": ("integer", "cursor")}), "the bytes returned"),
    "next_cursor": ("integer", "continue from here (--since)"),
    "bytes": ("integer", "bytes in the window"),
    "gaps": (items(RECORD), "gap records in the window"),
    "records": (items(RECORD), "every record in the window, in order"),
})
STATUS = fields({
    "target": ("string", "the target"),
    "interface": ("string", "the interface"),
    "observed_at": ("string", "when panio looked (ISO 8601)"),
    "configured": ("object", "the lab's device, baud, line_ending, power_sense_signal, power_button"),
    "active": ("object|string", "device, real_device, baud, matches_configured of the capture (or unknown)"),
    "process": (fields({"state": ("string", "running or not_running"), "pid": ("integer|null", "the supervisor"),
                        "started?": ("string", "when it started")}), "the capture's supervisor"),
    "port": (fields({"state": ("string", "open, fault, not_owned, unknown...")}, "and last_error, disconnects "
                    "or holders"), "the device"),
    "epoch": ("integer|string", "the capture epoch (unknown: never captured)"),
    "rx": (fields({"cursor": ("integer", "bytes received so far"), "next_seq": ("integer", "the next line's number"),
                   "last_rx": ("string|null", "when the last byte came (ISO 8601, or unknown)")}), "receive progress"),
    "tx": (fields({"bytes": ("integer|string", "bytes sent (unknown without a capture)"),
                   "last_tx?": ("string", "when (ISO 8601, or unknown)")}), "send progress"),
    "log": (fields({"path": ("string", "the log file"), "bytes_on_disk": ("integer", "its size"),
                    "gaps_recorded": ("integer", "capture outages recorded")}), "the capture log"),
})
PULSE = fields({
    "target": ("string", "the target"),
    "interface": ("string", "the interface whose DTR was held"),
    "pulse_ms": ("integer", "how long"),
})
PORT = fields({
    "device": ("string", "the port's device node"),
    "by_id": ("string|null", "its stable /dev/serial/by-id path (null: udev made none)"),
    "vid_pid": ("string|null", "USB VID:PID (hex)"),
    "serial_number": ("string|null", "the adapter's USB serial number"),
    "manufacturer": ("string|null", "the adapter's maker"),
    "description": ("string", "what the driver calls it"),
    "location": ("string|null", "its USB location"),
})


def _op(call: Call, op: str, opts: dict[str, Any], args: dict[str, Any], with_iface: bool = True) -> Any:
    args = {"target": opts["target"], **args}
    if with_iface:
        args["iface"] = opts["iface"]
    return call(op, args)


def said(override: dict[str, Any] | None) -> str:
    """The words a command adds to its output when it overrode a lease (``controller.jobs.overrides``)."""
    if override is None:
        return ""
    if not override["job_id"] and not override["holder"]:
        return "; no lease held the target when it acted (nothing overridden)"
    whose = f"job {override['job_id']}'s lease" if override["job_id"] else f"the lease of {override['holder']}"
    where = f" (recorded: `panio job status {override['job_id']}`)" if override["job_id"] else ""
    return f"; overrode {whose}{where}"


@command("serial.watch", output=WATCH)
def watch(call: Call, opts: dict, out: Output, context: dict) -> None:
    target, override = opts["target"], opts.get("override")
    r = call("serial.watch", {"target": target, "interfaces": opts["interfaces"]})
    if opts.get("json"):
        out.json({**r, "override": override})
        return
    how = "already running" if r["already_running"] else "started"
    out.say(f"serial capture of {target} {how}: pid {r['pid']}, epoch {r['epoch']}, interfaces "
            f"{', '.join(r['interfaces'])}{said(override)}. Read with `panio serial log {target}`.")


@command("serial.stop", output=STOP)
def stop(call: Call, opts: dict, out: Output, context: dict) -> None:
    override = opts.get("override")
    r = _op(call, "serial.stop", opts, passed("serial.stop", opts), with_iface=False)
    if opts.get("json"):
        out.json({**r, "override": override})
    else:
        out.say(f"stopped serial capture of {opts['target']} (pid {r['pid']}, epoch {r['epoch']}); "
                f"the log stays on disk{said(override)}")
        if r.get("note"):
            out.say(r["note"])


@command("serial.log", output=LOG)
def log(call: Call, opts: dict, out: Output, context: dict) -> None:
    from bench_agent.serial.lines import format_entry

    if opts.get("first") is not None and opts.get("last") is not None and opts["first"] > opts["last"]:
        raise UsageError(f"--from {opts['first']} is after --to {opts['last']}")
    target = opts["target"]
    r = _op(call, "serial.log", opts, passed("serial.log", opts))
    if r["last_seq"] is None and not r["lines"] and not r["running"]:
        raise NotRunning(f"nothing captured yet for {target!r}", hint=f"run `panio serial watch {target}`",
                         target=target)
    if opts.get("json"):
        out.json(r)
        return
    if r.get("evicted_before") is not None:
        out.say(f"-- lines before #{r['evicted_before']} were evicted from the log (its size limit) --")
    out.write("stdout", "".join(format_entry(entry) + "\n" for entry in r["lines"]))
    if r.get("more_after") is not None:
        out.say(f"-- more lines follow: panio serial log {target} --since {r['more_after']} --")


@command("serial.send", output=SENT)
def send(call: Call, opts: dict, out: Output, context: dict) -> None:
    r = _op(call, "serial.send", opts, passed("serial.send", opts))
    if opts.get("json"):
        out.json(r)
    else:
        out.say(f"sent {r['sent_bytes']} bytes to {opts['target']}/{r['interface']}; "
                f"read the reply with `panio serial log {opts['target']} --tail 20`")


@command("serial.transact", output=TRANSACT)
def transact(call: Call, opts: dict, out: Output, context: dict) -> None:
    from bench_agent.serial.matcher import compile_pattern

    compile_pattern(opts["until"])
    r = _op(call, "serial.transact", opts, passed("serial.transact", opts))
    if opts.get("json"):
        out.json(r)
    else:
        out.write("stdout", r["text"] + ("" if r["text"].endswith("\n") else "\n"))
    _raise_unless_matched(r, opts["until"], opts)


def _start(opts: dict, context: dict) -> dict[str, Any]:
    """Where a wait starts, as operation arguments: {} for an explicit --epoch/--since, else a moment."""
    moments = [f for f in ("since_step", "since_job", "since_now") if opts.get(f)]
    moments += ["since_time"] if opts.get("since_time") is not None else []
    if moments and (opts.get("epoch") is not None or opts.get("since") is not None):
        raise UsageError("give either --epoch/--since or a moment (--since-now, --since-step, --since-job, "
                         "--since-time), not both")
    if not moments:
        if opts.get("epoch") is None or opts.get("since") is None:
            target = opts["target"]  # checked against the lab by now
            raise UsageError("serial wait needs where to start: --since-now waits for what arrives from now on",
                             hint=f"`panio serial wait {target} --since-now --pattern REGEX`; to include what "
                                  f"already arrived, take --epoch and --since from `panio serial status {target}`")
        return {}
    if opts.get("since_now"):
        return {"since_now": True}
    if opts.get("since_time") is not None:
        return {"since_time_ns": int(opts["since_time"] * 1e9)}
    value = context.get("previous_step_started_at" if opts.get("since_step") else "job_started_at")
    if not value:
        flag = "--since-step" if opts.get("since_step") else "--since-job"
        raise UsageError(f"{flag} works inside a job step only (the job runner says when the step began)",
                         hint="outside a job use --since-now, --since-time T or --epoch/--since")
    return {"since_time_ns": int(float(value) * 1e9)}


@command("serial.wait", output=WAIT, always_json=True)
def wait(call: Call, opts: dict, out: Output, context: dict) -> None:
    from bench_agent.serial.matcher import compile_pattern

    compile_pattern(opts.get("pattern"))
    extra = _start(opts, context)
    r = _op(call, "serial.wait", opts, {**passed("serial.wait", opts), **extra})
    out.json(r)
    _raise_unless_matched(r, opts.get("pattern"), opts)


def _raise_unless_matched(r: dict[str, Any], pattern: str | None, opts: dict) -> None:
    target = opts["target"]
    status, details = r["status"], {"status": r["status"], "cursor": r["cursor"], "epoch": r["epoch"]}
    if status == "disconnect" and r.get("capture_stopped"):
        from bench_agent.serial.control import capture_stopped

        raise capture_stopped(target, "during the wait", **details)
    if status == "disconnect":
        raise Unreachable(f"the serial device of {target!r} went away during the wait", **details)
    if status == "fault":
        raise DeviceError(f"serial wait on {target!r} failed: {r.get('fault')}", **details)
    if pattern is not None and status in ("timeout", "cap"):
        why = "time ran out" if status == "timeout" else f"{r['bytes']} bytes arrived"
        raise Timeout(f"{pattern!r} did not match before {why}",
                      hint=f"the bytes so far are on stdout; keep waiting from there with `{_wait_from(r, opts)}`",
                      **details)


def _wait_from(r: dict[str, Any], opts: dict) -> str:
    """The `serial wait` that continues where this wait or transact stopped (transact takes no --epoch/--since).
    The pattern is left as a placeholder: a hint never repeats unchecked input in a command meant to be pasted."""
    iface = f" -i {opts['interface']}" if opts.get("interface") else ""  # checked against the lab by now
    return f"panio serial wait {opts['target']}{iface} --epoch {r['epoch']} --since {r['cursor']} --pattern REGEX"


@command("serial.evidence", output=EVIDENCE, always_json=True)
def evidence(call: Call, opts: dict, out: Output, context: dict) -> None:
    if opts.get("since") is not None and opts.get("epoch") is None:
        raise UsageError("--since needs --epoch (the capture epoch the cursor came from)")
    out.json(_op(call, "serial.evidence", opts, passed("serial.evidence", opts)))


@command("serial.status", output=STATUS, always_json=True)
def status(call: Call, opts: dict, out: Output, context: dict) -> None:
    r = _op(call, "serial.status", opts, {})
    out.json(r)
    if r["process"]["state"] == "not_running":  # the JSON above still says what the log holds
        from bench_agent.serial.control import not_running

        raise not_running(opts["target"])


def _pulse_out(opts: dict, out: Output, r: dict[str, Any]) -> None:
    if opts.get("json"):
        out.json(r)
    else:
        out.say(f"held DTR (the power button) of {opts['target']}/{r['interface']} for {r['pulse_ms']} ms")


@command("serial.reset", output=PULSE)
def reset(call: Call, opts: dict, out: Output, context: dict) -> None:
    _pulse_out(opts, out, _op(call, "serial.reset", opts, {}))


@command("serial.dtr", output=PULSE)
def dtr(call: Call, opts: dict, out: Output, context: dict) -> None:
    _pulse_out(opts, out, _op(call, "serial.dtr", opts, passed("serial.dtr", opts)))


@command("serial.devices", output=items(PORT))
def devices(call: Call, opts: dict, out: Output, context: dict) -> None:
    from bench_agent.serial.ports import list_ports

    ports = list_ports()
    if opts.get("json"):
        out.json(ports)
        return
    if not ports:
        out.say("no serial ports found on this host")
        return
    for p in ports:
        out.say(f"{p['device']}  {p['vid_pid'] or '-'}  serial={p['serial_number'] or '-'}  {p['description']}")
        if p["by_id"]:
            out.say(f"    stable path: {p['by_id']}")
