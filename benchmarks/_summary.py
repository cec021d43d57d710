"""`make bench`'s one table: every figure of issue 24's table, read from the rows the benchmarks wrote.

    .venv/bin/python benchmarks/_summary.py FOLDER [--json]

Each benchmark run with ``PANIO_BENCH_OUT=FOLDER`` leaves ``FOLDER/NAME.json``
(``_bench.emit``). This prints one line per figure, in the issue's order, with
the date and load it was measured at and met / NOT met; a figure no benchmark
wrote says "not measured" (and which script measures it), never a number.
(The leading underscore keeps `make bench` from running it as a benchmark.)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# (script, the figure's name as its row says it): the table, in its order
FIGURES = [
    ("serial_roundtrip", "serial round trip p50, panio / labgrid"),
    ("serial_roundtrip", "serial round trip p50, panio / raw pyserial"),
    ("serial_roundtrip", "serial round trip p99, panio"),
    ("serial_roundtrip", "capture rate, panio to disk / pyserial read loop (PTY)"),
    ("ser2net_capture", "capture rate via ser2net socket://, panio to disk / pyserial"),
    ("startup", "start-up of panio target list / python -c pass"),
    ("startup", "start-up of panio config show / python -c pass"),
    ("startup", "start-up of panio serial log T --tail 5 / python -c pass"),
    ("startup", "start-up of panio --help / python -c pass"),
    ("netboot_qemu", "TFTP transfer (kernel + initrd), panio / QEMU's built-in"),
    ("dispatch", "SSH transport / echo on a kept channel"),
    ("dispatch", "side-effect dispatch (lease check in Redis) / the side effect alone"),
    ("startup", "start-up of panio mcp to initialize / importing the MCP SDK"),
]


def read(folder: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(folder.glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except ValueError:
            sys.stderr.write(f"{path}: not JSON, skipped\n")
    return out


def lines(records: dict[str, dict]) -> tuple[list[str], list[dict]]:
    import _bench  # beside this script

    text, rows = [], []
    for script, figure in FIGURES:
        record = records.get(script, {})
        row = next((r for r in record.get("rows", []) if r["figure"] == figure), None)
        if row is None:
            text.append(f"{figure:<64} not measured (benchmarks/{script}.py wrote no such row)")
            rows.append({"figure": figure, "script": script, "measured": False})
            continue
        text.append(f"{_bench.fmt(row)}  [{record['date']}]")
        rows.append({**row, "script": script, "date": record["date"], "measured": True})
    extra = [r for script, record in records.items() for r in record.get("rows", [])
             if (script, r["figure"]) not in FIGURES]
    text += [f"{_bench.fmt(r)}  (also measured)" for r in extra]
    return text, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--json", action="store_true", help="print the table's rows as one JSON object")
    a = ap.parse_args()
    text, rows = lines(read(a.folder))
    if a.json:
        print(json.dumps({"rows": rows}))
        return 0
    met = sum(1 for r in rows if r.get("met"))
    print(f"\nsummary: issue 24's figures (ratio = panio / floor, median of paired alternating rounds; "
          f"{met} of {len(rows)} goals met)")
    for line in text:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
