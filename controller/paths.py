"""Where panio keeps things: the lab file, per-user state, runtime files.

Resolution order for the lab file: ``--lab PATH``, then ``PANIO_LAB``, then
``$XDG_CONFIG_HOME/panio/lab.toml`` (``~/.config/panio/lab.toml``).
"""

from __future__ import annotations

import os


TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def _config_base() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "panio")


def config_dir() -> Path:
    from pathlib import Path

    return Path(_config_base())


def resolve_lab_path(cli_value: str | None) -> tuple[str, str]:
    """Return the lab path (a string: pathlib costs start-up time) and where it came from.

    The source is ``--lab``, ``PANIO_LAB`` or ``default``.
    """
    if cli_value:
        return os.path.expanduser(cli_value), "--lab"
    env = os.environ.get("PANIO_LAB")
    if env:
        return os.path.expanduser(env), "PANIO_LAB"
    return os.path.join(_config_base(), "lab.toml"), "default"
