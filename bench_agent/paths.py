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

    return Path(state_dir_name())


def state_dir_name() -> str:
    """``state_dir()`` as a string, for a start-up path that need not import pathlib (the lab cache's)."""
    override = os.environ.get("PANIO_STATE_DIR")
    if override:
        return override
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "panio")


# The lab-parse cache (controller.lab.store): one file per lab file, named after the lab's absolute path,
# so anyone can tell which lab a cache belongs to and drop the caches of lab files that are gone.
_CACHE_PREFIX, _CACHE_SUFFIX = "lab-", ".marshal"


def lab_cache_path(lab_path: str) -> str | None:
    """Where the parse of ``lab_path`` is cached (None for a path too long to name a file after)."""
    name = _CACHE_PREFIX + os.path.abspath(lab_path).replace(os.sep, "%") + _CACHE_SUFFIX
    return None if len(name) > 250 else os.path.join(state_dir_name(), "cache", name)


def lab_cache_source(cache_path) -> str | None:
    """The lab file a cache file was made from (None if the name is not a lab cache's)."""
    name = os.path.basename(str(cache_path))
    if not (name.startswith(_CACHE_PREFIX) and name.endswith(_CACHE_SUFFIX)):
        return None
    return name[len(_CACHE_PREFIX):-len(_CACHE_SUFFIX)].replace("%", os.sep)
