"""Operations about the host itself."""

from __future__ import annotations

import os
import platform
import socket

from bench_agent.ops import operation


@operation("system.ping")
def ping(payload: object = None) -> dict:
    """A no-op round trip: echoes ``payload``. Used by health checks and benchmarks."""
    return {"pong": payload}


@operation("system.info")
def info() -> dict:
    return {"hostname": socket.gethostname(), "pid": os.getpid(), "python": platform.python_version()}
