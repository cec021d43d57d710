"""End-state assertions on a lab file: ``path`` + one of equals/matches/absent/count/contains.

Paths are dotted keys with list selectors: ``targets.pico.serial[name=bmc].baud``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

MISSING = object()
SEGMENT = re.compile(r"([^.\[\]]+)(?:\[(\w+)=([^\]]+)\])?")


def read_lab(path: Path) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def resolve(doc: dict, path: str):
    node = doc
    for m in SEGMENT.finditer(path):
        key, sel_key, sel_val = m.groups()
        if not isinstance(node, dict) or key not in node:
            return MISSING
        node = node[key]
        if sel_key:
            hits = [x for x in node if isinstance(x, dict) and str(x.get(sel_key)) == sel_val] if isinstance(node, list) else []
            if not hits:
                return MISSING
            node = hits[0]
    return node


def check_assert(doc: dict, a: dict) -> tuple[bool, str]:
    """One assertion → (passed, a one-line explanation)."""
    path = a["path"]
    got = resolve(doc, path)
    if a.get("absent"):
        return got is MISSING, f"{path} {'absent' if got is MISSING else f'present: {got!r}'}"
    if got is MISSING:
        return False, f"{path} missing"
    if "equals" in a:
        return got == a["equals"], f"{path} = {got!r} (want {a['equals']!r})"
    if "matches" in a:
        ok = isinstance(got, str) and re.search(a["matches"], got) is not None
        return ok, f"{path} = {got!r} (want /{a['matches']}/)"
    if "count" in a:
        n = len(got) if isinstance(got, (list, dict)) else -1
        return n == a["count"], f"{path} has {n} (want {a['count']})"
    if "contains" in a:
        return a["contains"] in got, f"{path} = {got!r} (want it to contain {a['contains']!r})"
    return True, f"{path} present"
