"""Per-user state directory, shared by both sides (the controller re-exports it).

``PANIO_STATE_DIR`` overrides; else ``$XDG_STATE_HOME/panio``
(``~/.local/state/panio``). Logs, daemon files, results and caches live there.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def state_dir() -> Path:
    from pathlib import Path

    override = os.environ.get("PANIO_STATE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "panio"
