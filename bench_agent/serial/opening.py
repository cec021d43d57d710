"""What the three kinds of port panio opens share: ``open`` without losing what the port already holds.

pyserial's ``open`` ends by discarding the port's input (a tty's ``tcflush``; a
socket's ``recv`` of what it holds; rfc2217's PURGE_DATA to the server), and so
dropped what a board printed while no capture listened. Each port class marks the
discard it skips while ``_opening``; a discard asked for by name still happens.
"""

from __future__ import annotations


class KeepsInputOnOpen:
    """A mixin before a pyserial port class: ``_opening`` is true while that class's ``open`` runs."""

    _opening = False

    def open(self) -> None:
        self._opening = True
        try:
            super().open()  # type: ignore[misc]
        finally:
            self._opening = False
