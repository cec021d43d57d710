"""Serial operations: capture (watch/stop), reading the log from disk, and input through the supervisor.

Every operation takes the target's name and the interface's configuration
(``iface``: the lab's [[serial]] table, plain data) and the request's own
arguments. Reads (log, evidence, status) work from disk whether or not the
supervisor runs; input (send, transact, wait, reset, dtr) needs it.
"""

from __future__ import annotations

import time

from bench_agent.errors import Busy, NotRunning, PanioError, Refused, UsageError
from bench_agent.ops import operation
from bench_agent.ops.spec import Param, ms_deadline

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    from typing import Any

LINE_ENDINGS = {"cr": "\r", "lf": "\n", "crlf": "\r\n", "none": ""}
RESET_MS = 200
HARD_MIN_MS = 3000
DEFAULT_TAIL = 200
SEQ_MAX = 1 << 62

# The parameters several operations share (bounds from the MCP seed page, docs/mcp.md).
TIMEOUT_MS = Param("timeout_ms", int, "give up after this many ms", default=30000, unit="ms", minimum=0,
                   maximum=3_600_000)
MAX_BYTES = Param("max_bytes", int, "examine at most this many received bytes", default=65536, unit="bytes",
                  minimum=1, maximum=1_048_576)
MAX_OUTPUT = Param("max_output_bytes", int, "cap on the JSON returned", default=1 << 20, unit="bytes",
                   minimum=4096, maximum=8_388_608)
PACE_MS = Param("pace_ms", int, "pause this many ms after each byte, for a polled UART without flow control",
                default=0, unit="ms", minimum=0, maximum=10_000)
NEWLINE = Param("newline", bool, "append the interface's line ending (CR by default); false sends a bare key",
                default=True)
TEXT = Param("text", str, "what to type (passed as one argument, never through a shell)")
EPOCH = Param("epoch", int, "capture epoch the cursor belongs to", minimum=0, maximum=SEQ_MAX)
CURSOR = Param("since", int, "byte cursor to read from", minimum=0, maximum=SEQ_MAX)


def _seq(name: str, help: str) -> Param:
    return Param(name, int, help, default=None, minimum=0, maximum=SEQ_MAX)


def _pacing_s(args: dict[str, Any]) -> float:
    """Time the paced bytes take: the text plus its line ending (at most 2 bytes)."""
    return (len(str(args.get("text", "")).encode()) + 2) * (args.get("pace_ms") or 0) / 1000


def _transact_deadline(args: dict[str, Any]) -> float:
    return args["timeout_ms"] / 1000 + _pacing_s(args)


def _client():
    from bench_agent.serial import client

    return client


def _running(target: str) -> dict[str, Any] | None:
    """The running supervisor's discovery record, or None (without importing the daemon's client)."""
    from bench_agent.serial import files

    return files.discovery(target)


def _log_path(target: str, iface: dict[str, Any]):
    from bench_agent.serial import files

    return files.log_path(target, iface["name"])


def _ask(target: str, req: dict[str, Any], wait_ms: int = 0) -> Any:
    # No look at the discovery file first: with no supervisor there is no socket to connect to, and the
    # connection's refusal is the same `not_running` (control.ControlClient). The look was a file read, a JSON
    # parse and a /proc read on every send, transact and wait.
    return _client().request(target, req, timeout_s=wait_ms / 1000 + 15)


@operation("serial.watch", side_effect=True, unknown_on_failure=False,
           params=(Param("interfaces", list, "the target's serial interfaces (the lab's [[serial]] tables)"),))
