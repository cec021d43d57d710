"""A finished panio command as a tool result: the text, and whether it is an error.

Success: what the command printed on stdout (its --json output for the JSON
tools). Failure (``isError``): the exit code and error name, the message, the
one-line JSON error object (the last line of the command's stderr, as in
docs/exit-status.md), then anything it printed on stdout before failing
(serial_wait returns the bytes it accepted even on a timeout). A tool that
changes the target and fails as unreachable (4) or timeout (22), or is stopped
at its deadline, also says the outcome is unknown (unless the error says
``"outcome": "none"``: nothing was sent).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from bench_agent.errors import Timeout
from controller.mcp.runner import Finished

UNKNOWN_OUTCOME_EXITS = (4, 22)
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
    error = _deadline_error(done) if done.timed_out else _error_object(done)
    lines = [f"`{command_line(done.argv)}` failed: exit code {error['exit']} ({error['error']})",
             f"error: {error['message']}" + (f" ({error['hint']})" if error.get("hint") else ""),
             json.dumps(error)]
    if changes_target and (done.timed_out or (error["exit"] in UNKNOWN_OUTCOME_EXITS
                                              and error.get("outcome") != "none")):  # none: nothing was sent
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
    """The command's JSON error line; a stand-in built from the exit code if it printed none."""
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


def _deadline_error(done: Finished) -> dict[str, Any]:
    return Timeout(f"{command_line(done.argv)} did not finish within {done.deadline_s:g} s "
                   "(the tool's own bound plus a margin) and was stopped", deadline_s=done.deadline_s).to_json()
