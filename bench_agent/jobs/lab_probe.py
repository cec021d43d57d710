"""Before a failed step is blamed on the board, ask the lab: is the target powered, is its serial capture
running and its port open, does its host answer?

A plug switched off mid-job makes the next console step time out; without
this the job would end ``complete, failed`` and a suite would say "the board
failed". Each question is a read-only operation asked through the step's own
road, in this process, bounded by ``PROBE_TIMEOUT_S``: a question still open
then (a ``state_cmd`` hook that hangs) is stopped with every process it started,
and is itself the lab's fault, with the reason. A question the lab cannot
answer otherwise is no fault. A target the job itself switched off (its last
power step was ``power off``) is expected to be off.

Asking after the failure misses a plug switched off and on again while the step
ran (the board rebooted too late for the step's wait). So while a step runs,
``PowerWatch`` reads the target's power every ``POWER_POLL_S`` on a road of its
own (a target with a ``state_cmd`` or a power-sense line only; not during a
power step, nor after the job switched it off) and remembers the first "off"
it saw, or that the step read itself (``noting``): a step that failed with power
seen off during it is the lab's too.
Its thread starts only when the step is still running at the first read
(``POWER_POLL_S`` in; one starter thread per process waits for that): most steps
end sooner, and a thread started per step costs a hand-off of the interpreter
lock on a busy worker.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Any, Callable

from bench_agent.errors import NotRunning, PanioError
from bench_agent.jobs.steps import kind, reads_console, switches_power

PROBE_TIMEOUT_S = 20.0  # each question's bound; $PANIO_PROBE_TIMEOUT_S changes it (docs/jobs.md)
POWER_POLL_S = 2.0  # how often a running step's target power is read (a state_cmd is a process: not too often)
Call = Callable[[str, dict], Any]


class _Stopped(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _ask(ask: Callable[[], Any], what: str) -> Any:
    """``ask()`` bounded in time, the processes it starts stopped with it; ``_Stopped`` when it ran out."""
    from bench_agent.jobs.steps import execute

    class _Keep:
        def error(self, err: PanioError) -> None:
            self.err = err

    box: dict[str, Any] = {}
    keep = _Keep()

    def body() -> None:
        box["value"] = ask()

    bound_s = probe_timeout_s()
    code, why = execute(body, keep, bound_s, lambda: None)
    if why is not None:
        raise _Stopped(f"{what} did not answer within {bound_s:g} s (stopped, with what it started)")
    if code != 0:
        raise keep.err
    return box["value"]


def probe_timeout_s() -> float:
    import os

    try:
        return max(0.1, float(os.environ.get("PANIO_PROBE_TIMEOUT_S", PROBE_TIMEOUT_S)))
    except ValueError:
        return PROBE_TIMEOUT_S


def expects_off(steps: list[dict], upto: int) -> bool:
    """Did the job's own last power step before ``upto`` switch the target off?"""
    switched = [verb for verb in map(switches_power, steps[:upto]) if verb is not None]
    return bool(switched) and switched[-1] == "off"


def faults(call: Call, target: str, target_config: dict, used_serial: bool, expect_off: bool,
           seen_off: str | None = None, since: float | None = None, boots_expected: int = 0) -> list[dict]:
    """The lab's faults right now, each ``{"what", "message", "error", "exit"}``; empty when the lab looks fine.
    ``seen_off``: how a ``PowerWatch`` saw the target off during the step (``PowerWatch.stop``); ``since``: when
    the job began (epoch seconds): a boot its serial log shows since then that the board did not announce, beyond
    ``boots_expected`` (its power and reset steps' own), is a power event the reads missed."""
    out = []
    try:
        _ask(lambda: call("system.ping", {"payload": 1}), "the target's host")
    except (PanioError, _Stopped) as err:
        return [{"what": "host", "message": f"the target's host does not answer: {_why(err)}",
                 "error": "unreachable", "exit": 4}]
    sense = _sense(target_config)
    if target_config.get("power") or sense:
        out += _power(call, target, target_config.get("power"), sense, expect_off)
    if seen_off and not any(f["what"] == "power" for f in out):
        out.append({"what": "power", "message": f"the target was powered off during the step ({seen_off}); it "
                    "reads on now", "error": "unreachable", "exit": 4})
    if used_serial and since is not None and not any(f["what"] == "power" for f in out):
        out += _rebooted(call, target, target_config, since, boots_expected)
    if used_serial:
        for iface in target_config.get("serial", []):
            out += _capture(call, target, dict(iface))
    return out