def watch(target: str, interfaces: list[dict[str, Any]]) -> dict[str, Any]:
    client = _client()
    info = client.discovery(target)
    if info is not None:
        return {"target": target, "pid": info["pid"], "epoch": info["epoch"], "already_running": True,
                "interfaces": [i["name"] for i in info["interfaces"]]}
    try:
        reply = client.start(target, interfaces)
    except Busy as err:  # another watch started at the same instant won the lock: once it is ready, it is ours too
        if "holders" in err.details:  # the device itself is held (by another lab's or state directory's capture)
            raise
        info = _await_discovery(target)
        if info is None:
            raise
        return {"target": target, "pid": info["pid"], "epoch": info["epoch"], "already_running": True,
                "interfaces": [i["name"] for i in info["interfaces"]]}
    return {"target": target, "pid": reply["pid"], "epoch": reply["epoch"], "already_running": False,
            "interfaces": [i["name"] for i in interfaces]}


def _await_discovery(target: str, timeout_s: float = 15.0) -> dict[str, Any] | None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = _running(target)
        if info is not None:
            return info
        time.sleep(0.05)
    return None


@operation("serial.stop", side_effect=True, unknown_on_failure=False,
           params=(Param("force", bool, "SIGKILL a supervisor that does not stop", default=False),))
def stop(target: str, force: bool = False) -> dict[str, Any]:
    client = _client()
    legacy = _legacy_capture(target)
    if legacy is None:
        return client.stop(target, force=force)
    from bench_agent.paths import legacy_state_dir

    out = client.stop(target, force=force, state=legacy_state_dir())
    return {**out, "legacy": True,
            "note": f"stopped {target}'s capture started before panio kept captures per lab; its logs stay in "
                    f"{legacy_state_dir() / 'serial' / target}: `panio serial watch {target}` starts this lab's own"}


def _legacy_capture(target: str) -> dict[str, Any] | None:
    """A capture of ``target`` started before state was kept per lab (in the bare state directory), when the
    current lab has none of its own: the one ``serial stop`` stops (``panio daemons`` lists it too)."""
    from bench_agent.paths import current_lab, legacy_state_dir
    from bench_agent.serial import files

    if current_lab() is None or files.discovery(target) is not None:
        return None
    return files.discovery(target, legacy_state_dir())


@operation("serial.log", params=(
    Param("tail", int, "the last N lines", default=None, minimum=0, maximum=5000),
    _seq("since", "lines after sequence number SEQ (the poll loop)"),
    Param("first", int, "first sequence number of a range (with last)", default=None, minimum=0, maximum=SEQ_MAX,
          flag="--from"),
    Param("last", int, "last sequence number of a range (inclusive)", default=None, minimum=0, maximum=SEQ_MAX,
          flag="--to"),
    Param("raw", bool, "keep ANSI escape sequences and control bytes", default=False)),
    needs={"last": "first"}, exclusive=("tail", "since", "first"))
def log(target: str, iface: dict[str, Any], tail: int | None = None, since: int | None = None,
        first: int | None = None, last: int | None = None, raw: bool = False) -> dict[str, Any]:
    from bench_agent.serial.lines import render
    from bench_agent.serial.query import line_window

    if first is not None and last is not None and first > last:
        raise UsageError(f"--from {first} is after --to {last}")
    if tail is None and since is None and first is None and last is None:
        tail = DEFAULT_TAIL
    from bench_agent.serial.files import log_name

    items, info = line_window(log_name(target, iface["name"]), tail=tail, since=since, first=first, last=last)
    lines = []
    for item in items:
        when = _iso(item["time_ns"])
        if "gap" in item:
            lines.append({"gap": item["gap"], "time": when, "epoch": item["epoch"], "next_seq": item["next_seq"]})
        else:
            lines.append({"seq": item["seq"], "time": when, "epoch": item["epoch"],
                          "text": render(item["data"], raw), "complete": item["complete"]})
    return {"target": target, "interface": iface["name"], "lines": lines, **info,
            "running": _running(target) is not None}


@operation("serial.send", side_effect=True, deadline=_pacing_s, params=(TEXT, NEWLINE, PACE_MS))
def send(target: str, iface: dict[str, Any], text: str, newline: bool = True, pace_ms: int = 0) -> dict[str, Any]:
    data = _with_ending(iface, text, newline)
    return _ask(target, {"op": "send", "iface": iface["name"], "data_b64": _b64(data), "pace_ms": pace_ms},
                wait_ms=pace_ms * len(data))


