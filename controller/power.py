"""Power at runtime, for every front end (CLI, MCP server, job runner).

``switch`` runs a target's on/off/cycle hook through ``dispatch.call`` on the
host that owns the target; ``states`` reads the power state of one level or,
with no level, of every level (default first). The default level's state
comes from its state hook, else from the serial sense line
(``power_sense_signal`` of an interface, through the ``serial.sense``
operation), else it is unknown.
"""

from __future__ import annotations

from typing import Any

from bench_agent.errors import Refused
from controller import dispatch
from controller.lab.model import Lab

VERBS = ("on", "off", "cycle")


def switch(lab: Lab, target: str, verb: str, level: str | None = None) -> dict[str, Any]:
    """Run the ``verb`` hook of ``target`` (at ``level``); the dispatcher says when the outcome is unknown."""
    power = lab.channel(target, "power")
    return dispatch.call(lab, target, f"power.{verb}", {"target": target, "power": power, "level": level})


def states(lab: Lab, target: str, level: str | None = None) -> list[dict[str, Any]]:
    """One state per level: only ``level`` when given, else the default level then each named level."""
    power = lab.target(target).get("power")
    if level is not None:
        return [_state(lab, target, power, level)]
    names = [None, *((power or {}).get("levels") or {})]
    return [_state(lab, target, power, name) for name in names]


def _state(lab: Lab, target: str, power: dict | None, level: str | None) -> dict[str, Any]:
    st = dispatch.call(lab, target, "power.state", {"target": target, "power": power, "level": level})
    if st["state"] != "unknown" or level is not None:
        return st
    iface = sense_interface(lab, target)
    if iface is None:
        return st
    sense = dispatch.call(lab, target, "serial.sense", {"target": target, "iface": iface})
    return {**st, "state": "on" if sense["asserted"] else "off",
            "source": f"sense {sense.get('signal', iface['power_sense_signal'])} ({iface['name']})"}


def sense_interface(lab: Lab, target: str) -> dict[str, Any] | None:
    """The first serial interface of ``target`` with a ``power_sense_signal``."""
    return next((i for i in lab.target(target).get("serial", []) if i.get("power_sense_signal")), None)


def line(st: dict[str, Any]) -> str:
    """``Power ON (pico)``, ``Power OFF (pico, level hard)``, ``Power UNKNOWN (pico): no state_cmd ...``."""
    where = f"{st['target']}, level {st['level']}" if st.get("level") else st["target"]
    text = f"Power {st['state'].upper()} ({where})"
    if st["state"] == "unknown":
        text += ": no state_cmd" if st.get("level") else ": no state_cmd or power_sense_signal"
    return text


def require_on(lab: Lab, target: str, why: str) -> str:
    """The default level's state; raises ``Refused`` when it reads off."""
    st = states(lab, target)[0]
    if st["state"] == "off":
        raise Refused(f"{target} is powered off; {why}", hint=f"power it on first: `panio power on {target}`",
                      target=target, power="off", source=st.get("source"))
    return st["state"]

