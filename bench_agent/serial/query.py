"""Reading a serial log from disk: line windows (serial log) and byte ranges (evidence, waits).

Readers walk the records backwards from the end until they reach the window,
so a tail costs the same on a 64 MiB log as on a small one. Nothing here needs
the supervisor: the log is read from disk, running or not.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from bench_agent.serial.lines import assemble
from bench_agent.serial.logstore import DATA, GAP, Record, records_backward

NO_END = 1 << 62
MAX_LINES = 5000


def line_window(path: Path, *, tail: int | None = None, since: int | None = None,
                first: int | None = None, last: int | None = None) -> tuple[list[dict], dict]:
    """Lines in the window (tail N | since SEQ | first..last), and {"next_seq", "last_seq"} of the log.

    A window of more than MAX_LINES lines is cut after MAX_LINES; ``info["more_after"]`` is then the
    seq to continue from (``--since`` it).
    """
    records = records_backward(path)
    newest = next(records, None)
    if newest is None:
        return [], {"next_seq": 0, "last_seq": None}
    _, seq_end, col_end = newest.end_state()
    last_line = seq_end if col_end else seq_end - 1
    info = {"next_seq": last_line + 1, "last_seq": last_line if last_line >= 0 else None}
    if tail is not None:
        lo, hi = last_line - tail + 1, NO_END
    elif since is not None:
        lo, hi = since + 1, NO_END
    else:
        lo, hi = first or 0, last if last is not None else NO_END
    picked, exhausted = _back_to_line(newest, records, lo)
    oldest = _oldest_whole_line(picked) if exhausted else None
    if oldest is not None and lo < oldest:  # the window reaches back past what the log still holds
        info["evicted_before"] = oldest
    out, count = [], 0
    for item in assemble(picked):
        key = item.get("seq", item.get("next_seq"))
        if lo <= key <= hi and not item.get("head_evicted"):
            if "seq" in item and count == MAX_LINES:
                info["more_after"] = out[-1]["seq"] if "seq" in out[-1] else key - 1
                break
            out.append(item)
            count += "seq" in item
    return out, info


def _back_to_line(newest: Record, records, lo: int) -> tuple[list[Record], bool]:
    """The records back to line ``lo``, and whether the log ran out before reaching it."""
    picked: list[Record] = []
    rec: Record | None = newest
    while rec is not None:
        if rec.kind in (DATA, GAP):
            if rec.kind == GAP and rec.seq < lo:
                break
            picked.append(rec)
            if rec.kind == DATA and (rec.seq < lo or (rec.seq == lo and rec.col == 0)):
                break
        rec = next(records, None)
    picked.reverse()
    return picked, rec is None


def _oldest_whole_line(records: list[Record]) -> int | None:
    """The first line the log still holds whole, when older lines were evicted (else None)."""
    first = next((r for r in records if r.kind == DATA), None)
    if first is None:
        return None
    oldest = first.seq + (1 if first.col else 0)
    return oldest if oldest > 0 else None


def records_since(path: Path, cursor: int | None, max_bytes: int) -> list[Record]:
    """Records from byte ``cursor`` on (forward order); without a cursor, the ones holding the last max_bytes."""
    picked: list[Record] = []
    seen = 0
    for rec in records_backward(path):
        picked.append(rec)
        if rec.kind == DATA:
            seen += len(rec.payload)
            if (cursor is not None and rec.cursor <= cursor) or (cursor is None and seen >= max_bytes):
                break
        elif cursor is not None and rec.cursor < cursor:
            picked.pop()
            break
    picked.reverse()
    return picked


def bytes_between(path: Path, start: int, end: int) -> tuple[bytes, int]:
    """Received bytes [start, end) from disk, and the cursor they really start at (later if evicted)."""
    chunks = [r for r in records_since(path, start, 0) if r.kind == DATA]
    data = b"".join(r.payload for r in chunks)
    first = chunks[0].cursor if chunks else end
    lo = max(start, first)
    return data[lo - first:end - first], lo


def oldest_cursor(path: Path) -> int | None:
    oldest = None
    for rec in records_backward(path):
        if rec.kind == DATA:
            oldest = rec.cursor
    return oldest


def cursor_at(path: Path, epoch: int, time_ns: int) -> int:
    """The byte cursor of the first byte capture epoch ``epoch`` received at or after ``time_ns``.

    Walks back from the end while records are that new: so a wait "since the previous job step began"
    needs no cursor bookkeeping. An epoch that started after ``time_ns`` starts at its own first byte.
    """
    from bench_agent.serial.logstore import START

    found = None
    for rec in records_backward(path):
        if found is None:
            found = rec.end_state()[0]  # nothing newer than time_ns: the end of the log
        if rec.epoch != epoch or rec.time_ns < time_ns:
            break
        if rec.kind == DATA:
            found = rec.cursor
        elif rec.kind == START:
            found = rec.cursor
            break
    return found or 0
