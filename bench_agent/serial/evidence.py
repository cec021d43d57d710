"""Read-only JSON about an interface: receive evidence (exact bytes) and status.

Both are built from the log on disk plus, when it runs, the supervisor's own
report. What cannot be known (a stopped supervisor's port state) is the string
"unknown", never a guess.
"""

from __future__ import annotations

import base64
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_agent.serial.lines import render
from bench_agent.serial.logstore import DATA, SENT, count_outages, records_backward, segments
from bench_agent.serial.query import records_since

UNKNOWN = "unknown"


def _iso(ns: int | None) -> str | None:
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="milliseconds")


def collect(target: str, iface: dict[str, Any], path: Path, epoch: int | None, since: int | None, max_bytes: int,
            running: dict[str, Any] | None) -> dict[str, Any]:
    """Records in the byte window [lo, hi): from ``since`` on, or the last ``max_bytes`` received."""
    records = records_since(path, since, max_bytes)
    last = next(records_backward(path), None)
    end = last.end_state()[0] if last else 0
    first = _first_cursor(path)
    lo = max(since, first or 0) if since is not None else max(first or 0, end - max_bytes)
    hi = min(end, lo + max_bytes)
    out = [_entry(rec, lo, hi) for rec in records if _in_window(rec, lo, hi)]
    cap = hi < end if since is not None else lo > (first or 0)
    current = running["epoch"] if running else (last.epoch if last else UNKNOWN)
    return {"target": target, "interface": iface["name"], "observed_at": _iso(time.time_ns()), "epoch": current,
            "capturing": running is not None, "requested": {"epoch": epoch, "since": since, "max_bytes": max_bytes},
            "epoch_changed": epoch is not None and current != epoch,
            "retained": {"first_cursor": first, "end_cursor": end},
            "evicted": since is not None and first is not None and since < first,
            "cap": cap, "window": {"from": lo, "to": hi}, "next_cursor": hi, "bytes": hi - lo,
            "gaps": [e for e in out if e["kind"] == "gap"], "records": out}


def _in_window(rec, lo: int, hi: int) -> bool:
    if rec.kind == DATA:
        return rec.cursor < hi and rec.cursor + len(rec.payload) > lo
    return lo <= rec.cursor <= hi


def _entry(rec, lo: int, hi: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": rec.kind_name, "epoch": rec.epoch, "cursor": rec.cursor,
                             "rx_time": _iso(rec.time_ns)}
    if rec.kind != DATA:
        entry["note"] = rec.note() if rec.kind != SENT else {"sent_bytes": len(rec.payload),
                                                            "text": render(rec.payload)}
        return entry
    start = max(lo, rec.cursor)
    data = rec.payload[start - rec.cursor:hi - rec.cursor]
    if len(data) != len(rec.payload):
        entry["partial"] = True
    entry.update(cursor=start, bytes=len(data), data_b64=base64.b64encode(data).decode(), text=render(data))
    return entry


def _first_cursor(path: Path) -> int | None:
    from bench_agent.serial.logstore import _map, _walk_forward

    for seg in segments(path):
        for _, rec in _walk_forward(_map(seg)):
            return rec.cursor
    return None


def status(target: str, iface: dict[str, Any], path: Path, info: dict[str, Any] | None,
           live: dict[str, Any] | None) -> dict[str, Any]:
    last = next(records_backward(path), None)
    cursor, seq, col = last.end_state() if last else (0, 0, 0)
    mine = (live or {}).get("interfaces", {}).get(iface["name"])
    configured = {k: iface.get(k) for k in ("device", "baud", "line_ending", "power_sense_signal", "power_button")}
    out = {"target": target, "interface": iface["name"], "observed_at": _iso(time.time_ns()), "configured": configured}
    if mine is None:
        out["active"] = UNKNOWN
        out["process"] = {"state": "running" if info else "not_running", "pid": info["pid"] if info else None}
        out["port"] = {"state": UNKNOWN if not info else "not_owned", "holders": _holders(iface["device"])}
        out["epoch"] = last.epoch if last else UNKNOWN
        out["rx"] = {"cursor": cursor, "next_seq": seq + (1 if col else 0), "last_rx": _last_rx(path)}
        out["tx"] = {"bytes": UNKNOWN}
    else:
        out["active"] = {"device": mine["device"], "real_device": mine["real_device"], "baud": mine["baud"],
                         "matches_configured": mine["device"] == iface["device"] and mine["baud"] == iface.get("baud")}
        out["process"] = {"state": "running", "pid": live["pid"], "started": live["started"]}
        out["port"] = {"state": mine["state"], "last_error": mine["last_error"], "disconnects": mine["disconnects"]}
        out["epoch"] = live["epoch"]
        out["rx"] = {"cursor": mine["cursor"], "next_seq": mine["next_seq"], "last_rx": mine["rx_last"] or UNKNOWN}
        out["tx"] = {"bytes": mine["tx_bytes"], "last_tx": mine["tx_last"] or UNKNOWN}
    out["log"] = {"path": str(path), "bytes_on_disk": sum(os.path.getsize(p) for p in segments(path)),
                  "gaps_recorded": count_outages(path)}
    return out


def _holders(device: str) -> list[dict[str, Any]] | str:
    if not device.startswith("/"):
        return UNKNOWN
    from bench_agent.serial.device import holders

    return holders(device)


def _last_rx(path: Path) -> str:
    for rec in records_backward(path):
        if rec.kind == DATA:
            return _iso(rec.time_ns)
    return UNKNOWN

