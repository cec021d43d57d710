"""panio serial watch|log|send|transact|wait|evidence|status|connect|stop|reset|dtr: the console at run time.

Each command resolves the target's interface from the lab file and calls the
``serial.<verb>`` operation through ``controller.dispatch``; the operation runs
on the host that owns the port, where the capture supervisor lives.
"""

from __future__ import annotations

from bench_agent.errors import NotConfigured
from controller.cli.common import (Unbuilt, add_json, add_param, add_target_positional, command, load_lab,
                                   positive_float)
from controller.cli.runtime import Step, runtime, spec_args

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    import argparse  # only for the annotations: `main` runs `serial log` without it (commands.QUICK)
    from typing import Any

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


def _override_flags(c: argparse.ArgumentParser) -> None:
    if isinstance(c, Unbuilt):  # a read (`serial log`) does not import the override machinery (contextlib)
        return
    from controller.jobs import overrides

    overrides.add_flags(c)


def _register_capture(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "watch", "start capturing all of a target's serial interfaces to disk (a detached supervisor)",
                func=watch, example="panio serial watch pico",
                see_also=f"panio serial log, panio serial stop, panio daemons, {SEE}",
                details="One supervisor per target owns every interface and survives this command.\n"
                        "It holds the ports exclusively; read with `serial log`, type with `serial send`.\n"
                        "Running it again while capture runs is harmless.")
    add_target_positional(c)
    add_json(c)
    _override_flags(c)

    c = command(sub, "stop", "stop a target's capture supervisor and free its ports (the log stays on disk)",
                func=stop, example=["panio serial stop pico",
                                    "panio serial stop pico --override --reason 'capture wedged'"],
                see_also="panio serial log (works after stop), panio daemons, panio job status (overrides)",
                details="While a job leases the target this is refused (exit 8) unless --override with a\n"
                        "--reason: then the host stops it under whichever job leases the target when the\n"
                        "command arrives, and who, when and why go in that job's history\n"
                        "(`panio job status JOB`). The job's next console step fails.")
    add_target_positional(c)
    add_param(c, "serial.stop", "force")
    add_json(c)
    _override_flags(c)

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
    add_param(window, "serial.log", "first", metavar="A", help="first line of a range A..B, with --to")
    add_param(c, "serial.log", "last", metavar="B", help="last line of a --from range, inclusive")
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
    add_param(c, "serial.transact", "max_output_bytes", metavar="N")
    _input_opts(c, "serial.transact")
    add_json(c)

    c = command(sub, "wait", "wait for received bytes from a cursor or a moment, optionally until a regex matches (JSON)",
                func=wait, example=["panio serial wait pico --since-now --pattern 'login:' --timeout-ms 60000",
                                    "panio serial wait pico --epoch 3 --since 10240 --pattern 'login:'",
                                    "panio serial wait pico --since-step --pattern 'login:'   # a job step after power-cycle"],
                see_also=f"panio serial status (current epoch and cursor), panio serial evidence, docs/jobs.md, {SEE}",
                details="Where to start: --since-now (what arrives from now on), --epoch E --since CURSOR\n"
                        "(from `serial status`, or the cursor a previous wait returned), or a moment:\n"
                        "--since-step (in a job: from when the previous step began, so `power-cycle` then\n"
                        "`serial wait --since-step --pattern login:` sees the whole boot and no older prompt),\n"
                        "--since-job (from when the job began), --since-time T (epoch seconds).\n"
                        "Status is matched, timeout, cap, disconnect or fault; the accepted bytes and the\n"
                        "cursor to continue from come back whatever the status. Exit 0 when matched (or\n"
                        "no --pattern), 22 on timeout/cap, 4 on disconnect, 12 on fault, 10 no capture\n"
                        "(or the capture was stopped during the wait: capture_stopped is true).")
    add_target_positional(c)
    add_param(c, "serial.wait", "epoch", metavar="E")
    add_param(c, "serial.wait", "since", metavar="CURSOR")
    moment = c.add_mutually_exclusive_group()
    moment.add_argument("--since-step", action="store_true",
                        help="in a job step: the bytes received since the previous step began (or the job, for step 1)")
    moment.add_argument("--since-job", action="store_true", help="in a job step: the bytes received since the job began")
    moment.add_argument("--since-now", action="store_true",
                        help="the bytes received from now on (start it before what makes the board print)")
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
    add_param(c, "serial.evidence", "since", metavar="CURSOR", help="records from this byte cursor, with --epoch")
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


# -- plans (the bodies are in bench_agent.commands.serial) ------------------------------------------


def _plan(args: argparse.Namespace, lab: Any, command: str, opts: dict[str, Any], with_iface: bool = True,
          override: str | None = None) -> Step:
    opts = {"target": args.target, "json": getattr(args, "json", False), **opts}
    if with_iface:
        opts["iface"] = dict(lab.serial(args.target, args.interface))
        opts["interface"] = args.interface
    return Step(command, args.target, opts, override=override)


@runtime
def watch(args: argparse.Namespace, lab: Any) -> Step:
    ifaces = [dict(i) for i in lab.target(args.target).get("serial", [])]
    if not ifaces:
        raise NotConfigured(f"target {args.target!r} has no serial interface",
                            hint=f"add one with `panio serial add console -t {args.target} --device PATH`")
    return _plan(args, lab, "serial.watch", {"interfaces": ifaces}, with_iface=False, override="serial watch")


@runtime
def stop(args: argparse.Namespace, lab: Any) -> Step:
    lab.target(args.target)
    return _plan(args, lab, "serial.stop", spec_args(args, "serial.stop"), with_iface=False, override="serial stop")


@runtime
def log(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "serial.log", spec_args(args, "serial.log"))


@runtime
def send(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "serial.send", {**spec_args(args, "serial.send"), "newline": not args.no_newline})


@runtime
def transact(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "serial.transact", {**spec_args(args, "serial.transact"), "newline": not args.no_newline})


@runtime
def wait(args: argparse.Namespace, lab: Any) -> Step:
    moment = {"since_step": args.since_step, "since_job": args.since_job, "since_time": args.since_time}
    return _plan(args, lab, "serial.wait", {**moment, **spec_args(args, "serial.wait")})  # the body makes the ns


@runtime
def evidence(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "serial.evidence", spec_args(args, "serial.evidence"))


@runtime
def status(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "serial.status", {})


def connect(args: argparse.Namespace) -> None:
    from controller import dispatch

    lab = load_lab(args)
    dispatch.call(lab, args.target, "serial.connect",
                  {"target": args.target, "iface": dict(lab.serial(args.target, args.interface))})


@runtime
def reset(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "serial.reset", {})


@runtime
def dtr(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "serial.dtr", spec_args(args, "serial.dtr"))
