"""Operations on this host's daemons (``panio daemons``)."""

from __future__ import annotations

from typing import Any

from bench_agent.ops import operation


@operation("daemons.list")
def list_() -> list[dict[str, Any]]:
    from bench_agent.daemons import list_daemons

    return list_daemons()


@operation("daemons.stop")
def stop(names: list[str] | None = None, force: bool = False) -> list[dict[str, Any]]:
    from bench_agent.daemons import stop_named

    return stop_named(names, force)
