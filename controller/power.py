"""Power at runtime for the controller's front ends that are not a planned step (MCP server, pytest plugin).

``switch`` runs a target's on/off/cycle hook through ``dispatch.call`` on the
host that owns the target; ``states`` reads the power state of one level or,
with no level, of every level (default first), with the serial sense line as
the fallback: the same reads as ``panio power-state`` (``bench_agent.commands.power``).
"""

from __future__ import annotations

from typing import Any

from controller import dispatch
from controller.lab.model import Lab

VERBS = ("on", "off", "cycle")


def _call(lab: Lab, target: str):
    return lambda op, args: dispatch.call(lab, target, op, args)


def switch(lab: Lab, target: str, verb: str, level: str | None = None) -> dict[str, Any]:
    """Run the ``verb`` hook of ``target`` (at ``level``); the dispatcher says when the outcome is unknown."""
    power = lab.channel(target, "power")
    return dispatch.call(lab, target, f"power.{verb}", {"target": target, "power": power, "level": level})


def states(lab: Lab, target: str, level: str | None = None) -> list[dict[str, Any]]:
    """One state per level: only ``level`` when given, else the default level then each named level."""
    from bench_agent.commands.power import states as read

    return read(_call(lab, target), target, lab.target(target).get("power"), sense_interface(lab, target), level)


def require_on(lab: Lab, target: str, why: str) -> str:
    """The default level's state; raises ``Refused`` when it reads off."""
    from bench_agent.commands.power import require_on as check

    return check(_call(lab, target), target, lab.target(target).get("power"), sense_interface(lab, target), why)


def sense_interface(lab: Lab, target: str) -> dict[str, Any] | None:
    """The first serial interface of ``target`` with a ``power_sense_signal``."""
    return next((dict(i) for i in lab.target(target).get("serial", []) if i.get("power_sense_signal")), None)
