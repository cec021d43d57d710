"""The on-disk serial log: an append-only file of self-describing records.

Each record is ``header + payload + trailer``::

    header  "PL" kind epoch:u32 cursor:u64 line_seq:u64 line_col:u32 time_ns:u64 length:u32
    payload the exact received bytes (kind D), sent bytes (T) or a JSON note (S, X, G)
    trailer total record size:u32 (so a reader can walk backwards from the end)

Kinds: ``D`` data received, ``T`` data sent, ``S`` capture epoch started,
``X`` clean stop, ``G`` gap (the supervisor died, the device went away).
``cursor`` counts every byte ever received on the interface and ``line_seq``
numbers its lines; both are carried in every record, so they never restart,
never get reused and stay right when old segments are evicted. A D record's
``cursor``/``line_seq``/``line_col`` are the position of its first byte; a
marker's are the position after it (a gap or a new epoch ends the current line:
what the board sent while nothing captured may be missing, so the prompt a
stopped capture left unterminated never runs into the next epoch's output).

One record is one ``os.write`` on an O_APPEND descriptor: a kill -9 can lose at
most the record being written, and recovery truncates such a torn tail.

Beside each segment the writer keeps ``<segment>.gaps``, a small JSON count of
the segment's outages (gaps that are not "reconnected" markers), so the status
never walks millions of records. It is written (temp file + rename) *before*
the record it describes: the segment's first record and every outage. It names
the header of the segment's first record and of its last outage, so a reader
accepts it only if both are on disk where it says; then no outage can follow
unseen, since writing one would have replaced the sidecar first. A sidecar
that is missing (a log of older panio), unreadable, left behind by a crash
mid-rotation or ahead of a record a kill -9 cut short fails that check, and the
segment is walked as before; the writer repairs such sidecars when it starts.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import time
from collections import namedtuple

from bench_agent.private import open_private, private_dir, write_private

TYPE_CHECKING = False  # a read (`serial log`) imports neither typing, pathlib nor json (benchmarks/startup.py)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Iterator

from bench_agent.serial.lines import advance

HEAD = struct.Struct("<2sBxIQQIQI")
TRAIL = struct.Struct("<I")
MAGIC = b"PL"
GAPS_SUFFIX = ".gaps"
DATA, SENT, START, STOP, GAP = b"D"[0], b"T"[0], b"S"[0], b"X"[0], b"G"[0]
SEGMENT_BYTES = int(os.environ.get("PANIO_SERIAL_SEGMENT_BYTES", 32 << 20))
KEEP_SEGMENTS = int(os.environ.get("PANIO_SERIAL_KEEP_SEGMENTS", 2))


class Record(namedtuple("Record", "kind epoch cursor seq col time_ns payload")):
    """One log record (a named tuple, not a dataclass: `serial log` must not import dataclasses)."""

    __slots__ = ()

    @property
    def kind_name(self) -> str:
        return {DATA: "data", SENT: "sent", START: "start", STOP: "stop", GAP: "gap"}[self.kind]

    def note(self) -> dict:
        import json

        return json.loads(self.payload) if self.kind in (START, STOP, GAP) else {}

    def end_state(self) -> tuple[int, int, int]:
        """(cursor, line_seq, line_col) just after this record."""
        if self.kind == DATA:
            seq, col = advance(self.seq, self.col, self.payload)
            return self.cursor + len(self.payload), seq, col
        return self.cursor, self.seq, self.col

    def encode(self) -> bytes:
        return b"".join(self.parts())

    @property
    def size(self) -> int:
        """The record's length on disk."""
        return HEAD.size + len(self.payload) + TRAIL.size

    def parts(self) -> tuple[bytes, bytes, bytes]:
        """The record's bytes as (head, payload, trail): written with one ``writev``, the payload uncopied."""
        head = HEAD.pack(MAGIC, self.kind, self.epoch, self.cursor, self.seq, self.col, self.time_ns, len(self.payload))
        return head, self.payload, TRAIL.pack(self.size)


def segments(path: Path | str) -> list:
    """The log's segment files, oldest first (``x.log.2``, ``x.log.1``, ``x.log``), of ``path``'s type."""
    folder, name = os.path.split(path)
    try:
        entries = os.listdir(folder or ".")
    except FileNotFoundError:
        entries = []
    numbers = sorted((int(e[len(name) + 1:]) for e in entries
                      if e.startswith(name + ".") and e[len(name) + 1:].isdigit()), reverse=True)
    kind = type(path)
    older = [kind(os.path.join(folder, f"{name}.{n}")) for n in numbers]
    return older + ([path] if os.path.exists(path) else [])


