"""Adding a target to a big lab: the appending edit against the full tomlkit round trip, side by side.

`target add` appends the new table's text (controller.lab.store.append_table);
every other edit parses the whole file with tomlkit and writes it back
(controller.lab.store.edit). Both run in this one process on the same lab,
interleaved, and the script prints each median and the ratio.

    .venv/bin/python benchmarks/lab_edit.py [--targets 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.lab import edits  # noqa: E402
from controller.lab.store import append_table, edit  # noqa: E402


def lab_text(n: int) -> str:
    out = ['[hosts.h1]\nssh = "u@h"\n']
    for i in range(n):
        out.append(f'[targets.t{i:05d}]\nhost = "h1"\ntags = ["a", "b"]\n[[targets.t{i:05d}.serial]]\n'
                   f'name = "console"\ndevice = "/dev/ttyUSB{i % 100}"\nbaud = 115200\n')
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PANIO_STATE_DIR"] = tmp
        path = os.path.join(tmp, "lab.toml")
        Path(path).write_text(lab_text(opts.targets))
        size = os.path.getsize(path)
        appended, rewritten = [], []
        for r in range(opts.rounds):
            start = time.perf_counter()
            assert append_table(path, "targets", f"new-a{r}", {"host": "h1"})
            appended.append(time.perf_counter() - start)
            start = time.perf_counter()
            with edit(path) as doc:
                edits.section(doc, "targets")[f"new-e{r}"] = edits.new_table({"host": "h1"})
            rewritten.append(time.perf_counter() - start)
    a, e = statistics.median(appended), statistics.median(rewritten)
    print(f"lab of {opts.targets} targets ({size / 1e6:.1f} MB), {opts.rounds} rounds each, interleaved")
    print(f"  append (target add)   median {a * 1000:9.1f} ms")
    print(f"  full tomlkit edit     median {e * 1000:9.1f} ms")
    print(f"  ratio full / append   {e / a:9.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
