"""The lab file: the single source of truth for targets, hosts and channels.

``load`` reads and validates (``tomllib``); ``edit`` changes it in place with
``tomlkit`` under a lock, atomically, so comments and order survive and a
concurrent or crashed edit never loses or half-writes the file.
"""

from controller.lab.model import Lab
from controller.lab.store import edit, load, load_text

__all__ = ["Lab", "edit", "load", "load_text"]
