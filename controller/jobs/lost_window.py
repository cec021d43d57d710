"""A dead runner's serial window, read by the controller over the target's transport
(``bench_agent.jobs.lost_window``: what the window is, and who keeps it)."""

from __future__ import annotations

from collections.abc import Callable

from bench_agent.errors import PanioError
from bench_agent.jobs import lost_window


def capture_window(lab, job: dict, tail: int | None = None) -> dict[str, str]:
    """``lost_window.capture_window`` of ``job``'s target, read from the host that owns it."""
    from controller import dispatch

    try:
        config = lab.target(job["target"])
    except PanioError:
        return {}

    def read(iface: dict, args: dict) -> dict:
        return dispatch.call_host(lab, config.get("host"), "serial.log", {"target": job["target"], "iface": iface,
                                                                          **args})

    return lost_window.capture_window(job, config.get("serial", []), read, tail)


def keeper(store, load_lab: Callable[[], object] | None = None) -> Callable[[int], None]:
    """A controller's reconciler's ``on_lost``: keep a lost job's capture window. ``load_lab``: the lab whose hosts
    own the targets (None: the lab file panio finds, as the CLI does)."""
    return lost_window.keeper(store, lambda job: capture_window((load_lab or _default_lab)(), job))


def _default_lab():
    from controller.lab.store import load
    from controller.paths import resolve_lab_path

    return load(resolve_lab_path(None)[0])
