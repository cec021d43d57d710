"""The one dispatch: pick a transport from the target's host and call an operation.

Every runtime command (CLI, MCP server, job runner) goes through ``call``, so
a command behaves the same whichever way it travels.
"""

from __future__ import annotations

from typing import Any

from controller.lab.model import Lab
from controller.transport import Transport

_LOCAL: Transport | None = None
_REMOTE: dict[str, Transport] = {}  # one kept connection per host, reused for the life of the process


def transport_for(lab: Lab, host: str | None) -> Transport:
    """The transport for ``host`` (None = this machine): in-process, else SSH to the host's agent,
    or the host's Celery worker when the host says ``transport = "celery"``."""
    global _LOCAL
    if host is None:
        if _LOCAL is None:
            from controller.transports.local import LocalTransport

            _LOCAL = LocalTransport()
        return _LOCAL
    config = lab.host(host)  # fails helpfully if the host is unknown
    if host not in _REMOTE:
        if config.get("transport") == "celery":
            from controller.transports.celery import CeleryTransport

            _REMOTE[host] = CeleryTransport(host)
        else:
            from controller.transports.ssh import SSHTransport

            _REMOTE[host] = SSHTransport(host, config)
    return _REMOTE[host]


def call(lab: Lab, target: str, op: str, args: dict[str, Any]) -> Any:
    """Run ``op`` for ``target`` on the host that owns it (refused while another holder leases it)."""
    from bench_agent.lease_guard import with_token
    from controller.jobs.backends import lease_store

    host = lab.target(target).get("host")
    _check_lease(target)
    from bench_agent import ops

    request = {"op": op, "args": with_token(args, lease_store()), "deadline_s": _deadline_s(op, args)}
    transport = transport_for(lab, host)
    if not ops.spec(op).interactive:
        return transport.call(request)
    if not hasattr(transport, "interactive"):  # an interactive operation needs a byte stream of its own
        from bench_agent.errors import Refused

        raise Refused(f"{op} needs an interactive byte stream, which the {host} host's transport cannot carry",
                      hint="run it on the host itself, or reach the host over SSH", host=host)
    return transport.interactive(request)


def call_host(lab: Lab, host: str | None, op: str, args: dict[str, Any]) -> Any:
    """Run ``op`` on a control host (None = this machine), not tied to a target."""
    return transport_for(lab, host).call({"op": op, "args": args, "deadline_s": _deadline_s(op, args)})


def _deadline_s(op: str, args: dict[str, Any]) -> float | None:
    """How long ``op`` may take by its own arguments (its spec's deadline); a transport waits that plus a margin."""
    from bench_agent import ops

    spec = ops.spec(op)
    try:
        return spec.deadline_s(args)
    except (TypeError, ValueError):  # a bad value: the operation's own validation names it, wherever it runs
        return None


def _check_lease(target: str) -> None:
    """A target leased by a job is refused to everyone but that job's steps (they carry its token: the fence)."""
    from bench_agent.leases import check_access
    from controller.jobs.backends import lease_store

    check_access(lease_store(), target)
