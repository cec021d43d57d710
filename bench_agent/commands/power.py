"""The bodies of ``panio power on|off``, ``power-cycle`` and ``power-state``, and the power reads they share.

``opts``: ``target``, ``power`` (the target's power table, or None), ``sense``
(the first serial interface with a ``power_sense_signal``, or None), ``level``
and ``json``. ``states`` and ``require_on`` are what the CLI's actions, the MCP
server and the pytest plugin read power with, through their own ``call``.
"""

from __future__ import annotations

from typing import Any

from bench_agent.commands import Call, Output, command, fields, items
from bench_agent.errors import Refused

DONE = {"on": "switched on", "off": "switched off", "cycle": "power-cycled"}
STATE = items(fields({
    "target": ("string", "the target"),
    "level": ("string|null", "the power level (null: the default, listed first; then each named level)"),
    "state": ("string", "on, off or unknown (no state_cmd, no sense line)"),
    "source": ("string|null", "what told: state_cmd, or the sense line (`sense CTS (console)`)"),
}))


def states(call: Call, target: str, power: dict | None, sense: dict | None, level: str | None = None) -> list[dict]:
    """One state per level: only ``level`` when given, else the default level then each named level."""
    if level is not None:
        return [_state(call, target, power, sense, level)]
    names = [None, *((power or {}).get("levels") or {})]
    return [_state(call, target, power, sense, name) for name in names]


def default_state(call: Call, target: str, power: dict | None, sense: dict | None) -> dict[str, Any]:
    """The default level's state only (what the lab probe and the power watch of a job step read)."""
    return _state(call, target, power, sense, None)


def _state(call: Call, target: str, power: dict | None, sense: dict | None, level: str | None) -> dict[str, Any]:
    st = call("power.state", {"target": target, "power": power, "level": level})
    if st["state"] != "unknown" or level is not None or sense is None:
        return st
    got = call("serial.sense", {"target": target, "iface": sense})
    return {**st, "state": "on" if got["asserted"] else "off",
            "source": f"sense {got.get('signal', sense['power_sense_signal'])} ({sense['name']})"}


def require_on(call: Call, target: str, power: dict | None, sense: dict | None, why: str) -> str:
    """The default level's state; raises ``Refused`` when it reads off."""
    st = states(call, target, power, sense)[0]
    if st["state"] == "off":
        raise Refused(f"{target} is powered off; {why}", hint=f"power it on first: `panio power on {target}`",
                      target=target, power="off", source=st.get("source"))
    return st["state"]


def line(st: dict[str, Any]) -> str:
    """``Power ON (pico)``, ``Power OFF (pico, level hard)``, ``Power UNKNOWN (pico): no state_cmd ...``."""
    where = f"{st['target']}, level {st['level']}" if st.get("level") else st["target"]
    text = f"Power {st['state'].upper()} ({where})"
    if st["state"] == "unknown":
        text += ": no state_cmd" if st.get("level") else ": no state_cmd or power_sense_signal"
    return text


def _switch(verb: str, call: Call, opts: dict, out: Output) -> None:
    target, level = opts["target"], opts.get("level")
    result = call(f"power.{verb}", {"target": target, "power": opts["power"], "level": level})
    where = f"{target}, level {level}" if level else target
    out.say(f"{where}: {DONE[verb]} ({' then '.join(result['via'])})")


@command("power.on")
def on(call: Call, opts: dict, out: Output, context: dict) -> None:
    _switch("on", call, opts, out)


@command("power.off")
def off(call: Call, opts: dict, out: Output, context: dict) -> None:
    _switch("off", call, opts, out)


@command("power.cycle")
def cycle(call: Call, opts: dict, out: Output, context: dict) -> None:
    _switch("cycle", call, opts, out)


@command("power.state", output=STATE)
def state(call: Call, opts: dict, out: Output, context: dict) -> None:
    found = states(call, opts["target"], opts.get("power"), opts.get("sense"), opts.get("level"))
    if opts.get("json"):
        out.json(found)
        return
    for st in found:
        out.say(line(st))
