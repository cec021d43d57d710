"""HID operations: ``hid.send`` runs one command on the target's rig; ``hid.serve``/``.stop``/``.status`` its daemon.

Without a daemon, ``hid.send`` opens the rig, runs the command and closes it
(a CH9329 port is opened exclusively: a second sender at the same moment is
refused). With ``hid serve`` running, the daemon holds the rig and every
``hid.send`` goes through it, one command at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_agent.ops import operation
from bench_agent.hid.base import DEFAULT_PACE_MS
from bench_agent.ops.spec import Param

MAX_TYPE_CHARS = 4096
MODULE = "bench_agent.hid.daemon"


def _deadline(args: dict[str, Any]) -> float:
    words = args.get("command") or []
    chars = len(" ".join(map(str, words[1:]))) if words[:1] == ["type"] else 1
    return 10 + chars * 3 * args["pace_ms"] / 1000  # OpSpec.deadline_s fills in the default


def _paths(target: str) -> tuple[Path, Path]:
    from bench_agent.daemons.per_target import state_dir
    from bench_agent.hid.daemon import discovery_path

    state = state_dir()
    return discovery_path(target, state), state / "hid" / target / "daemon.err"


@operation("hid.send", params=(
    Param("command", list, "one HID command as words, e.g. [\"key\", \"ENTER\"], [\"type\", \"root\"], "
          "[\"moveabs\", \"16384\", \"16384\"], [\"click\", \"left\"], [\"scroll\", \"-3\"]"),
    Param("pace_ms", int, "pause between a key's press and release and after it", default=DEFAULT_PACE_MS, unit="ms",
          minimum=1, maximum=1000),
), side_effect=True, deadline=_deadline)
def send(target: str, hid: dict[str, Any], command: list, pace_ms: int = DEFAULT_PACE_MS) -> dict[str, Any]:
    """Inject keyboard or mouse input through the target's HID rig."""
    from bench_agent.daemons import per_target as target_daemons
    from bench_agent.errors import UsageError
    from bench_agent.hid import channel as hidlib

    words = [str(w) for w in command]
    if len(" ".join(words)) > MAX_TYPE_CHARS:
        raise UsageError(f"a HID command is at most {MAX_TYPE_CHARS} characters; split longer text", argument="command")
    out = {"target": target, "protocol": hid.get("protocol") or "ch9329"}
    disc, _ = _paths(target)
    if target_daemons.discovery(MODULE, disc, target) is not None:
        from bench_agent.hid.daemon import request

        return {**out, "via": "daemon",
                **request(target, target_daemons.state_dir(), words, pace_ms, _deadline({"command": words,
                                                                                         "pace_ms": pace_ms}))}
    backend = hidlib.open_backend(hid)
    try:
        done = hidlib.run_words(hidlib.Driver(backend, pace_ms), words)
    finally:
        backend.close()
    return {**out, "via": "direct", **done}


@operation("hid.serve", side_effect=False)
def serve(target: str, hid: dict[str, Any]) -> dict[str, Any]:
    """Start the daemon that holds the target's rig (reaping an untracked one first)."""
    from bench_agent.daemons import per_target as target_daemons

    disc, log = _paths(target)
    st = target_daemons.status(MODULE, disc, target)
    if st["state"] == "running":
        return {**st, "already_running": True, "reaped": []}
    reaped = list(st.get("pids", []))
    target_daemons.reap(reaped, f"untracked HID daemon of {target!r}")
    config = {k: hid.get(k) for k in ("device", "protocol", "baud", "reply_timeout_ms")}
    pid = target_daemons.start(MODULE, target, config, log)
    return {"target": target, "state": "running", "pid": pid, "device": hid["device"], "already_running": False,
            "reaped": reaped}


@operation("hid.stop", side_effect=False)
def stop(target: str) -> dict[str, Any]:
    from bench_agent.daemons import per_target as target_daemons
    from bench_agent.errors import NotRunning

    disc, _ = _paths(target)
    st = target_daemons.status(MODULE, disc, target)
    if st["state"] == "stopped":
        raise NotRunning(f"no HID daemon for {target!r}", hint=f"start one with `panio hid serve {target}`",
                         target=target)
    pids = st.get("pids") or [st["pid"]]
    target_daemons.reap(pids, f"HID daemon of {target!r}")
    disc.unlink(missing_ok=True)
    return {"target": target, "pids": pids, "stopped": True}


@operation("hid.status")
def status(target: str) -> dict[str, Any]:
    from bench_agent.daemons import per_target as target_daemons

    return target_daemons.status(MODULE, _paths(target)[0], target)