@operation("serial.transact", side_effect=True, deadline=_transact_deadline, params=(
    TEXT, Param("until", str, "stop when the reply matches this regex (Python syntax)"),
    Param("timeout_ms", int, TIMEOUT_MS.help, default=30000, unit="ms", minimum=1, maximum=3_600_000),
    MAX_BYTES, NEWLINE, PACE_MS, MAX_OUTPUT))
def transact(target: str, iface: dict[str, Any], text: str, until: str, timeout_ms: int = 30000,
             max_bytes: int = 65536, newline: bool = True, pace_ms: int = 0,
             max_output_bytes: int = 1 << 20) -> dict[str, Any]:
    from bench_agent.serial.matcher import compile_pattern

    compile_pattern(until)
    data = _with_ending(iface, text, newline)
    return _ask(target, {"op": "transact", "iface": iface["name"], "data_b64": _b64(data), "until": until,
                         "timeout_ms": timeout_ms, "max_bytes": max_bytes, "pace_ms": pace_ms,
                         "max_output_bytes": max_output_bytes}, wait_ms=timeout_ms + pace_ms * len(data))


@operation("serial.wait", deadline=ms_deadline("timeout_ms"), params=(
    Param("epoch", int, "capture epoch the cursor belongs to (with since)", default=None, minimum=0, maximum=SEQ_MAX),
    Param("since", int, "byte cursor to read from (with epoch)", default=None, minimum=0, maximum=SEQ_MAX),
    Param("since_time_ns", int, "or: the bytes received since this moment (ns since 1970)", default=None, minimum=0,
          maximum=SEQ_MAX),
    Param("since_now", bool, "or: the bytes received from now on (the host's clock)", default=False),
    Param("pattern", str, "stop when this regex (Python syntax) matches", default=None),
    TIMEOUT_MS, MAX_BYTES, MAX_OUTPUT,
    Param("include_pending", bool, "also return bytes received after the match (not consumed)", default=False),
    Param("follow", bool, "keep matching until the bound and return every match", default=False)))
def wait(target: str, iface: dict[str, Any], epoch: int | None = None, since: int | None = None,
         pattern: str | None = None, timeout_ms: int = 30000, max_bytes: int = 65536,
         max_output_bytes: int = 1 << 20, include_pending: bool = False, follow: bool = False,
         since_time_ns: int | None = None, since_now: bool = False) -> dict[str, Any]:
    """Wait from a cursor (``epoch``/``since``) or from a moment (``since_time_ns``, or ``since_now``)."""
    from bench_agent.serial.matcher import compile_pattern

    compile_pattern(pattern)
    if since_now:  # the host's own clock: a controller's clock may be off from it
        since_time_ns = time.time_ns()
    if since_time_ns is not None:
        epoch, since = _cursor_at(target, iface, since_time_ns)
    if epoch is None or since is None:
        raise UsageError("serial wait needs --epoch and --since, or a moment to start from (--since-now)")
    return _ask(target, {"op": "wait", "iface": iface["name"], "epoch": epoch, "since": since, "pattern": pattern,
                         "timeout_ms": timeout_ms, "max_bytes": max_bytes, "max_output_bytes": max_output_bytes,
                         "include_pending": include_pending, "follow": follow}, wait_ms=timeout_ms)


def _cursor_at(target: str, iface: dict[str, Any], time_ns: int) -> tuple[int, int]:
    """(epoch, cursor) of the running capture's first byte received at or after ``time_ns``."""
    from bench_agent.serial.query import cursor_at

    info = _running(target)
    if info is None:
        from bench_agent.serial.control import not_running

        raise not_running(target)
    return info["epoch"], cursor_at(_log_path(target, iface), info["epoch"], int(time_ns))


@operation("serial.evidence", params=(
    Param("epoch", int, "capture epoch of since", default=None, minimum=0, maximum=SEQ_MAX),
    _seq("since", "records from this byte cursor (needs epoch)"), MAX_BYTES), needs={"since": "epoch"})
