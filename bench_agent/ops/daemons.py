"""Operations on this host's daemons (``panio daemons``)."""

from __future__ import annotations

from typing import Any

from bench_agent.ops import operation
from bench_agent.ops.spec import Param


@operation("daemons.list")
def list_() -> list[dict[str, Any]]:
    from bench_agent.daemons.registry import list_daemons

    return list_daemons()


# Not a side effect on a target: it stops panio's own processes on this host (capture, netboot servers,
# strays) and no board changes state, so it names no target and no lease applies; it is the operator's
# way to clean up a host, also under a job (a job's own steps stop their capture with `serial stop`).
@operation("daemons.stop", side_effect=False, unknown_on_failure=False, params=(
    Param("names", list, "daemon names from daemons.list; None: every one", default=None),
    Param("force", bool, "SIGKILL what does not stop within 10 s", default=False)))
def stop(names: list[str] | None = None, force: bool = False) -> list[dict[str, Any]]:
    from bench_agent.daemons.registry import stop_named

    return stop_named(names, force)
