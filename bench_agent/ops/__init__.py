"""The registry of named operations: every runtime capability of a control host.

An operation is a plain function registered by name (``serial.send``,
``power.cycle``). It takes plain-data keyword arguments — the channel's
configuration from the lab file, never the lab file itself, plus the request's
own arguments — and returns JSON-able data or raises a ``PanioError``. So the
same call crosses SSH and Celery as JSON, with no pickling.

Operations live in ``bench_agent/ops/<group>.py`` and are imported lazily on
first use of their group, so a process pays only for what it calls.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from bench_agent.errors import UsageError

Operation = Callable[..., Any]
REGISTRY: dict[str, Operation] = {}


def operation(name: str) -> Callable[[Operation], Operation]:
    """Register ``func`` under ``name`` (``<group>.<verb>``)."""

    def register(func: Operation) -> Operation:
        if name in REGISTRY and REGISTRY[name] is not func:
            raise RuntimeError(f"operation {name!r} registered twice")
        REGISTRY[name] = func
        return func

    return register


def lookup(name: str) -> Operation:
    if name not in REGISTRY:
        group = name.split(".", 1)[0]
        if not group.isidentifier():
            raise UsageError(f"unknown operation {name!r}")
        try:
            importlib.import_module(f"bench_agent.ops.{group}")
        except ModuleNotFoundError as exc:
            if exc.name != f"bench_agent.ops.{group}":
                raise
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown operation {name!r}") from None


def call(name: str, args: dict[str, Any]) -> Any:
    """Run operation ``name`` in this process."""
    return lookup(name)(**args)
