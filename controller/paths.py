"""Where panio keeps things: the lab file, per-user state, runtime files.

Resolution order for the lab file: ``--lab PATH``, then ``PANIO_LAB``, then
``$XDG_CONFIG_HOME/panio/lab.toml`` (``~/.config/panio/lab.toml``).
"""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "panio"


def state_dir() -> Path:
    """Per-user state: logs, results database, daemon files. ``PANIO_STATE_DIR`` overrides."""
    override = os.environ.get("PANIO_STATE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "panio"


def default_lab_path() -> Path:
    return config_dir() / "lab.toml"


def resolve_lab_path(cli_value: str | None) -> tuple[Path, str]:
    """Return the lab path and where it came from (``--lab``, ``PANIO_LAB``, ``default``)."""
    if cli_value:
        return Path(cli_value).expanduser(), "--lab"
    env = os.environ.get("PANIO_LAB")
    if env:
        return Path(env).expanduser(), "PANIO_LAB"
    return default_lab_path(), "default"