def _decode_at(buf, end: int) -> Record | None:
    """The record that ends at ``end`` in ``buf``, or None when the bytes there are not a whole record."""
    if end < HEAD.size + TRAIL.size:
        return None
    (size,) = TRAIL.unpack_from(buf, end - TRAIL.size)
    start = end - size
    if size < HEAD.size + TRAIL.size or start < 0:
        return None
    magic, kind, epoch, cursor, seq, col, time_ns, length = HEAD.unpack_from(buf, start)
    if magic != MAGIC or HEAD.size + length + TRAIL.size != size:
        return None
    return Record(kind, epoch, cursor, seq, col, time_ns, bytes(buf[start + HEAD.size:start + HEAD.size + length]))


def _walk_forward(buf) -> Iterator[tuple[int, Record]]:
    pos = 0
    while pos + HEAD.size <= len(buf):
        magic, kind, epoch, cursor, seq, col, time_ns, length = HEAD.unpack_from(buf, pos)
        end = pos + HEAD.size + length + TRAIL.size
        if magic != MAGIC or end > len(buf) or TRAIL.unpack_from(buf, end - TRAIL.size)[0] != end - pos:
            return
        yield end, Record(kind, epoch, cursor, seq, col, time_ns, bytes(buf[pos + HEAD.size:end - TRAIL.size]))
        pos = end


def _map(path: Path):
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""


def _whole(seg: Path, tries: int = 5):
    """Map a segment, waiting a moment if its last record is still being written (a big write lands in steps)."""
    buf = _map(seg)
    for _ in range(tries):
        if not len(buf) or _decode_at(buf, len(buf)) is not None:
            break
        time.sleep(0.002)
        buf = _map(seg)
    return buf


def records_backward(path: Path) -> Iterator[Record]:
    """Every whole record of the log, newest first, across segments."""
    for seg in reversed(segments(path)):
        for _, rec in _segment_backward(seg):
            yield rec


def _segment_backward(seg: Path) -> Iterator[tuple[int, Record]]:
    """(end offset, record) for every whole record of one segment, newest first."""
    try:
        buf = _whole(seg)
    except FileNotFoundError:  # rotated away while we read
        return
    end = len(buf)
    if end and _decode_at(buf, end) is None:  # torn by a crash: find the last whole record the slow way
        end = max((e for e, _ in _walk_forward(buf)), default=0)
    while end > 0:
        rec = _decode_at(buf, end)
        if rec is None:
            break
        yield end, rec
        end -= HEAD.size + len(rec.payload) + TRAIL.size


def is_outage(kind: int, payload: bytes) -> bool:
    """A gap that starts an outage; a "reconnected" gap only closes one and is not counted."""
    if kind != GAP:  # every record a capture writes asks: decide without json for the data
        return False
    import json

    return not json.loads(payload).get("reconnected")


def gaps_path(seg: Path) -> Path:
    return seg.with_name(seg.name + GAPS_SUFFIX)


def count_outages(path: Path) -> int:
    """The log's outages over its retained segments: each segment's sidecar when it proves itself, else a walk."""
    total = 0
    for seg in segments(path):
        counted = _sidecar_count(seg)
        total += walk_outages(seg) if counted is None else counted
    return total


def walk_outages(seg: Path) -> int:
    """Count one segment's outages record by record (the cost grows with the segment)."""
    return sum(1 for _, rec in _segment_backward(seg) if is_outage(rec.kind, rec.payload))


def _read_mark(seg: Path) -> dict | None:
    import json

    try:
        mark = json.loads(gaps_path(seg).read_bytes())
        if all(isinstance(mark.get(k), t) for k, t in (("count", int), ("end", int), ("first", str))):
            return mark
    except (OSError, ValueError, AttributeError):
        pass
    return None


def _sidecar_count(seg: Path) -> int | None:
    """The sidecar's count, or None when it does not describe this segment as it is on disk."""
    try:
        buf = _map(seg)
    except FileNotFoundError:
        return None
    if not len(buf):
        return 0  # a segment just opened (or truncated to nothing): no record, no outage
    mark = _read_mark(seg)
    return mark["count"] if mark is not None and _mark_holds(mark, buf) else None


def _mark_holds(mark: dict, buf) -> bool:
    if len(buf) < HEAD.size or bytes(buf[:HEAD.size]).hex() != mark["first"]:
        return False
    if mark["count"] == 0:
        return mark["end"] == 0
    if not 0 < mark["end"] <= len(buf):
        return False
    rec = _decode_at(buf, mark["end"])
    return rec is not None and is_outage(rec.kind, rec.payload) and rec.encode()[:HEAD.size].hex() == mark.get("last")


def _write_mark(seg: Path, mark: dict) -> None:
    import json

    write_private(gaps_path(seg), json.dumps(mark).encode())


