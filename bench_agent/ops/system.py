"""Operations about the host itself."""

from __future__ import annotations

import os
import platform
import socket

from bench_agent.ops import operation
from bench_agent.ops.spec import Param


@operation("system.ping")  # payload: any JSON value, so it is not a typed Param
def ping(payload: object = None) -> dict:
    """A no-op round trip: echoes ``payload``. Used by health checks and benchmarks."""
    return {"pong": payload}


@operation("system.info")
def info() -> dict:
    return {"hostname": socket.gethostname(), "pid": os.getpid(), "python": platform.python_version()}


@operation("system.discover")
def discover() -> dict:
    """This host's serial ports, capture devices, network links and adb devices."""
    from bench_agent.inventory import inventory

    return inventory()


@operation("system.doctor", params=(
    Param("config", dict, "one target's table from the lab file"),
    Param("tftp_root", str, "the netboot TFTP root to check", default=None)))
def doctor(config: dict, tftp_root: str | None = None) -> list:
    """Check one target's channels against this host's hardware."""
    from bench_agent.doctor import check

    return check(config, tftp_root)


@operation("system.host_check", params=(
    Param("version", str, "the panio version the controller runs"),
    Param("groups", list, "device groups the worker's user should be in", default=None)))
def host_check(version: str, groups: list | None = None) -> list:
    """Check the host itself: panio's version against the controller's, the worker's unit, device groups."""
    from bench_agent.doctor import host_rows

    return host_rows(version, groups)