def evidence(target: str, iface: dict[str, Any], epoch: int | None = None, since: int | None = None,
             max_bytes: int = 65536) -> dict[str, Any]:
    from bench_agent.serial.evidence import collect

    return collect(target, iface, _log_path(target, iface), epoch, since, max_bytes, _running(target))


@operation("serial.status")  # reads only: allowed while another holder leases the target
def status(target: str, iface: dict[str, Any]) -> dict[str, Any]:
    from bench_agent.serial.evidence import status as build

    info = _running(target)
    live = None
    if info is not None:
        try:
            live = _client().request(target, {"op": "status"}, timeout_s=5)
        except PanioError:
            live = None
    return build(target, iface, _log_path(target, iface), info, live)


@operation("serial.sense")
def sense(target: str, iface: dict[str, Any]) -> dict[str, Any]:
    from bench_agent.serial import device

    name = iface.get("power_sense_signal")
    if not name:
        from bench_agent.errors import NotConfigured

        raise NotConfigured(f"serial interface {iface['name']!r} of {target!r} has no power_sense_signal",
                            hint=f"set one with `panio serial set {iface['name']} -t {target} --sense CTS`")
    if _running(target) is not None:
        return _ask(target, {"op": "sense", "iface": iface["name"], "signal": name})
    port = device.open_port(iface)
    try:
        return {"signal": name, "asserted": device.read_signal(port, name)}
    finally:
        port.close()


@operation("serial.reset", side_effect=True, deadline=lambda args: RESET_MS / 1000)
def reset(target: str, iface: dict[str, Any]) -> dict[str, Any]:
    return _pulse(target, iface, RESET_MS, "reset")


@operation("serial.dtr", side_effect=True, deadline=ms_deadline("ms"),
           params=(Param("ms", int, "how long to hold the button", unit="ms", minimum=1, maximum=60_000),))
def dtr(target: str, iface: dict[str, Any], ms: int) -> dict[str, Any]:
    if ms < HARD_MIN_MS:
        raise UsageError(f"serial dtr holds the button for a hard power-off: --ms must be at least {HARD_MIN_MS} "
                         f"(use `panio serial reset {target}` for a short pulse)")
    return _pulse(target, iface, ms, "dtr")


def _pulse(target: str, iface: dict[str, Any], ms: int, verb: str) -> dict[str, Any]:
    if not iface.get("power_button"):
        raise Refused(f"serial interface {iface['name']!r} of {target!r} is not wired to a power button, "
                      f"so serial {verb} is refused",
                      hint=f"to reboot from the console use `panio serial send {target} reboot`; if DTR really drives "
                           f"the button: `panio serial set {iface['name']} -t {target} --power-button`",
                      target=target, interface=iface["name"])
    try:
        return {**_ask(target, {"op": "dtr", "iface": iface["name"], "ms": ms}, wait_ms=ms), "target": target}
    except NotRunning:
        from bench_agent.serial import device

        port = device.open_port(iface)
        try:
            device.pulse_dtr(port, ms)
        finally:
            port.close()
        return {"interface": iface["name"], "pulse_ms": ms, "target": target}


@operation("serial.connect", side_effect=True, interactive=True)
def connect(target: str, iface: dict[str, Any]) -> dict[str, Any]:
    from bench_agent.serial.terminal import run

    return run(target, iface)


def _with_ending(iface: dict[str, Any], text: str, newline: bool) -> bytes:
    return (text + (LINE_ENDINGS[iface.get("line_ending") or "cr"] if newline else "")).encode()


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def _iso(ns: int) -> str:
    """UTC ISO 8601 to the millisecond, as ``datetime.isoformat(timespec="milliseconds")`` writes it (without
    importing datetime, which `serial log` would otherwise load for this alone)."""
    s, ms = divmod(ns // 1_000_000, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{ms:03d}+00:00"