def repair_sidecars(path: Path) -> dict | None:
    """Give every segment a sidecar that holds (walking the ones that have none); the current segment's mark."""
    import re

    current = None
    for seg in segments(path):
        mark, buf = _read_mark(seg), _map(seg)
        if len(buf) >= HEAD.size and (mark is None or not _mark_holds(mark, buf)):
            mark = {"first": bytes(buf[:HEAD.size]).hex(), "count": 0, "end": 0}
            for end, rec in _segment_backward(seg):
                if is_outage(rec.kind, rec.payload):
                    if not mark["count"]:
                        mark.update(end=end, last=rec.encode()[:HEAD.size].hex())
                    mark["count"] += 1
            _write_mark(seg, mark)
        if len(buf) < HEAD.size:  # a sidecar written just before a first record that never landed
            gaps_path(seg).unlink(missing_ok=True)
        current = mark if len(buf) >= HEAD.size else None
    for stray in path.parent.glob(path.name + "*" + GAPS_SUFFIX):  # left by a crash mid-rotation
        seg = stray.with_name(stray.name[:-len(GAPS_SUFFIX)])
        if re.fullmatch(re.escape(path.name) + r"(\.\d+)?", seg.name) and not seg.exists():
            stray.unlink(missing_ok=True)
    for tmp in path.parent.glob(f".{path.name}*{GAPS_SUFFIX}.*.tmp"):  # a kill -9 before the rename
        tmp.unlink(missing_ok=True)
    return current


def last_record(path: Path) -> Record | None:
    return next(records_backward(path), None)


class LogWriter:
    """Appends records to one interface's log; rotates segments; recovers after a crash."""

    def __init__(self, path: Path, segment_bytes: int = SEGMENT_BYTES, keep: int = KEEP_SEGMENTS) -> None:
        self.path, self.segment_bytes, self.keep = path, segment_bytes, keep
        private_dir(path.parent)  # a console log is the lab's: this user's alone, 0700 / 0600
        self._truncate_torn_tail()
        self._mark = repair_sidecars(path)
        self.last = last_record(path)
        self.cursor, self.seq, self.col = self.last.end_state() if self.last else (0, 0, 0)
        self._fd = open_private(path, os.O_WRONLY | os.O_APPEND)
        self._size = os.fstat(self._fd).st_size

    def _truncate_torn_tail(self) -> None:
        if not self.path.exists():
            return
        buf = _map(self.path)
        if not len(buf) or _decode_at(buf, len(buf)) is not None:
            return
        good = max((e for e, _ in _walk_forward(buf)), default=0)
        del buf
        os.truncate(self.path, good)

    def append(self, kind: int, epoch: int, payload: bytes, time_ns: int) -> Record:
        if kind in (GAP, START) and self.col:  # a new capture epoch, like a gap, never continues a pending line
            self.seq, self.col = self.seq + 1, 0
        rec = Record(kind, epoch, self.cursor, self.seq, self.col, time_ns, payload)
        if kind == DATA:
            self.cursor, self.seq, self.col = rec.end_state()
        parts, size = rec.parts(), rec.size  # a flood's 64 KiB payload is not copied into a record first
        if self._size and self._size + size > self.segment_bytes:
            self._rotate()
        self._mark_before(kind, payload, parts[0], size)
        if os.writev(self._fd, parts) != size:
            raise OSError(errno.ENOSPC, "short write to the capture log", str(self.path))
        self._size += size
        self.last = rec
        return rec

    def _mark_before(self, kind: int, payload: bytes, head: bytes, size: int) -> None:
        """Update the segment's sidecar for the record about to be written (``head``: its header, ``size``: its
        length; see the module's docstring)."""
        if self._size and kind != GAP:  # the common case, every record of a capture: decided first
            return
        outage = is_outage(kind, payload)
        if self._size and not outage:
            return
        fresh = {"first": head.hex(), "count": 0, "end": 0}
        mark = dict(self._mark) if self._size and self._mark else fresh
        if outage:
            mark.update(count=mark["count"] + 1, end=self._size + size, last=head.hex())
        _write_mark(self.path, mark)
        self._mark = mark

    def note(self, kind: int, epoch: int, time_ns: int, **fields) -> Record:
        import json

        return self.append(kind, epoch, json.dumps(fields).encode(), time_ns)

    def _rotate(self) -> None:
        os.close(self._fd)
        for n in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                if n + 1 >= self.keep:
                    older.unlink()
                    gaps_path(older).unlink(missing_ok=True)
                else:
                    _rename_with_mark(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        if self.keep > 1:
            _rename_with_mark(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()
            gaps_path(self.path).unlink(missing_ok=True)
        self._fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
        self._size, self._mark = 0, None

    def close(self) -> None:
        os.close(self._fd)


def _rename_with_mark(seg: Path, to: Path) -> None:
    seg.rename(to)
    try:
        gaps_path(seg).rename(gaps_path(to))
    except FileNotFoundError:  # a log of older panio: the next start walks it once
        gaps_path(to).unlink(missing_ok=True)
