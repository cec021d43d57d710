"""What argparse's gettext costs panio's start-up: the same command with and without a gettext stand-in.

    .venv/bin/python benchmarks/argparse_gettext.py [--rounds 30] [--json]

panio once imported argparse under a stand-in ``gettext`` module (two functions
that return the English words) and then set argparse's ``_`` and ``ngettext``
to them, for the whole process: argparse asks gettext for each of its words
(a search of the locale catalogues each), and importing gettext compiles a
plural-formula regex. That patched argparse for anything else in the process
(pytest's own parser, in the test suite). This measures what the stand-in saved,
in alternating pairs: the floor is the command with the stand-in installed first
(as panio did), the other side the command as panio runs now, with argparse
and gettext imported as they are. A row is the median of the paired ratios
(plain / stand-in); the goal is what panio accepts for not patching argparse.
(`panio --help`, `target list`, `config show` and `serial log` parse without
argparse, ``controller.cli.commands.QUICK``: the stand-in never touched them.)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import _bench  # beside this script

STAND_IN = """
import sys
stand_in = type(sys)("gettext")
stand_in.gettext = lambda message: message
stand_in.ngettext = lambda singular, plural, n: singular if n == 1 else plural
sys.modules["gettext"] = stand_in
import argparse
del sys.modules["gettext"]
"""
RUN = "import sys\nfrom controller.cli.main import main\nsys.argv = ['panio', *{argv!r}]\nsys.exit(main())\n"


def timed(code: str, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                   check=False)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--json", action="store_true", help="print one JSON object (the rows) instead of the table")
    opts = ap.parse_args()
    env = _bench.byte_compiled_env()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env.update(PANIO_LAB=os.path.join(tmp, "lab.toml"), PANIO_STATE_DIR=tmp, LANG="C.UTF-8")
        subprocess.run([sys.executable, "-c", RUN.format(argv=["init"])], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        cases = [("panio job list --help: plain argparse / the stand-in", ["job", "list", "--help"]),
                 ("panio serial wait --help: plain argparse / the stand-in", ["serial", "wait", "--help"]),
                 ("panio target show nosuch (parsed, fails): plain / the stand-in", ["target", "show", "nosuch"])]
        for figure, argv in cases:
            run = RUN.format(argv=argv)
            pairs = _bench.paired(lambda r=run: timed(STAND_IN + r, env), lambda r=run: timed(r, env), opts.rounds)
            rows.append(_bench.row(figure, pairs, "<=", 1.10, unit="ms", scale=1000))
    _bench.emit(__file__, rows, opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
