"""One interface, several routes: how the controller reaches a host's operations.

A ``Transport`` has ``call(request) -> result``, ``interactive(request)`` and
``close()``. A request is plain data::

    {"op": "serial.wait", "args": {...}, "deadline_s": 30.0}

``deadline_s`` is how long the operation may take by its own arguments (from
its spec; ``None`` = no bound of its own): a transport waits that long plus
its own margin, never a fixed guess. The result is the operation's JSON-able
return value, or its ``PanioError`` raised again on this side.
``interactive`` runs an operation that needs a byte stream both ways
(``serial connect``) on a channel of its own; a transport that cannot carry
one refuses.

Implementations live in ``controller/transports/``: ``LocalTransport``
(in-process), ``SSHTransport``, ``CeleryTransport`` and ``StubTransport`` (for
tests). Only ``controller.dispatch.Dispatcher`` calls them.
"""

from __future__ import annotations

from typing import Any, Protocol


class Transport(Protocol):
    def call(self, request: dict[str, Any]) -> Any: ...

    def interactive(self, request: dict[str, Any]) -> Any: ...

    def close(self) -> None: ...
