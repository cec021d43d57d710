"""LocalTransport: the target's host is this machine; call the operation in-process."""

from __future__ import annotations

from bench_agent import ops

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    from typing import Any


class LocalTransport:
    def call(self, request: dict[str, Any]) -> Any:
        return ops.call(request["op"], request.get("args", {}))

    def interactive(self, request: dict[str, Any]) -> Any:
        # This process's own terminal is the byte stream.
        return ops.call(request["op"], request.get("args", {}))

    def close(self) -> None:
        pass