BOOT_RESETS = ("serial.reset",)  # steps that restart the board without switching its power


def boots_expected(steps: list[dict], idx: int) -> int:
    """Boots the console may show from the job's start to the end of step ``idx``: one for each step up to it that
    switches the power on, cycles it or resets the board (a boot goes on printing through later steps)."""
    return sum(switches_power(s) in ("on", "cycle") or kind(s) in BOOT_RESETS for s in steps[:idx + 1])


def _rebooted(call: Call, target: str, target_config: dict, since: float, expected: int) -> list[dict]:
    """A boot in the console's lines since ``since`` (the job's start) that nobody asked for and the board did not
    announce: a second boot banner where the job asked for one."""
    from datetime import datetime

    from bench_agent.triage import reboots

    for iface in target_config.get("serial", []):
        try:
            r = _ask(lambda i=iface: call("serial.log", {"target": target, "iface": dict(i), "tail": 2000}),
                     "the target's serial log")
        except (PanioError, _Stopped):
            continue  # the capture's own question says why
        lines = [x["text"] for x in r.get("lines", [])
                 if "text" in x and datetime.fromisoformat(x["time"]).timestamp() >= since]
        boot = reboots.unasked(lines, expected)
        if boot:
            return [{"what": "power", "message": f"the board booted again during the step ({boot['text'][:120]!r} "
                     f"on {iface['name']}) though no step asked and it announced no reboot: a power event the "
                     "power reads missed", "error": "unreachable", "exit": 4}]
    return []


def check_blockers(call: Call, target: str, target_config: dict, steps: list[dict]) -> list[dict]:
    """The lab faults a health check of ``steps`` would only stumble on now, so it must not run (never burn a
    check on the lab): the host silent; the power off, unless the check switches it on; the capture stopped,
    when the check reads the console and does not start the capture itself."""
    starts_capture = any(kind(step) == "serial.watch" for step in steps)
    switches_on = any(switches_power(step) in ("on", "cycle") for step in steps)
    console = any(map(reads_console, steps)) and not starts_capture
    return faults(call, target, target_config, console, expect_off=switches_on)


def _sense(target_config: dict) -> dict | None:
    return next((i for i in target_config.get("serial", []) if i.get("power_sense_signal")), None)


class PowerWatch:
    """The target's power, read every ``POWER_POLL_S`` while one step runs; ``stop()`` says whether it was seen off.

    ``road()`` makes the ``call`` it reads through, on first use, in its own thread (a road of its own: an SSH
    link carries one request at a time, and the step's may be a long wait). A read that fails is no finding:
    the probe after a failure asks again and says why."""

    def __init__(self, road: Callable[[], Call], target: str, power: dict | None, sense: dict | None) -> None:
        self.road, self.target, self.power, self.sense = road, target, power, sense
        self.seen_off: str | None = None
        self._began = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="panio-power-watch", daemon=True)

    @classmethod
    def start(cls, road: Callable[[], Call], payload: dict, idx: int) -> PowerWatch | None:
        """A running watch for step ``idx``, or None where there is nothing to read or an "off" says nothing."""
        config, steps = payload.get("target_config") or {}, payload["steps"]
        power, sense = config.get("power"), _sense(config)
        if not ((power or {}).get("state_cmd") or sense):
            return None
        if switches_power(steps[idx]) or expects_off(steps, idx):
            return None  # the step switches power itself, or the job switched the target off
        watch = cls(road, payload["target"], power, sense)
        _STARTER.add(watch, watch._began + POWER_POLL_S)  # its thread starts at its first read, if the step runs on
        return watch

    def _run(self) -> None:
        from bench_agent.commands.power import default_state

        call = None
        while not self._stop.is_set():  # started POWER_POLL_S after the step began: the first read is due now
            try:
                call = call or self.road()
                state = _ask(lambda: default_state(call, self.target, self.power, self.sense), "the power watch")
            except (PanioError, _Stopped):
                state = None
            if state is not None and state["state"] == "off" and not self._stop.is_set():
                self._saw_off(f"{state.get('source') or 'state_cmd'}, seen "
                              f"{round(time.monotonic() - self._began, 1):g} s into it")
                return
            self._stop.wait(POWER_POLL_S)

    def noting(self, call: Call) -> Call:
        """``call``, through which each default-level ``power.state`` the step reads itself is noted: a step that
        read the target's power off saw the lab's fault then, even when the power is back on by the time the
        lab is asked (a plug switched on again just after a health check's `panio power-state` read it off)."""
        def noted(op: str, args: dict) -> Any:
            result = call(op, args)
            if op == "power.state" and args.get("level") is None and result.get("state") == "off":
                self._saw_off("the step read it off itself")
            return result

        return noted

    def _saw_off(self, how: str) -> None:
        if self.seen_off is None:  # the first "off" is the one the reason names
            self.seen_off = how

    def stop(self) -> str | None:
        """Stop watching (a read under way finishes on its own); None, or how it was seen off, in the words of
        the step's reason ("state_cmd, seen 2.1 s into it", "the step read it off itself")."""
        self._stop.set()
        return self.seen_off


