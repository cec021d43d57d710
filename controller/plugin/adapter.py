"""The one place the pytest plugin reaches panio's dispatch.

Every handle call goes through ``call``: the public ``dispatch.call(lab,
target, op, args)``, with the session's lease token presented the way a job
step presents its own (``PANIO_LEASE_TOKEN``), so both the controller's check
and the host's lease guard accept this session's calls on the target it
leases and refuse them once the lease is lost. Kept this small so a change of
dispatch's interface is a change here only.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator


@contextlib.contextmanager
def presenting(token: str | int | None) -> Iterator[None]:
    """Run the enclosed calls as the holder of lease credential ``token`` (``TOKEN:SECRET``; None: as nobody's)."""
    from bench_agent.leases.base import TOKEN_ENV

    before = os.environ.get(TOKEN_ENV)
    if token is None:
        os.environ.pop(TOKEN_ENV, None)
    else:
        os.environ[TOKEN_ENV] = str(token)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TOKEN_ENV, None)
        else:
            os.environ[TOKEN_ENV] = before


def call(lab: Any, target: str, op: str, args: dict[str, Any], token: int | None) -> Any:
    """Run operation ``op`` for ``target`` through panio's dispatch, as the holder of lease ``token``."""
    from controller import dispatch

    with presenting(token):
        return dispatch.call(lab, target, op, {"target": target, **args})


def run(func: Callable[..., Any], token: int | None, *args: Any) -> Any:
    """Run a controller function that dispatches on its own (``controller.power.states``) under ``token``."""
    with presenting(token):
        return func(*args)
