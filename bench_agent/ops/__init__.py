"""The registry of named operations: every runtime capability of a control host.

An operation is a plain function registered by name (``serial.send``,
``power.cycle``). It takes plain-data keyword arguments — the channel's
configuration from the lab file, never the lab file itself, plus the request's
own arguments — and returns JSON-able data or raises a ``PanioError``. So the
same call crosses SSH and Celery as JSON, with no pickling.

Each operation is registered with its ``OpSpec`` (``bench_agent.ops.spec``):
its parameters, whether it changes the target, whether it is interactive, its
deadline. ``call`` validates a request against the spec before running it, so
every road in (in-process, SSH agent, Celery task) checks the same bounds.

Operations live in ``bench_agent/ops/<group>.py`` and are imported lazily on
first use of their group, so a process pays only for what it calls.
"""

from __future__ import annotations

from bench_agent.errors import UsageError
from bench_agent.jobs import ORIGIN_ARG, OVERRIDE_ARG, TOKEN_ARG  # a few names: the package imports nothing
from bench_agent.paths import LAB_ARG, using_lab  # imports os alone
from bench_agent.ops.spec import OpSpec, Param

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable

    Operation = Callable[..., Any]
REGISTRY: dict[str, Operation] = {}
SPECS: dict[str, OpSpec] = {}


def operation(name: str, *, params: tuple[Param, ...] = (), side_effect: bool = False, interactive: bool = False,
              deadline: Callable[[dict[str, Any]], float | None] | None = None,
              unknown_on_failure: bool | None = None, needs: dict[str, str] | None = None,
              exclusive: tuple[str, ...] = (), **extra: Any) -> Callable[[Operation], Operation]:
    """Register ``func`` under ``name`` (``<group>.<verb>``) with its spec (see ``bench_agent.ops.spec``)."""

    def register(func: Operation) -> Operation:
        if name in REGISTRY and REGISTRY[name] is not func:
            raise RuntimeError(f"operation {name!r} registered twice")
        summary = (func.__doc__ or "").strip().splitlines()[0] if func.__doc__ else ""
        REGISTRY[name] = func
        SPECS[name] = OpSpec(name, tuple(params), side_effect, interactive, deadline, unknown_on_failure,
                             summary, extra, dict(needs or {}), tuple(exclusive))
        return func

    return register


def spec(name: str) -> OpSpec:
    """The spec of operation ``name`` (its group imported on first use)."""
    lookup(name)
    return SPECS[name]


def lookup(name: str) -> Operation:
    if name not in REGISTRY:
        group = name.split(".", 1)[0]
        if not group.isidentifier():
            raise UsageError(f"unknown operation {name!r}")
        try:
            __import__(f"bench_agent.ops.{group}")  # not importlib: one more start-up import
        except ModuleNotFoundError as exc:
            if exc.name != f"bench_agent.ops.{group}":
                raise
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown operation {name!r}") from None


def call(name: str, args: dict[str, Any]) -> Any:
    """Run operation ``name`` in this process, its arguments checked against its spec first.

    Every road in ends here, so this is where the host enforces leases: an operation that changes
    a target is refused while someone else leases it, and a stale ``lease_token`` is refused even
    while the target is free (``bench_agent.leases.guard``). Reads pass.

    In a ``panio worker`` (requests from the broker) the host's own configuration is installed, and
    every request's target and configuration are checked against it first
    (``bench_agent.jobs.host_config``): commands never come from a message.

    The request's ``lab_key`` (``bench_agent.paths.LAB_ARG``) is the caller's lab for the call: the
    target's state (captures, logs, leases) is that lab's (``bench_agent.paths.lab_state_dir``).
    """
    func = REGISTRY.get(name) or lookup(name)
    args = dict(args)
    token, origin, override = args.pop(TOKEN_ARG, None), args.pop(ORIGIN_ARG, None), args.pop(OVERRIDE_ARG, None)
    lab = args.pop(LAB_ARG, None)
    if lab is None:
        return _run(name, func, args, token, origin, override)
    with using_lab(lab):
        return _run(name, func, args, token, origin, override)


def _run(name: str, func: Operation, args: dict[str, Any], token: Any, origin: Any, override: Any) -> Any:
    checked = SPECS[name].validate(args)
    host = _installed_host()
    if host is not None:
        code = func.__code__
        taken = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        checked = host.enforce(name, checked, {p.name for p in SPECS[name].params}, taken)
    if SPECS[name].side_effect:
        from bench_agent.leases import guard as lease_guard

        lease_guard.enforce(name, checked, token, origin, override)
    return func(**checked)


def _installed_host() -> Any:
    """The worker's installed host configuration, or None. A worker imports and fills
    ``bench_agent.jobs.host_config`` before its first request, so a process that never imported it has
    none, and a reading command need not import it to learn so."""
    import sys

    module = sys.modules.get("bench_agent.jobs.host_config")
    return None if module is None else module.installed()
