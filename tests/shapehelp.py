"""Checking a command's JSON output against its declared shape (``bench_agent.commands.OUTPUTS``).

``violations(output, shape)`` validates with ``jsonschema`` against the shape made *strict*: besides what the
shape itself says (a required field the output lacks, a wrong type), a field the output has and the shape
does not list fails too, so a shape cannot fall behind its command. An object whose shape says it carries
more (``fields(..., extra=...)``, ``keyed(...)``) keeps taking any field.
"""

from __future__ import annotations

from typing import Any

import jsonschema


def strict(shape: Any) -> Any:
    """``shape`` with every object that lists its fields closed to others, unless it says otherwise."""
    if isinstance(shape, list):
        return [strict(s) for s in shape]
    if not isinstance(shape, dict):
        return shape
    out = {k: strict(v) if k in ("items", "additionalProperties") else v for k, v in shape.items()}
    if "properties" in shape:
        out["properties"] = {name: strict(s) for name, s in shape["properties"].items()}
        out.setdefault("additionalProperties", False)
    return out


def violations(output: Any, shape: dict) -> list[str]:
    """What in ``output`` does not fit ``shape`` (strict), one line each: where, then why."""
    validator = jsonschema.Draft202012Validator(strict(shape))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(output), key=lambda e: list(map(str, e.absolute_path)))]
