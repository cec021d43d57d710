"""panio serial watch|log|send|transact|wait|evidence|status|connect|stop|reset|dtr: the console at run time.

Each command resolves the target's interface from the lab file and calls the
``serial.<verb>`` operation through ``controller.dispatch``; the operation runs
on the host that owns the port, where the capture supervisor lives.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench_agent.errors import DeviceError, NotConfigured, NotRunning, Timeout, Unreachable, UsageError
from controller import overrides
from controller.cli.common import (add_json, add_param, add_target_positional, command, load_lab, positive_float,
                                     print_json, say)

SEE = "docs/serial.md, panio skill"


def _iface_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--interface", metavar="IFACE",
                   help="interface name (needed only when the target has several, e.g. console, bmc)")


def _input_opts(p: argparse.ArgumentParser, op: str) -> None:
    p.add_argument("--no-newline", action="store_true",
                   help="send the text as is (a bare key); else the interface's line ending (default CR) follows")
    add_param(p, op, "pace_ms", metavar="N")


def _wait_opts(p: argparse.ArgumentParser, op: str) -> None:
    add_param(p, op, "timeout_ms", metavar="N")
    add_param(p, op, "max_bytes", metavar="N")


def register(sub: argparse._SubParsersAction) -> None:
    _register_capture(sub)
    _register_input(sub)
    _register_inspect(sub)
    _register_power_button(sub)


def _register_capture(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "watch", "start capturing all of a target's serial interfaces to disk (a detached supervisor)",
                func=watch, example="panio serial watch pico",
                see_also=f"panio serial log, panio serial stop, panio daemons, {SEE}",
                details="One supervisor per target owns every interface and survives this command.\n"
                        "It holds the ports exclusively; read with `serial log`, type with `serial send`.\n"
                        "Running it again while capture runs is harmless.")
    add_target_positional(c)
    add_json(c)
    overrides.add_flags(c)

    c = command(sub, "stop", "stop a target's capture supervisor and free its ports (the log stays on disk)",
                func=stop, example=["panio serial stop pico",
                                    "panio serial stop pico --override --reason 'capture wedged'"],
                see_also="panio serial log (works after stop), panio daemons, panio job status (overrides)",
                details="While a job leases the target this is refused (exit 8) unless --override with a\n"
                        "--reason: then it acts with the job's lease and records who, when and why in\n"
                        "that job's history (`panio job status JOB`). The job's next console step fails.")
    add_target_positional(c)
    add_json(c)
    overrides.add_flags(c)

    c = command(sub, "log", "print captured console lines from disk (works while capture is stopped)",
                func=log, example=["panio serial log pico --tail 50", "panio serial log pico --since 1234",
                                   "panio serial log dut -i bmc --from 840 --to 870 --json"],
                see_also=f"panio serial watch, panio serial wait, {SEE}",
                details="Lines print as `[time] #<seq> <text>`; seq numbers are stable for the log's life,\n"
                        "so poll with --since <last seq you saw>. `*` after the seq marks the current,\n"
                        "unterminated line. ANSI sequences are stripped and control bytes escaped\n"
                        "unless --raw. Without a window: the last 200 lines.")
    add_target_positional(c)
    _iface_opt(c)
    window = c.add_mutually_exclusive_group()
    add_param(window, "serial.log", "tail", metavar="N")
    add_param(window, "serial.log", "since", metavar="SEQ")
    add_param(window, "serial.log", "first", "--from", metavar="A", help="lines A..B (with --to)")
    add_param(c, "serial.log", "last", "--to", metavar="B", help="last line of a --from range (inclusive)")
    add_json(c)
    add_param(c, "serial.log", "raw")


def _register_input(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "send", "type text into a console through the running capture (CR appended)",
                func=send, example=["panio serial send pico \"uname -a\"", "panio serial send pico \" \" --no-newline"],
                see_also=f"panio serial transact (send and wait for the reply), panio serial log --since, {SEE}",
                details="Needs `panio serial watch TARGET`. Input lands only if the board's console\n"
                        "reads the UART. The line ending is the interface's line_ending (cr by default).")
    add_target_positional(c)
    c.add_argument("text", metavar="TEXT", help="what to type")
    _iface_opt(c)
    _input_opts(c, "serial.send")
    add_json(c)

    c = command(sub, "transact", "send text and wait until the reply matches a regex; print the reply",
                func=transact, example="panio serial transact pico \"cat /proc/version\" --until 'root@.*# '",
                see_also=f"panio serial send, panio serial wait, {SEE}",
                details="Runs under the interface's transaction lock, so other input waits. The reply\n"
                        "is every byte received after the send up to the end of the match (the board's\n"
                        "echo of TEXT included). Exit 22 (timeout) when --until never matched; the bytes\n"
                        "received so far are printed anyway.")
    add_target_positional(c)
    c.add_argument("text", metavar="TEXT", help="what to type")
    c.add_argument("--until", required=True, metavar="REGEX", help="stop when the reply matches (Python regex)")
    _iface_opt(c)
    _wait_opts(c, "serial.transact")
    _input_opts(c, "serial.transact")
    add_json(c)

    c = command(sub, "wait", "wait for received bytes from a cursor or a moment, optionally until a regex matches (JSON)",
                func=wait, example=["panio serial wait pico --epoch 3 --since 10240 --pattern 'login:' --timeout-ms 60000",
                                    "panio serial wait pico --since-step --pattern 'login:'   # a job step after power-cycle"],
                see_also=f"panio serial status (current epoch and cursor), panio serial evidence, docs/jobs.md, {SEE}",
                details="Where to start: --epoch E --since CURSOR (from `serial status`), or a moment:\n"
                        "--since-step (in a job: from when the previous step began, so `power-cycle` then\n"
                        "`serial wait --since-step --pattern login:` sees the whole boot and no older prompt),\n"
                        "--since-job (from when the job began), --since-time T (epoch seconds).\n"
                        "Status is matched, timeout, cap, disconnect or fault; the accepted bytes and the\n"
                        "cursor to continue from come back whatever the status. Exit 0 when matched (or\n"
                        "no --pattern), 22 on timeout/cap, 4 on disconnect, 12 on fault, 10 no capture.")
    add_target_positional(c)
    add_param(c, "serial.wait", "epoch", metavar="E")
    add_param(c, "serial.wait", "since", metavar="CURSOR")
    moment = c.add_mutually_exclusive_group()
    moment.add_argument("--since-step", action="store_true",
                        help="in a job step: the bytes received since the previous step began (or the job, for step 1)")
    moment.add_argument("--since-job", action="store_true", help="in a job step: the bytes received since the job began")
    moment.add_argument("--since-time", type=positive_float, metavar="T",
                        help="the bytes received since T (seconds since 1970, as `date +%%s.%%N` prints)")
    _iface_opt(c)
    add_param(c, "serial.wait", "pattern", metavar="RE")
    _wait_opts(c, "serial.wait")
    add_param(c, "serial.wait", "max_output_bytes", metavar="N")
    add_param(c, "serial.wait", "include_pending")
    add_param(c, "serial.wait", "follow")


def _register_inspect(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "evidence", "exact received bytes with RX times, cursors, gaps (read-only JSON)",
                func=evidence, example=["panio serial evidence pico", "panio serial evidence pico --epoch 3 --since 10240"],
                see_also=f"panio serial status, panio serial wait, {SEE}")
    add_target_positional(c)
    _iface_opt(c)
    add_param(c, "serial.evidence", "epoch", metavar="E")
    add_param(c, "serial.evidence", "since", metavar="CURSOR", help="records from this byte cursor (needs --epoch)")
    add_param(c, "serial.evidence", "max_bytes", metavar="N")
    add_json(c)

    c = command(sub, "status", "capture and port state of an interface: identity, process, epoch, RX/TX (JSON)",
                func=status, example="panio serial status pico", see_also=f"panio serial evidence, panio daemons, {SEE}",
                details="The JSON is printed whether or not capture runs; with no capture running the\n"
                        "command exits 10 (not_running), so a script or job step sees it in the status.")
    add_target_positional(c)
    _iface_opt(c)
    add_json(c)

    c = command(sub, "connect", "open an interactive terminal on a console (Ctrl-] quits)",
                func=connect, example="panio serial connect pico",
                see_also="panio serial log / send (the agent's way while watch runs), panio serial stop",
                details="Refused while `serial watch` or another program holds the port; the error names\n"
                        "the holder. Agents: use `serial log` and `serial send` instead.")
    add_target_positional(c)
    _iface_opt(c)


def _register_power_button(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "reset", "press the board's button with a short DTR pulse (200 ms); needs power_button",
                func=reset, example="panio serial reset dut",
                see_also="panio serial dtr (hard off), panio serial set --power-button, "
                         "panio serial send TARGET reboot (a console reboot)")
    add_target_positional(c)
    _iface_opt(c)
    add_json(c)

    c = command(sub, "dtr", "hold the board's button via DTR for N ms (>= 3000: hard power-off); needs power_button",
                func=dtr, example="panio serial dtr dut --ms 3000",
                see_also="panio serial reset, panio serial set --power-button")
    add_target_positional(c)
    add_param(c, "serial.dtr", "ms", metavar="N")
    _iface_opt(c)
    add_json(c)


# -- handlers -------------------------------------------------------------------------------------


def _call(args: argparse.Namespace, op: str, extra: dict[str, Any], with_iface: bool = True) -> Any:
    from controller import dispatch

    lab = load_lab(args)
    call_args: dict[str, Any] = {"target": args.target, **extra}
    if with_iface:
        call_args["iface"] = dict(lab.serial(args.target, args.interface))
    return dispatch.call(lab, args.target, op, call_args)


def watch(args: argparse.Namespace) -> None:
    from controller import dispatch

    lab = load_lab(args)
    ifaces = [dict(i) for i in lab.target(args.target).get("serial", [])]
    if not ifaces:
        raise NotConfigured(f"target {args.target!r} has no serial interface",
                            hint=f"add one with `panio serial add console -t {args.target} --device PATH`")
    with overrides.acting(args, args.target, "serial watch") as override:
        r = dispatch.call(lab, args.target, "serial.watch", {"target": args.target, "interfaces": ifaces})
    if args.json:
        print_json({**r, "override": override})
        return
    how = "already running" if r["already_running"] else "started"
    say(f"serial capture of {args.target} {how}: pid {r['pid']}, epoch {r['epoch']}, interfaces "
        f"{', '.join(r['interfaces'])}{overrides.said(override)}. Read with `panio serial log {args.target}`.")


def stop(args: argparse.Namespace) -> None:
    with overrides.acting(args, args.target, "serial stop") as override:
        r = _call(args, "serial.stop", {}, with_iface=False)
    if args.json:
        print_json({**r, "override": override})
    else:
        say(f"stopped serial capture of {args.target} (pid {r['pid']}, epoch {r['epoch']}); the log stays on disk"
            + overrides.said(override))


def log(args: argparse.Namespace) -> None:
    if args.last is not None and args.first is None:
        raise UsageError("--to needs --from")
    if args.first is not None and args.last is not None and args.first > args.last:
        raise UsageError(f"--from {args.first} is after --to {args.last}")
    r = _call(args, "serial.log", {"tail": args.tail, "since": args.since, "first": args.first, "last": args.last,
                                   "raw": args.raw})
    if r["last_seq"] is None and not r["lines"] and not r["running"]:
        raise NotRunning(f"nothing captured yet for {args.target!r}", hint=f"run `panio serial watch {args.target}`",
                         target=args.target)
    if args.json:
        print_json(r)
        return
    from bench_agent.serial.lines import format_entry

    if r.get("evicted_before") is not None:
        say(f"-- lines before #{r['evicted_before']} were evicted from the log (its size limit) --")
    sys.stdout.write("".join(format_entry(entry) + "\n" for entry in r["lines"]))
    if r.get("more_after") is not None:
        say(f"-- more lines follow: panio serial log {args.target} --since {r['more_after']} --")


def send(args: argparse.Namespace) -> None:
    r = _call(args, "serial.send", {"text": args.text, "newline": not args.no_newline, "pace_ms": args.pace_ms})
    if args.json:
        print_json(r)
    else:
        say(f"sent {r['sent_bytes']} bytes to {args.target}/{r['interface']}; "
            f"read the reply with `panio serial log {args.target} --tail 20`")


def _check_regex(pattern: str | None) -> None:
    from bench_agent.serial.matcher import compile_pattern

    compile_pattern(pattern)


def transact(args: argparse.Namespace) -> None:
    _check_regex(args.until)
    r = _call(args, "serial.transact", {"text": args.text, "until": args.until, "timeout_ms": args.timeout_ms,
                                        "max_bytes": args.max_bytes, "newline": not args.no_newline,
                                        "pace_ms": args.pace_ms})
    if args.json:
        print_json(r)
    else:
        sys.stdout.write(r["text"] + ("" if r["text"].endswith("\n") else "\n"))
    _raise_unless_matched(r, args.until, args)


def _since_time_ns(args: argparse.Namespace) -> int | None:
    """The moment a wait starts from, or None for an explicit --epoch/--since."""
    import os

    from bench_agent.jobs.steps import JOB_STARTED_ENV, PREVIOUS_STEP_ENV

    moment = args.since_step or args.since_job or args.since_time is not None
    if moment and (args.epoch is not None or args.since is not None):
        raise UsageError("give either --epoch/--since or a moment (--since-step, --since-job, --since-time), not both")
    if not moment:
        if args.epoch is None or args.since is None:
            raise UsageError("serial wait needs where to start: --epoch E --since CURSOR (from `panio serial status`), "
                             "or --since-step / --since-job in a job step, or --since-time T")
        return None
    if args.since_time is not None:
        return int(args.since_time * 1e9)
    env = PREVIOUS_STEP_ENV if args.since_step else JOB_STARTED_ENV
    value = os.environ.get(env)
    if not value:
        flag = "--since-step" if args.since_step else "--since-job"
        raise UsageError(f"{flag} works inside a job step only (the job runner says when the step began)",
                         hint="outside a job use --since-time T or --epoch/--since")
    return int(float(value) * 1e9)


def wait(args: argparse.Namespace) -> None:
    _check_regex(args.pattern)
    since_ns = _since_time_ns(args)
    extra = {} if since_ns is None else {"since_time_ns": since_ns}
    r = _call(args, "serial.wait", {**extra, "epoch": args.epoch, "since": args.since, "pattern": args.pattern,
                                    "timeout_ms": args.timeout_ms, "max_bytes": args.max_bytes,
                                    "max_output_bytes": args.max_output_bytes,
                                    "include_pending": args.include_pending, "follow": args.follow})
    print_json(r)
    _raise_unless_matched(r, args.pattern, args)


def _raise_unless_matched(r: dict[str, Any], pattern: str | None, args: argparse.Namespace) -> None:
    target = args.target
    status, details = r["status"], {"status": r["status"], "cursor": r["cursor"], "epoch": r["epoch"]}
    if status == "disconnect":
        raise Unreachable(f"the serial device of {target!r} went away during the wait", **details)
    if status == "fault":
        raise DeviceError(f"serial wait on {target!r} failed: {r.get('fault')}", **details)
    if pattern is not None and status in ("timeout", "cap"):
        why = "time ran out" if status == "timeout" else f"{r['bytes']} bytes arrived"
        raise Timeout(f"{pattern!r} did not match before {why}",
                      hint=f"the bytes so far are on stdout; keep waiting from there with `{_wait_from(r, args)}`",
                      **details)


def _wait_from(r: dict[str, Any], args: argparse.Namespace) -> str:
    """The `serial wait` that continues where this wait or transact stopped (transact takes no --epoch/--since).
    The pattern is left as a placeholder: a hint never repeats unchecked input in a command meant to be pasted."""
    iface = f" -i {args.interface}" if args.interface else ""  # checked against the lab by now
    return f"panio serial wait {args.target}{iface} --epoch {r['epoch']} --since {r['cursor']} --pattern REGEX"


def evidence(args: argparse.Namespace) -> None:
    if args.since is not None and args.epoch is None:
        raise UsageError("--since needs --epoch (the capture epoch the cursor came from)")
    print_json(_call(args, "serial.evidence", {"epoch": args.epoch, "since": args.since, "max_bytes": args.max_bytes}))


def status(args: argparse.Namespace) -> None:
    r = _call(args, "serial.status", {})
    print_json(r)
    if r["process"]["state"] == "not_running":  # the JSON above still says what the log holds
        from bench_agent.serial.control import not_running

        raise not_running(args.target)


def connect(args: argparse.Namespace) -> None:
    _call(args, "serial.connect", {})


def reset(args: argparse.Namespace) -> None:
    _pulse_out(args, _call(args, "serial.reset", {}))


def dtr(args: argparse.Namespace) -> None:
    _pulse_out(args, _call(args, "serial.dtr", {"ms": args.ms}))


def _pulse_out(args: argparse.Namespace, r: dict[str, Any]) -> None:
    if args.json:
        print_json(r)
    else:
        say(f"held DTR (the power button) of {args.target}/{r['interface']} for {r['pulse_ms']} ms")

