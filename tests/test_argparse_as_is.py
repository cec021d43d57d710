"""panio's parser leaves argparse as it is for the whole process (issue 41): no gettext stand-in, no argparse
words rebound, so another parser in the same process (pytest's, a user's plugin) keeps its translations."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import argparse, gettext
from controller.cli.main import build_parser
build_parser(full=True).format_help()
assert argparse._ is gettext.gettext and argparse.ngettext is gettext.ngettext, (argparse._, argparse.ngettext)
assert type(sys.modules["gettext"]).__name__ == "module" and hasattr(sys.modules["gettext"], "translation")
"""


def test_building_panios_parser_leaves_argparse_and_gettext_alone():
    for first in ("import sys", "import sys; import controller.cli.parsing"):  # panio's parser first, or after
        r = subprocess.run([sys.executable, "-P", "-c", first + "\n" + CODE], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