class _Starter:
    """One thread per process that starts each ``PowerWatch``'s thread when its first read is due, unless its
    step ended before (then no thread is ever started for it)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, PowerWatch]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, watch: PowerWatch, at: float) -> None:
        with self._cond:
            heapq.heappush(self._due, (at, next(self._order), watch))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="panio-power-watch-starter", daemon=True)
                self._thread.start()
            elif self._due[0][2] is watch:  # the earliest now: the starter waits for it, not a later one
                self._cond.notify()

    def _next(self) -> PowerWatch:
        with self._cond:
            while True:
                while self._due and self._due[0][2]._stop.is_set():
                    heapq.heappop(self._due)  # its step ended first
                left = self._due[0][0] - time.monotonic() if self._due else None
                if left is not None and left <= 0:
                    return heapq.heappop(self._due)[2]
                self._cond.wait(left)

    def _loop(self) -> None:
        while True:
            watch = self._next()
            if not watch._stop.is_set():
                watch._thread.start()


_STARTER = _Starter()


def _why(err: Exception) -> str:
    return err.message if isinstance(err, PanioError) else str(err)


def _power(call: Call, target: str, power: dict | None, sense: dict | None, expect_off: bool) -> list[dict]:
    from bench_agent.commands.power import states

    try:
        state = _ask(lambda: states(call, target, power, sense)[0], "the target's state_cmd")
    except _Stopped as err:
        return [{"what": "power", "message": f"the target's power state cannot be read: {err.why}",
                 "error": "timeout", "exit": 22}]
    except PanioError as err:
        return [{"what": "power", "message": f"the target's power state cannot be read: {err.message}",
                 "error": err.code, "exit": err.exit_status if err.lab_fault else 4}]
    if state["state"] == "off" and not expect_off:
        return [{"what": "power", "message": f"the target is powered off ({state.get('source') or 'state_cmd'})",
                 "error": "unreachable", "exit": 4}]
    return []


def _capture(call: Call, target: str, iface: dict) -> list[dict]:
    name = iface["name"]
    try:
        r = _ask(lambda: call("serial.status", {"target": target, "iface": iface}), "serial status")
    except (PanioError, _Stopped):
        return []
    if r["process"]["state"] == "not_running":
        return [{"what": "capture", "message": f"no serial capture runs for {target}/{name} "
                 f"(start it: `panio serial watch {target}`)", "error": NotRunning.code, "exit": NotRunning.exit_status}]
    port = r.get("port") or {}
    if port.get("state") == "disconnected":
        return [{"what": "capture", "message": f"the serial port of {target}/{name} is disconnected "
                 f"({port.get('last_error')})", "error": "unreachable", "exit": 4}]
    return []
