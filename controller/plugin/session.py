"""The plugin's test session: which targets, their leases, and the captures it started.

A target is leased the first time a test asks for it and held until the
session ends (renewed in the background, like a job's), so no job and no
other session touches the board in between; ``panio lease list`` names the
holder (``pytest@HOST:PID``, or ``pytest-gw0@HOST:PID`` for an xdist worker,
which is a session of its own). If the plugin had to start a target's serial
capture, or its video capture (on a test's first look at the screen), it stops
it again at the end; a capture that was already running is left running.

Selectors (``--panio-targets``): ``tag:pi5`` is every target carrying tag
pi5, ``tag:pi5,tag:usb`` every target carrying both (a job's ``tags``),
``pico,dut`` those targets, ``*`` every target in the lab.
"""

from __future__ import annotations

from typing import Any

from bench_agent.errors import NotConfigured, UsageError
from controller.plugin.handles import PanioTarget

LEASE_TTL_S = 30.0


def select(lab: Any, selector: str) -> list[str]:
    """The targets ``selector`` names, in the lab's order; ``NotConfigured`` when none match."""
    terms = [t.strip() for t in selector.split(",") if t.strip()]
    if not terms:
        raise UsageError("--panio-targets needs a selector: tag:TAG[,tag:TAG...], NAME[,NAME...] or '*'")
    if terms == ["*"]:
        names = list(lab.targets)
    elif all(t.startswith("tag:") for t in terms):
        tags = {t[len("tag:"):] for t in terms}
        names = [n for n, t in lab.targets.items() if tags <= set(t.get("tags", []))]
    elif any(t.startswith("tag:") or t == "*" for t in terms):
        raise UsageError(f"--panio-targets {selector!r} mixes tags and names",
                         hint="use tag:A,tag:B (targets carrying all those tags) or NAME,NAME")
    else:
        for name in terms:
            lab.target(name)  # NotConfigured with a did-you-mean
        names = terms
    if not names:
        raise NotConfigured(f"no target in {lab.path} matches {selector!r}",
                            hint="tag one with `panio target set NAME --tag TAG`", selector=selector)
    return names


class PluginSession:
    """The targets of one pytest run and the leases it holds on them."""

    def __init__(self, lab_path: str, names: list[str], lease_wait_s: float, watch: bool = True,
                 holder: str = "pytest") -> None:
        from controller.lab import load

        from bench_agent.paths import set_process_lab

        self.lab = load(lab_path)
        set_process_lab(self.lab.key)  # the session's process works for this lab (its leases, as `lease_store()`)
        for name in names:
            self.lab.target(name)
        self.names, self.lease_wait_s, self.watch, self.holder = names, lease_wait_s, watch, holder
        self._targets: dict[str, PanioTarget] = {}
        self._leases: dict[str, Any] = {}
        self._started_capture: list[PanioTarget] = []

    def target(self, name: str) -> PanioTarget:
        """``name`` leased (waiting up to ``lease_wait_s`` for it) with capture running; once per session."""
        if name not in self._targets:
            lease = self._lease(name)
            target = PanioTarget(self.lab, name, lease.token, lease.credential)
            self._targets[name] = target
            if self.watch and target.serial.interfaces:
                if not target.serial.running():
                    self._started_capture.append(target)
                target.serial.watch()
        return self._targets[name]

    def unhealthy(self, name: str) -> str | None:
        """How ``name``'s health reads when it is ``bad`` or in ``maintenance`` (jobs wait or skip), else None."""
        from bench_agent.health import state as health
        from controller.backends import results_url

        record = health.HealthStore(results_url()).get(name)
        return health.describe(record) if record["health"] in health.BLOCKING else None

    def _lease(self, name: str) -> Any:
        from bench_agent.leases import base as leases
        from controller.backends import lease_store

        info = {"holder": leases.holder_name(self.holder), "name": "pytest session"}
        lease = leases.acquire(lease_store(self.lab.key), name, info, LEASE_TTL_S, self.lease_wait_s)
        lease.keep(LEASE_TTL_S)
        self._leases[name] = lease
        return lease

    def close(self) -> None:
        """Stop the captures this session started, then give every lease back."""
        from bench_agent.errors import PanioError

        stops = [t.serial.stop for t in self._started_capture]
        stops += [t.video.stop for t in self._targets.values() if t.video.started]
        for stop in stops:
            try:
                stop()
            except PanioError:
                pass  # already stopped (a test did), or the host is gone: the lease goes back regardless
        for lease in self._leases.values():
            lease.release()
        self._leases.clear()
