"""Bounded waits on an interface's received bytes, run inside the supervisor.

A wait reads from byte cursor ``since`` on (memory or disk), matches
``rx`` (a pattern as ``compile_pattern`` compiles it) as bytes arrive, and ends with a status:

    matched     the pattern matched (with follow: every match until the bound, see below)
    timeout     timeout_ms passed
    cap         max_bytes were examined without a match
    disconnect  the device went away, or the capture stopped (then ``capture_stopped`` is true)
    fault       the supervisor could not read its own data

A pattern that backtracks past ``patterns.MATCH_BUDGET_S`` ends the wait with
a usage error (``PatternTooSlow``); capture never stops for a matcher, which
runs without holding the GIL.

Whatever ended it, the bytes accepted so far come back with the ``cursor`` to
continue from, so nothing is lost by an incomplete wait. After a match the
cursor is just past the match; ``include_pending`` also returns the bytes
already received after it (not consumed). ``follow`` keeps matching until the
time or byte bound and returns every match together (status "matched" when
there was at least one, and "ended" says which bound stopped it).
"""

from __future__ import annotations

import binascii
import json
import socket
import threading
import time
from functools import lru_cache
TYPE_CHECKING = False  # a capture need not import typing (docs/scale.md: every supervisor pays for it)
if TYPE_CHECKING:
    from typing import Any

from bench_agent import patterns
from bench_agent.errors import UsageError
from bench_agent.jsonlines import dump_line

CHUNK = 1 << 20
FAST_BYTES = 16384  # the most received bytes a reader thread searches for a transact's answer (``Pending``)
FAST_BUDGET_S = 0.002  # a regular expression's budget there; past it the request's own thread searches


@lru_cache(maxsize=256)  # a transact's pattern comes with every request: checked once, not on every trip
def compile_pattern(pattern: str | None):
    """The pattern compiled for bytes (see ``bench_agent.patterns``: bounded, matched without the GIL).

    One that matches the empty string (``""``, ``.*``, ``x?``) is refused: it would match at once, before
    a byte arrives, and a wait or transact would return nothing the board said."""
    if pattern is None:
        return None
    rx = patterns.compile_bytes(pattern)
    if patterns.search(rx, b"") is not None:
        raise UsageError(f"the pattern {pattern!r} matches the empty string, so it would match at once, before "
                         "the board says anything", hint="match text the board prints, e.g. 'login: ' or '# $'",
                         pattern=pattern)
    return rx


def wait(channel, *, since: int, rx=None, timeout_ms: int = 30000, max_bytes: int = 65536,
         follow: bool = False, include_pending: bool = False, started: float | None = None) -> dict[str, Any]:
    """``started``: when the wait began (``time.monotonic()``), if before this call: its deadline counts from it."""
    if since > channel.cursor:
        raise UsageError(f"cursor {since} is past the end of interface {channel.name!r} ({channel.cursor})",
                         cursor=channel.cursor)
    started = time.monotonic() if started is None else started
    deadline = started + timeout_ms / 1000
    buf, pos, start, matches, search_from = bytearray(), since, None, [], 0
    status, fault = None, None
    while status is None:
        try:
            data, at = channel.read_from(pos, min(CHUNK, max_bytes - len(buf)))
        except OSError as exc:
            status, fault = "fault", f"cannot read the capture log: {exc}"
            break
        if data:
            if start is None:
                start = at
            buf += data
            pos = at + len(data)
            status, search_from = _search(rx, buf, start, search_from, matches, follow)
            if status is None and len(buf) >= max_bytes:
                status = "cap"
            continue
        status = _idle(channel, pos, deadline)
    first = start if start is not None else since
    consumed = matches[-1]["end"] - first if matches and not follow else len(buf)
    if status == "fault" and fault is None:
        fault = channel.last_error
    return _result(channel, since, first, buf, consumed, status, matches, started, follow, include_pending, fault)


def _result(channel, since: int, first: int, buf, consumed: int, status: str, matches: list, started: float,
            follow: bool = False, include_pending: bool = False, fault: str | None = None) -> dict[str, Any]:
    """A wait's reply: ``buf`` is what was read from cursor ``first`` on, ``consumed`` of it taken."""
    out = {"status": "matched" if matches else status, "ended": status} if follow else {"status": status}
    if fault:
        out["fault"] = fault
    if status == "disconnect" and channel.state == "stopped":  # panio's capture, not the device
        out["capture_stopped"] = True
    data = bytes(buf[:consumed])
    out.update(interface=channel.name, epoch=channel.epoch, since=since, start=first, cursor=first + consumed,
               end=first + len(buf), evicted_bytes=first - since,
               elapsed_ms=round((time.monotonic() - started) * 1000, 3), bytes=len(data),
               text=data.decode("utf-8", "backslashreplace"), data_b64=binascii.b2a_base64(data, newline=False).decode())
    if follow:
        out["matches"] = matches
    elif matches:
        out["match"] = matches[-1]
    if include_pending:
        out["pending"] = bytes(buf[consumed:]).decode("utf-8", "backslashreplace")
    return out


