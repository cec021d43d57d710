"""The SKILL.md files shipped inside the wheel: ``panio`` and its companions."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
MAIN = "panio"


def names() -> list[str]:
    return sorted(p.parent.name for p in ROOT.glob("*/SKILL.md"))


def path(name: str = MAIN) -> Path:
    return ROOT / name / "SKILL.md"


def description(name: str) -> str:
    """The front matter's ``description`` line."""
    text = path(name).read_text(encoding="utf-8")
    if text.startswith("---"):
        for line in text.split("---", 2)[1].splitlines():
            if line.startswith("description:"):
                return line.split(":", 1)[1].strip()
    return ""
