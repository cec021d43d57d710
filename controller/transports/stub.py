"""StubTransport: a transport that answers from a plain function (httpx's ``MockTransport``).

For unit tests of anything above the transport (the dispatcher, the CLI's
command modules, the job runner): ``Dispatcher(lab, transport=StubTransport(handler))``
where ``handler(request)`` returns the operation's result or raises its
``PanioError``. Every request is kept in ``requests``, so a test can assert
what travelled (the op, its checked arguments, its deadline). Without a
handler, requests run in-process (``bench_agent.ops.call``), which is what a
contract test wants from a stub: the real operation behind a recorded road.
"""

from __future__ import annotations

from typing import Any, Callable

Handler = Callable[[dict[str, Any]], Any]


class StubTransport:
    def __init__(self, handler: Handler | None = None, interactive: Handler | None = None) -> None:
        self.handler = handler or _in_process
        self.interactive_handler = interactive or self.handler
        self.requests: list[dict[str, Any]] = []
        self.closed = False

    def call(self, request: dict[str, Any]) -> Any:
        self.requests.append(request)
        return self.handler(request)

    def interactive(self, request: dict[str, Any]) -> Any:
        self.requests.append({**request, "interactive": True})
        return self.interactive_handler(request)

    def close(self) -> None:
        self.closed = True


def _in_process(request: dict[str, Any]) -> Any:
    from bench_agent import ops

    return ops.call(request["op"], request.get("args", {}))