class Pending:
    """A transact's answer, looked for by the interface's reader thread as bytes arrive (``offer``), which then
    sends the reply itself: no hand-off to the request's thread between the board's answer and the client
    (docs/performance.md, "Serial"). Only what is cheap to match there: at most ``FAST_BYTES`` received (and no
    more than the request's ``max_bytes``), a literal pattern or a regular expression within ``FAST_BUDGET_S``;
    the reply is sent without blocking (what the socket does not take, the request's thread sends). Anything
    else is handed back (``hand_back``), as are a disconnect, a stop and the deadline: the request's thread then
    waits as ``wait`` does, from the same cursor and start, so the reply is the one ``wait`` would give."""

    __slots__ = ("rx", "since", "max_bytes", "max_output", "sent", "started", "sock", "answered", "rest", "done")

    def __init__(self, rx, since: int, max_bytes: int, max_output: int, sent: int, started: float,
                 sock: socket.socket) -> None:
        self.rx, self.since, self.max_bytes, self.max_output = rx, since, max_bytes, max_output
        self.sent, self.started, self.sock = sent, started, sock
        self.answered, self.rest = False, b""
        self.done = threading.Lock()
        self.done.acquire()  # released once answered or handed back

    def offer(self, channel) -> bool:
        """Look at what ``channel`` holds (its ``cond`` held); True when finished: answered or handed back."""
        end = channel.writer.cursor
        if self.since < channel.ring_start or end - self.since > min(FAST_BYTES, self.max_bytes):
            return self.hand_back()
        buf = bytes(channel.ring[self.since - channel.ring_start:end - channel.ring_start])
        matches: list = []
        try:
            status, _ = _search(self.rx, buf, self.since, 0, matches, False, FAST_BUDGET_S)
        except patterns.PatternTooSlow:
            return self.hand_back()
        if status is None:
            return False
        out = _result(channel, self.since, self.since, buf, matches[-1]["end"] - self.since, status, matches,
                      self.started)
        out["sent_bytes"] = self.sent
        line = dump_line({"ok": True, "result": fit_output(out, self.max_output)})
        try:
            taken = self.sock.send(line, socket.MSG_DONTWAIT)
        except OSError:  # full, or the client is gone: the request's thread sends the rest (and finds which)
            taken = 0
        self.answered, self.rest = True, line[taken:]
        self.done.release()
        return True

    def hand_back(self) -> bool:
        self.done.release()
        return True


def _search(rx, buf: bytearray, start: int, search_from: int, matches: list, follow: bool,
            budget_s: float = patterns.MATCH_BUDGET_S):
    if rx is None:
        return None, search_from
    while True:
        m = patterns.search(rx, buf, search_from, budget_s)
        if m is None:
            return None, search_from
        matches.append({"start": start + m.start(), "end": start + m.end(),
                        "text": m.group().decode("utf-8", "backslashreplace"),
                        "groups": [g.decode("utf-8", "backslashreplace") if g is not None else None for g in m.groups()]})
        if not follow:
            return "matched", search_from
        search_from = m.end() + (1 if m.end() == m.start() else 0)
        if search_from > len(buf):
            return None, search_from


def _idle(channel, pos: int, deadline: float) -> str | None:
    """Wait for bytes past ``pos``; the end status when the wait must stop, else None."""
    with channel.cond:
        while channel.cursor <= pos:
            if channel.state == "fault":
                return "fault"
            if channel.state != "open":
                return "disconnect"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            channel.cond.wait(remaining)
    return None


def fit_output(result: dict[str, Any], max_output_bytes: int) -> dict[str, Any]:
    """Shrink a wait result to max_output_bytes of JSON: drop the base64 copy, then cut text (head kept)."""
    if _json_bound(result) <= max_output_bytes or len(json.dumps(result)) <= max_output_bytes:
        return result
    result = {**result, "output_truncated": True}
    result.pop("data_b64", None)
    for key in ("pending", "text"):
        over = len(json.dumps(result)) - max_output_bytes
        if over > 0 and key in result:
            result[key] = result[key][:max(0, len(result[key]) - over - 64)]
    if "matches" in result and len(json.dumps(result)) > max_output_bytes:
        keep = max(1, len(result["matches"]) * max_output_bytes // len(json.dumps(result)) - 1)
        result["matches"], result["matches_dropped"] = result["matches"][:keep], len(result["matches"]) - keep
    return result


def _json_bound(result: dict[str, Any]) -> int:
    """An upper bound of ``len(json.dumps(result))`` without encoding it: a transact's reply is encoded once,
    when it is sent, not twice. A character becomes at most 6 in JSON (``\\u0000``); the other fields,
    numbers and names, take less than 1 KiB, and a match's own less than 128 bytes."""
    text = len(result.get("text") or "") + len(result.get("pending") or "")
    matches = result.get("matches") or ([result["match"]] if "match" in result else [])
    for m in matches:
        text += len(m["text"]) + sum(len(g or "") + 8 for g in m["groups"])
    return 6 * text + len(result.get("data_b64", "")) + 128 * len(matches) + 1024
