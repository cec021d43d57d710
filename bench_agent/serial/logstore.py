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
marker's are the position after it (a gap ends the current line).

One record is one ``os.write`` on an O_APPEND descriptor: a kill -9 can lose at
most the record being written, and recovery truncates such a torn tail.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from bench_agent.serial.lines import advance

HEAD = struct.Struct("<2sBxIQQIQI")
TRAIL = struct.Struct("<I")
MAGIC = b"PL"
DATA, SENT, START, STOP, GAP = b"D"[0], b"T"[0], b"S"[0], b"X"[0], b"G"[0]
SEGMENT_BYTES = int(os.environ.get("PANIO_SERIAL_SEGMENT_BYTES", 32 << 20))
KEEP_SEGMENTS = int(os.environ.get("PANIO_SERIAL_KEEP_SEGMENTS", 2))


@dataclass(frozen=True)
class Record:
    kind: int
    epoch: int
    cursor: int
    seq: int
    col: int
    time_ns: int
    payload: bytes

    @property
    def kind_name(self) -> str:
        return {DATA: "data", SENT: "sent", START: "start", STOP: "stop", GAP: "gap"}[self.kind]

    def note(self) -> dict:
        return json.loads(self.payload) if self.kind in (START, STOP, GAP) else {}

    def end_state(self) -> tuple[int, int, int]:
        """(cursor, line_seq, line_col) just after this record."""
        if self.kind == DATA:
            seq, col = advance(self.seq, self.col, self.payload)
            return self.cursor + len(self.payload), seq, col
        return self.cursor, self.seq, self.col

    def encode(self) -> bytes:
        size = HEAD.size + len(self.payload) + TRAIL.size
        head = HEAD.pack(MAGIC, self.kind, self.epoch, self.cursor, self.seq, self.col, self.time_ns, len(self.payload))
        return head + self.payload + TRAIL.pack(size)


def segments(path: Path) -> list[Path]:
    """The log's segment files, oldest first (``x.log.2``, ``x.log.1``, ``x.log``)."""
    older = sorted((p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()),
                   key=lambda p: -int(p.suffix[1:]))
    return older + ([path] if path.exists() else [])


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
        try:
            buf = _whole(seg)
        except FileNotFoundError:  # rotated away while we read
            continue
        end = len(buf)
        if end and _decode_at(buf, end) is None:  # torn by a crash: find the last whole record the slow way
            end = max((e for e, _ in _walk_forward(buf)), default=0)
        while end > 0:
            rec = _decode_at(buf, end)
            if rec is None:
                break
            yield rec
            end -= HEAD.size + len(rec.payload) + TRAIL.size


def last_record(path: Path) -> Record | None:
    return next(records_backward(path), None)


class LogWriter:
    """Appends records to one interface's log; rotates segments; recovers after a crash."""

    def __init__(self, path: Path, segment_bytes: int = SEGMENT_BYTES, keep: int = KEEP_SEGMENTS) -> None:
        self.path, self.segment_bytes, self.keep = path, segment_bytes, keep
        path.parent.mkdir(parents=True, exist_ok=True)
        self._truncate_torn_tail()
        self.last = last_record(path)
        self.cursor, self.seq, self.col = self.last.end_state() if self.last else (0, 0, 0)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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
        if kind == GAP and self.col:
            self.seq, self.col = self.seq + 1, 0
        rec = Record(kind, epoch, self.cursor, self.seq, self.col, time_ns, payload)
        if kind == DATA:
            self.cursor, self.seq, self.col = rec.end_state()
        data = rec.encode()
        if self._size and self._size + len(data) > self.segment_bytes:
            self._rotate()
        os.write(self._fd, data)
        self._size += len(data)
        self.last = rec
        return rec

    def note(self, kind: int, epoch: int, time_ns: int, **fields) -> Record:
        return self.append(kind, epoch, json.dumps(fields).encode(), time_ns)

    def _rotate(self) -> None:
        os.close(self._fd)
        for n in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                if n + 1 >= self.keep:
                    older.unlink()
                else:
                    older.rename(self.path.with_name(f"{self.path.name}.{n + 1}"))
        self.path.rename(self.path.with_name(f"{self.path.name}.1")) if self.keep > 1 else self.path.unlink()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = 0

    def close(self) -> None:
        os.close(self._fd)
