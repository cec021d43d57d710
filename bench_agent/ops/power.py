"""Power operations: run a target's power hooks (power.on, .off, .cycle, .state).

Each takes the target's whole ``power`` table from the lab file (plain data)
and an optional level name. A level is self-contained for hooks: a level
without the needed hook fails as ``not_configured`` and never falls back to
the default level's hook. Only the settings ``timeout_s`` and ``cycle_off_s``
are inherited from the default level when a level does not set them.

State hook protocol: the first word of stdout is ``on`` or ``off`` (also
``1``/``0``, ``true``/``false``, any case) and the exit status is 0. Anything
else is a hook failure.
"""

from __future__ import annotations

import time
from typing import Any

from bench_agent import hooks
from bench_agent.errors import HookFailed, NotConfigured
from bench_agent.ops import operation
from bench_agent.ops.spec import Param

DEFAULT_CYCLE_OFF_S = 2.0
SETTINGS = ("timeout_s", "cycle_off_s")
ON_WORDS, OFF_WORDS = ("on", "1", "true"), ("off", "0", "false")


def level_config(target: str, power: dict[str, Any] | None, level: str | None) -> dict[str, Any]:
    """The hooks and settings of ``level`` (None = the default level)."""
    power = power or {}
    if level is None:
        return {k: v for k, v in power.items() if k != "levels"}
    levels = power.get("levels", {})
    if level not in levels:
        known = ", ".join(levels) or "none"
        raise NotConfigured(f"target {target!r} has no power level {level!r} (levels: {known})",
                            hint=f"add it with `panio power set -t {target} --level {level} ...`",
                            target=target, level=level)
    inherited = {k: power[k] for k in SETTINGS if k in power}
    return {**inherited, **levels[level]}


def _hook_s(args: dict[str, Any]) -> float:
    conf = _level_or_default(args)
    return float(conf.get("timeout_s") or hooks.DEFAULT_TIMEOUT_S)


def _level_or_default(args: dict[str, Any]) -> dict[str, Any]:
    power, level = args.get("power") or {}, args.get("level")
    try:
        return level_config(args.get("target", ""), power, level)
    except NotConfigured:  # the call itself fails at once; its deadline does not matter
        return {}


def _cycle_s(args: dict[str, Any]) -> float:
    """The slowest cycle: off and on hooks at their own timeouts plus the pause between them."""
    return 2 * _hook_s(args) + float(_level_or_default(args).get("cycle_off_s", DEFAULT_CYCLE_OFF_S))


LEVEL = Param("level", str, "a named power level (e.g. hard); it never falls back to the default level's hooks",
              default=None)
POWER = Param("power", dict, "the target's [power] table from the lab file", default=None)
SWITCH = dict(params=(POWER, LEVEL), side_effect=True, deadline=_hook_s)


def where(target: str, level: str | None) -> str:
    return f"{target}, level {level}" if level else target


def _hook(target: str, conf: dict[str, Any], level: str | None, key: str) -> str:
    cmd = conf.get(key)
    if not cmd:
        flag = "--" + key.replace("_", "-")
        lvl = f" --level {level}" if level else ""
        raise NotConfigured(f"no {key} for power of {where(target, level)}",
                            hint=f"set it with `panio power set -t {target}{lvl} {flag} CMD`",
                            target=target, level=level, hook=key)
    return cmd


def _run(target: str, conf: dict[str, Any], level: str | None, key: str, action: str) -> hooks.HookResult:
    env = {"PANIO_TARGET": target, "PANIO_POWER_LEVEL": level or "default", "PANIO_POWER_ACTION": action}
    return hooks.run(_hook(target, conf, level, key), name=f"{key} of {where(target, level)}",
                     timeout_s=conf.get("timeout_s"), env=env)


def _switch(target: str, power: dict | None, level: str | None, key: str, action: str) -> dict[str, Any]:
    conf = level_config(target, power, level)
    _run(target, conf, level, key, action)
    return {"target": target, "level": level, "action": action, "via": [key]}


@operation("power.on", **SWITCH, destructive=False, idempotent=True)
def on(target: str, power: dict | None = None, level: str | None = None) -> dict[str, Any]:
    return _switch(target, power, level, "on_cmd", "on")


@operation("power.off", **SWITCH, destructive=True, idempotent=True)
def off(target: str, power: dict | None = None, level: str | None = None) -> dict[str, Any]:
    return _switch(target, power, level, "off_cmd", "off")


@operation("power.cycle", params=(POWER, LEVEL), side_effect=True, deadline=_cycle_s, destructive=True)
def cycle(target: str, power: dict | None = None, level: str | None = None) -> dict[str, Any]:
    """The cycle hook; without one: off, a pause of ``cycle_off_s``, on."""
    conf = level_config(target, power, level)
    out = {"target": target, "level": level, "action": "cycle"}
    if conf.get("cycle_cmd"):
        _run(target, conf, level, "cycle_cmd", "cycle")
        return {**out, "via": ["cycle_cmd"]}
    if not (conf.get("on_cmd") and conf.get("off_cmd")):
        lvl = f" --level {level}" if level else ""
        raise NotConfigured(f"no cycle_cmd (nor both on_cmd and off_cmd) for power of {where(target, level)}",
                            hint=f"set one with `panio power set -t {target}{lvl} --cycle-cmd CMD`",
                            target=target, level=level, hook="cycle_cmd")
    off_s = float(conf.get("cycle_off_s", DEFAULT_CYCLE_OFF_S))
    _run(target, conf, level, "off_cmd", "cycle")
    time.sleep(off_s)
    _run(target, conf, level, "on_cmd", "cycle")
    return {**out, "via": ["off_cmd", "on_cmd"], "off_s": off_s}


@operation("power.state", params=(POWER, LEVEL), deadline=_hook_s)
def state(target: str, power: dict | None = None, level: str | None = None) -> dict[str, Any]:
    """``{"state": "on"|"off"|"unknown", "source": "state_cmd"|None}`` from the level's state hook."""
    conf = level_config(target, power, level)
    out = {"target": target, "level": level}
    if not conf.get("state_cmd"):
        return {**out, "state": "unknown", "source": None}
    result = _run(target, conf, level, "state_cmd", "state")
    words = result.stdout.split()
    word = words[0].lower() if words else ""
    if word not in ON_WORDS + OFF_WORDS:
        raise HookFailed(f"state_cmd of {where(target, level)} printed {result.stdout.strip()[:80]!r}; "
                         "expected `on` or `off`", hint="see the state hook protocol in docs/power.md",
                         target=target, level=level, hook="state_cmd")
    return {**out, "state": "on" if word in ON_WORDS else "off", "source": "state_cmd"}
