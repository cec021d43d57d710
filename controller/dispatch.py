"""The one road to a transport: a ``Dispatcher`` per lab (httpx's ``Client(transport=...)``).

Every runtime command (CLI, MCP server through its CLI children, job steps)
reaches an operation through ``Dispatcher.call``, which, in this order:

1. checks the arguments against the operation's spec (``bench_agent.ops.spec``),
   so a bad value is a usage error before anything travels;
2. checks the lease, for side effects only: reads (``serial log``,
   ``power-state``...) pass while another holder leases the target, side
   effects are refused naming the holder (a job's own steps carry its token);
3. sends ``{"op", "args", "deadline_s"}`` (the deadline from the spec; ``args``
   with the lab's key, so the host keeps each lab's targets apart) to the
   target's host's transport, through ``interactive`` for a byte stream;
4. translates errors once: a side effect that failed as ``unreachable`` or
   ``timeout`` says its outcome is unknown, and anything that is not a
   ``PanioError`` becomes one.

The transport is picked per host (this machine: in-process; ``transport =
"celery"``: the host's worker; else SSH), or given (``Dispatcher(lab,
transport=StubTransport(handler))`` in tests). Connections are kept for the
dispatcher's life, so ``panio ping -c 10`` pays for one SSH set-up.
"""

from __future__ import annotations

import os

from bench_agent.errors import InternalError, PanioError, Timeout, Unreachable, mark_outcome_unknown
from bench_agent.jobs import OVERRIDE_ENV, TOKEN_ENV  # names alone: the package imports nothing
from bench_agent.paths import LAB_ARG  # imports os alone

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    from typing import Any

    from controller.lab.model import Lab
    from controller.transport import Transport


OWNER: Any = object()  # ``Dispatcher.call``'s default host: the one the lab gives the target


class Dispatcher:
    def __init__(self, lab: Lab | None, *, transport: Transport | None = None, leases: Any = None,
                 token: str | None = None) -> None:
        self.lab = lab
        self.token = token  # a job's lease credential (TOKEN:SECRET), presented with every call (else $PANIO_LEASE_TOKEN)
        self._given = transport
        self._leases = leases  # a LeaseStore; None: the environment's (controller.backends)
        self._open: dict[str | None, Transport] = {}
        self._key: str | None = None

    @property
    def lab_key(self) -> str | None:
        """The lab's key (``Lab.key``), worked out once per dispatcher; None without a lab."""
        if self._key is None and self.lab is not None:
            self._key = self.lab.key
        return self._key

    # --- the road ----------------------------------------------------------

    def call(self, target: str, op: str, args: dict[str, Any], host: Any = OWNER) -> Any:
        """Run ``op`` for ``target`` on the host that owns it (``host`` overrides it, as an action's own host)."""
        if host is OWNER:
            host = self.lab.target(target).get("host") if self.lab is not None else None
        return self._send(host, op, args, target)

    def call_host(self, host: str | None, op: str, args: dict[str, Any]) -> Any:
        """Run ``op`` on a control host (None = this machine), not tied to a target: no lease applies."""
        return self._send(host, op, args, None)

    def _send(self, host: str | None, op: str, args: dict[str, Any], target: str | None) -> Any:
        from bench_agent import ops

        spec = ops.spec(op)
        here = self._host_checks_the_same_store(host)  # this process is the host, with the same lease store
        if here:
            deadline_s = None  # ``ops.call`` validates the arguments (once); the local transport has no deadline
        else:
            args = spec.validate(args)
            deadline_s = spec.deadline_s(args)
        if target is not None:
            if spec.side_effect and not here and not _overriding():
                self._check_lease(target)  # an operator's override is decided by the host (lease_override)
            args = self._with_token(args)  # the host checks it again: a job's steps present their lease
        if self.lab is not None:  # the host keeps the target's state (captures, logs, leases) per lab
            args = {**args, LAB_ARG: self.lab_key}
        request = {"op": op, "args": args, "deadline_s": deadline_s}
        transport = self.transport_for(host)
        try:
            return transport.interactive(request) if spec.interactive else transport.call(request)
        except (Unreachable, Timeout) as err:
            if spec.outcome_unknown_on_failure:
                mark_outcome_unknown(err, op, target, args)
            raise
        except PanioError:
            raise
        except Exception as exc:  # noqa: BLE001 - the one place a transport's stray exception is translated
            raise InternalError(f"{op}: {type(exc).__name__}: {exc}",
                                hint="this is a bug in panio; rerun with PANIO_DEBUG=1") from exc

    def _host_checks_the_same_store(self, host: str | None) -> bool:
        """In-process with the environment's lease store, the host's own check (``bench_agent.ops.call``: the
        environment's store, the recorded ones and the file leases) covers this one: one Redis round trip per
        side effect, not two (benchmarks/dispatch.py counts them)."""
        return host is None and self._given is None and self._leases is None

    def _lease_store(self) -> Any:
        if self._leases is None:
            from controller.backends import lease_store

            self._leases = lease_store(self.lab_key)
        return self._leases

    def _check_lease(self, target: str) -> None:
        from bench_agent.leases.base import check_access

        check_access(self._lease_store(), target, self.token)

    def _with_token(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.token is None and not os.environ.get(TOKEN_ENV) and not _overriding():
            return args
        from bench_agent.leases.guard import with_token

        return with_token(args, self._lease_store(), self.token)

    # --- transports ----------------------------------------------------------

    def transport_for(self, host: str | None) -> Transport:
        """The transport for ``host`` (None = this machine), opened once per dispatcher."""
        if self._given is not None:
            return self._given
        if host not in self._open:
            self._open[host] = self._open_transport(host)
        return self._open[host]

    def _open_transport(self, host: str | None) -> Transport:
        if host is None:
            from controller.transports.local import LocalTransport

            return LocalTransport()
        config = self.lab.host(host)  # fails helpfully if the host is unknown
        if config.get("transport") == "celery":
            from controller.transports.celery import CeleryTransport

            return CeleryTransport(host)
        from controller.transports.ssh import SSHTransport

        return SSHTransport(host, config)

    def close(self) -> None:
        for transport in self._open.values():
            transport.close()
        self._open.clear()

    def __enter__(self) -> "Dispatcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# One dispatcher per lab in a process: a CLI command builds one lab, so its
# calls share connections. Not a registry of globals to clear: tests build
# their own ``Dispatcher``.
_CURRENT: Dispatcher | None = None


def for_lab(lab: Lab | None) -> Dispatcher:
    global _CURRENT
    if _CURRENT is None or _CURRENT.lab is not lab:
        _CURRENT = Dispatcher(lab)
    return _CURRENT


def close_current() -> None:
    """Close the current dispatcher's connections (a process that runs many commands, the MCP server,
    after each one: the next command reads the lab again)."""
    global _CURRENT
    current, _CURRENT = _CURRENT, None
    if current is not None:
        current.close()


def call(lab: Lab, target: str, op: str, args: dict[str, Any]) -> Any:
    """``for_lab(lab).call(...)``: what the CLI's command modules use."""
    return for_lab(lab).call(target, op, args)


def call_host(lab: Lab | None, host: str | None, op: str, args: dict[str, Any]) -> Any:
    return for_lab(lab).call_host(host, op, args)


def _overriding() -> bool:
    """An operator's ``--override`` is under way in this process (``controller.jobs.overrides``)."""
    return bool(os.environ.get(OVERRIDE_ENV))
