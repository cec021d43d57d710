"""A finished panio command as a tool result: the text, and whether it is an error.

Success: what the command printed on stdout (its --json output for the JSON
tools). Failure (``isError``): the exit code and error name, the message, the
one-line JSON error object (the error the command raised, as its JSON line on
stderr says it, docs/exit-status.md), then anything it printed on stdout before
failing (serial_wait returns the bytes it accepted even on a timeout).

Whether a failure leaves the target's state unknown is not decided here: the
dispatcher decides it once, from the operation's spec, and marks the error
(``"outcome": "unknown"``, ``bench_agent.errors.mark_outcome_unknown``); a tool
that changes the target says so when its error is marked, or when the server
stopped it at its deadline (a stop half-way through a change).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from bench_agent.errors import Timeout
from controller.mcp.runner import Finished

UNKNOWN_OUTCOME = ("The outcome is unknown: the action may have happened. Check the target's state "
                   "(power_state, serial_log) before repeating it.")


SHOWN_ARG_CHARS = 120  # a 64 KiB serial_send text is not echoed back into results and logs


def command_line(argv: list[str]) -> str:
    return shlex.join(["panio", *(_shown(a) for a in argv)])


def _shown(arg: str) -> str:
    if len(arg) <= SHOWN_ARG_CHARS:
        return arg
    return f"{arg[:SHOWN_ARG_CHARS - 30]}...({len(arg)} characters)"


def render(done: Finished, changes_target: bool) -> tuple[str, bool]:
    """(text, is_error) for a finished command."""
    if done.code == 0:
        return _success(done), False
    error = _deadline_error(done, changes_target) if done.timed_out else done.error or _error_object(done)
    lines = [f"`{command_line(done.argv)}` failed: exit code {error['exit']} ({error['error']})",
             f"error: {error['message']}" + (f" ({error['hint']})" if error.get("hint") else ""),
             json.dumps(error)]
    if changes_target and error.get("outcome") == "unknown":  # marked once, by the dispatcher (see above)
        lines.append(UNKNOWN_OUTCOME)
    if done.out.strip():
        lines += ["output before the failure:", done.out.rstrip("\n")]
    if done.truncated:
        lines.append("(output truncated)")
    return "\n".join(lines), True


def _success(done: Finished) -> str:
    text = done.out.rstrip("\n") or f"`{command_line(done.argv)}` done (no output)"
    notes = done.err.strip()
    if notes:
        text += "\n" + "\n".join(f"note: {line}" for line in notes.splitlines())
    if done.truncated:
        text += "\n(output truncated)"
    return text


def _error_object(done: Finished) -> dict[str, Any]:
    """For a command that raised no error (its exit status is its own, as ``ping``'s) or ran elsewhere (a
    ``panio`` child): its JSON error line; a stand-in built from the exit code if it printed none."""
    lines = done.err.strip().splitlines()
    if lines:
        try:
            obj = json.loads(lines[-1])
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "error" in obj and "message" in obj:
            obj.setdefault("exit", done.code)
            return obj
    message = lines[-1] if lines else "no error message"
    return {"error": "error" if done.code and done.code > 0 else "killed", "exit": done.code, "message": message}


def _deadline_error(done: Finished, changes_target: bool) -> dict[str, Any]:
    """The server stopped the call at its deadline: a change it was making may or may not have happened."""
    return Timeout(f"{command_line(done.argv)} did not finish within {done.deadline_s:g} s "
                   "(the tool's own bound plus a margin) and was stopped", deadline_s=done.deadline_s,
                   outcome="unknown" if changes_target else None).to_json()
