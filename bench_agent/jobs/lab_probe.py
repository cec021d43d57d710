"""Before a failed step is blamed on the board, ask the lab: is the target powered, is its serial capture
running and its port open, does its host answer?

A plug switched off mid-job makes the next console step time out; without
this the job would end ``complete, failed`` and a suite would say "the board
failed". Each question is a read-only panio command run like a step (so it goes
wherever the target's channels live); a question the lab cannot answer is no
fault. A target the job itself switched off (its last power step was
``power off``) is expected to be off.
"""

from __future__ import annotations

import json
import subprocess
import tomllib

PROBE_TIMEOUT_S = 20.0


def _run(panio: list[str], env: dict, argv: list[str]) -> tuple[int | None, str, str]:
    try:
        p = subprocess.run([*panio, *argv], capture_output=True, text=True, env=env, timeout=PROBE_TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, "", str(exc)
    return p.returncode, p.stdout, p.stderr


def _message(stderr: str) -> str:
    for line in reversed(stderr.strip().splitlines()):
        try:
            return json.loads(line).get("message", line)
        except ValueError:
            continue
    return stderr.strip()[-200:] or "no answer"


def expects_off(steps: list[dict], upto: int) -> bool:
    """Did the job's own last power step before ``upto`` switch the target off?"""
    last = None
    for step in steps[:upto]:
        argv = step["argv"]
        if argv[:2] == ["power", "off"] or argv[:2] == ["power", "on"] or argv[:1] == ["power-cycle"]:
            last = argv[:2]
    return last == ["power", "off"]


def faults(panio: list[str], env: dict, target: str, target_config: dict, used_serial: bool,
           expect_off: bool) -> list[dict]:
    """The lab's faults right now, each ``{"what", "message", "error", "exit"}``; empty when the lab looks fine."""
    out = []
    code, _, err = _run(panio, env, ["ping", target])
    if code != 0:
        return [{"what": "host", "message": f"the target's host does not answer: {_message(err)}",
                 "error": "unreachable", "exit": 4}]
    if target_config.get("power") or any(i.get("power_sense_signal") for i in target_config.get("serial", [])):
        out += _power(panio, env, target, expect_off)
    if used_serial:
        for iface in target_config.get("serial", []):
            out += _capture(panio, env, target, iface["name"])
    return out


def _power(panio: list[str], env: dict, target: str, expect_off: bool) -> list[dict]:
    code, stdout, err = _run(panio, env, ["power-state", target, "--json"])
    if code != 0:
        return [{"what": "power", "message": f"the target's power state cannot be read: {_message(err)}",
                 "error": "unreachable", "exit": code or 4}]
    state = json.loads(stdout)[0]
    if state["state"] == "off" and not expect_off:
        return [{"what": "power", "message": f"the target is powered off ({state.get('source') or 'state_cmd'})",
                 "error": "unreachable", "exit": 4}]
    return []


def _capture(panio: list[str], env: dict, target: str, iface: str) -> list[dict]:
    code, stdout, err = _run(panio, env, ["serial", "status", target, "-i", iface])
    if code == 10:
        return [{"what": "capture", "message": f"no serial capture runs for {target}/{iface} "
                 f"(start it: `panio serial watch {target}`)", "error": "not_running", "exit": 10}]
    try:
        port = json.loads(stdout)["port"]
    except (ValueError, KeyError):
        return []
    if code == 0 and port.get("state") == "disconnected":
        return [{"what": "capture", "message": f"the serial port of {target}/{iface} is disconnected "
                 f"({port.get('last_error')})", "error": "unreachable", "exit": 4}]
    return []


def target_config(payload: dict, lab_path: str) -> dict:
    """The target's table: from the payload (a worker), else from the lab file."""
    if payload.get("target_config"):
        return payload["target_config"]
    try:
        with open(lab_path, "rb") as f:
            return tomllib.load(f).get("targets", {}).get(payload["target"], {})
    except (OSError, tomllib.TOMLDecodeError):
        return {}
