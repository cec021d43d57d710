"""One interface, several routes: how the controller reaches a host's operations.

A ``Transport`` has one method, ``call(request) -> result``, plus ``close()``.
A request is ``{"op": "serial.send", "args": {...}}`` (plain data); the result
is the operation's JSON-able return value, or the operation's ``PanioError``
raised again on this side. Implementations live in ``controller/transports/``:
``LocalTransport`` (in-process) now; SSH and Celery join it.

The CLI, the MCP server and the job runner call ``dispatch.call`` and never
learn which transport they got.
"""

from __future__ import annotations

from typing import Any, Protocol


class Transport(Protocol):
    def call(self, request: dict[str, Any]) -> Any: ...

    def close(self) -> None: ...
