"""Read-only JSON about an interface: receive evidence (exact bytes) and status.

Both are built from the log on disk plus, when it runs, the supervisor's own
report. What cannot be known (a stopped supervisor's port state) is the string
"unknown", never a guess.
"""

from __future__ import annotations

import base64
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_agent.serial.lines import render
from bench_agent.serial.logstore import DATA, GAP, records_backward, segments
from bench_agent.serial.query import records_since

UNKNOWN = "unknown"


def _iso(ns: int | None) -> str | None:
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="milliseconds")


def collect(target: str, iface: dict[str, Any], path: Path, epoch: int | None, since: int | None, max_bytes: int,
            running: dict[str, Any] | None) -> dict[str, Any]:
    records = records_since(path, since, max_bytes)
    out, total, cap, next_cursor = [], 0, False, None
    for rec in records:
        entry = {"kind": rec.kind_name, "epoch": rec.epoch, "cursor": rec.cursor, "rx_time": _iso(rec.time_ns)}
        if rec.kind == DATA:
            data = rec.payload
            if since is not None and rec.cursor < since:
                data, entry["cursor"], entry["partial"] = data[since - rec.cursor:], since, True
            if total + len(data) > max_bytes:
                if since is None:
                    data, entry["partial"] = data[len(data) - (max_bytes - total):], True
                    entry["cursor"] = rec.cursor + len(rec.payload) - len(data)
                else:
                    data, cap, entry["partial"] = data[:max_bytes - total], True, True
                    next_cursor = entry["cursor"] + len(data)
            total += len(data)
            entry.update(bytes=len(data), data_b64=base64.b64encode(data).decode(), text=render(data))
        else:
            entry["note"] = rec.note() if rec.kind != ord("T") else {"sent_bytes": len(rec.payload)}
        out.append(entry)
        if cap:
            break
    if since is None and total > max_bytes:
        cap = True
    last = next(records_backward(path), None)
    end = last.end_state()[0] if last else 0
    first = _first_cursor(path)
    return {"target": target, "interface": iface["name"], "observed_at": _iso(_now()),
            "epoch": running["epoch"] if running else (last.epoch if last else UNKNOWN),
            "capturing": running is not None, "requested": {"epoch": epoch, "since": since, "max_bytes": max_bytes},
            "epoch_changed": epoch is not None and last is not None and (running or {"epoch": last.epoch})["epoch"] != epoch,
            "retained": {"first_cursor": first, "end_cursor": end}, "evicted": since is not None and first is not None and since < first,
            "cap": cap, "next_cursor": next_cursor if cap else end, "bytes": total,
            "gaps": [e for e in out if e["kind"] == "gap"], "records": out}


def _first_cursor(path: Path) -> int | None:
    from bench_agent.serial.logstore import _map, _walk_forward

    for seg in segments(path):
        for _, rec in _walk_forward(_map(seg)):
            return rec.cursor
    return None


def _now() -> int:
    import time

    return time.time_ns()


def status(target: str, iface: dict[str, Any], path: Path, info: dict[str, Any] | None,
           live: dict[str, Any] | None) -> dict[str, Any]:
    last = next(records_backward(path), None)
    cursor, seq, col = last.end_state() if last else (0, 0, 0)
    mine = (live or {}).get("interfaces", {}).get(iface["name"])
    configured = {k: iface.get(k) for k in ("device", "baud", "line_ending", "power_sense_signal", "power_button")}
    out = {"target": target, "interface": iface["name"], "observed_at": _iso(_now()), "configured": configured}
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
                  "gaps_recorded": _count_gaps(path)}
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


def _count_gaps(path: Path) -> int:
    return sum(1 for rec in records_backward(path) if rec.kind == GAP)
