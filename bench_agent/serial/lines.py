"""Lines of a serial log: numbering, assembly from records, and the text a person reads.

A line ends at LF, or after LINE_CAP bytes without one (a console that never
sends a newline must not hold a line open forever). ``line_seq`` numbers lines
from the log's creation; the records carry it, so numbering is stable.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    from typing import Iterable, Iterator

LINE_CAP = 4096
# Compiled by ``re`` (imported only then; it caches them) on a line that needs them: most lines have no escape
# sequence and no control byte, and compiling both was a tenth of a millisecond of every `serial log`.
ANSI = rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"  # every one starts with ESC
CONTROL = r"[\x00-\x08\x0b-\x1f\x7f]"  # none is printable (str.isprintable)


def pieces(seq: int, col: int, data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """Split ``data`` (starting at column ``col`` of line ``seq``) into (seq, piece, ends_line)."""
    i, n = 0, len(data)
    while i < n:
        room = LINE_CAP - col
        nl = data.find(b"\n", i, i + room)
        if nl >= 0:
            yield seq, data[i:nl + 1], True
            i = nl + 1
        elif n - i >= room:
            yield seq, data[i:i + room], True
            i += room
        else:
            yield seq, data[i:], False
            return
        seq, col = seq + 1, 0


def advance(seq: int, col: int, data: bytes) -> tuple[int, int]:
    """The (seq, col) after ``data``."""
    first = data.find(b"\n")
    if first < 0:
        if col + len(data) < LINE_CAP:
            return seq, col + len(data)
    elif col + first < LINE_CAP:  # the first line ends at its newline, not at the cap
        # Every newline ends a line unless some line reaches the cap: then ``pieces`` decides. Counting in C
        # keeps the capture of a flood from spending a third of its time here.
        last = data.rfind(b"\n")
        tail = len(data) - last - 1
        if tail < LINE_CAP and (last - first <= LINE_CAP or _short_lines(data, first + 1, last)):
            return seq + data.count(b"\n"), tail
    for seq, piece, ends in pieces(seq, col, data):
        col = 0 if ends else col + len(piece)
        if ends:
            seq += 1
        else:
            return seq, col
    return seq, 0


def _short_lines(data: bytes, start: int, end: int) -> bool:
    """True when ``data[start:end]`` holds no run of LINE_CAP bytes without a newline (False: it may).

    Any such run covers a whole half-cap window aligned on ``start``; one ``find`` a window, in C."""
    half = LINE_CAP // 2
    for k in range(start, end - half + 1, half):
        if data.find(b"\n", k, k + half) < 0:
            return False
    return True


def assemble(records: Iterable) -> list[dict]:
    """Lines (and gap markers) from D and G records in forward order.

    Each line: {"seq", "time_ns" (RX time of its first byte), "epoch", "data" (bytes), "complete"}.
    A gap: {"gap": reason, "next_seq" (the line after it), "time_ns", "epoch"}.
    """
    out: list[dict] = []
    current: dict | None = None
    for rec in records:
        if rec.kind == ord("G"):
            current = None
            out.append({"gap": rec.note().get("reason", "gap"), "next_seq": rec.seq, "time_ns": rec.time_ns,
                        "epoch": rec.epoch})
            continue
        if rec.kind != ord("D"):
            continue
        for seq, piece, ends in pieces(rec.seq, rec.col, rec.payload):
            if current is None or current["seq"] != seq:
                current = {"seq": seq, "time_ns": rec.time_ns, "epoch": rec.epoch, "data": b"", "complete": False}
                if seq == rec.seq and rec.col:
                    current["head_evicted"] = True  # its first bytes are in an evicted segment
                out.append(current)
            current["data"] += piece
            current["complete"] = ends
    return out


def render(data: bytes, raw: bool = False) -> str:
    """The text of one line: line end dropped; ANSI stripped and controls escaped unless raw."""
    if data.endswith(b"\n"):
        data = data[:-1]
    if data.endswith(b"\r"):
        data = data[:-1]
    if raw:
        return data.decode("utf-8", "backslashreplace")
    if b"\x1b" in data:
        import re  # here: with enum and functools, `re` was a fifth of `serial log` for a log of plain lines

        data = re.sub(ANSI, b"", data)
    text = data.replace(b"\r", b"").decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    import re

    return re.sub(CONTROL, lambda m: f"\\x{ord(m.group()):02x}", text)


def format_entry(entry: dict) -> str:
    """One `serial log` entry (the serial.log operation's JSON) as `[time] #<seq> <text>`, local time.

    ``*`` after the seq marks the current, unterminated line; a gap reads `[time] -- gap: REASON --`.
    """
    stamp = _local_clock(entry["time"])
    if "gap" in entry:
        return f"[{stamp}] -- gap: {entry['gap']} --"
    return f"[{stamp}] #{entry['seq']}{'' if entry['complete'] else '*'} {entry['text']}"


def _local_clock(iso: str) -> str:
    """``HH:MM:SS.mmm`` in local time of a UTC stamp as the serial.log operation writes it
    (``2026-12-01T18:58:28.446+00:00``), without importing datetime (a tenth of `serial log`'s start-up);
    any other form of ISO 8601 goes through datetime."""
    if len(iso) == 29 and iso[10] == "T" and iso.endswith("+00:00"):
        days = _days_since_epoch(int(iso[0:4]), int(iso[5:7]), int(iso[8:10]))
        seconds = days * 86400 + int(iso[11:13]) * 3600 + int(iso[14:16]) * 60 + int(iso[17:19])
        return time.strftime("%H:%M:%S", time.localtime(seconds)) + iso[19:23]
    from datetime import datetime

    return datetime.fromisoformat(iso).astimezone().strftime("%H:%M:%S.%f")[:-3]


def _days_since_epoch(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the date (proleptic Gregorian; H. Hinnant's days_from_civil)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
