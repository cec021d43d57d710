"""Check a target's configuration against the hardware actually present on this host."""

from __future__ import annotations

import os
import shutil
from typing import Any

from bench_agent import inventory, shellwords

OK, MISSING, PROBLEM, UNCHECKED = "ok", "missing", "problem", "unchecked"


def _row(channel: str, item: str, status: str, detail: str) -> dict[str, str]:
    return {"channel": channel, "item": item, "status": status, "detail": detail}


def _device(channel: str, item: str, device: str) -> dict[str, str]:
    if device.startswith("adb:"):  # an Android target's console, screen or input: one device, adb's row says
        return _adb(device.removeprefix("adb:").removeprefix("//").partition("?")[0], channel, item)
    if "://" in device:
        return _row(channel, item, UNCHECKED, f"{device} is a network URL; not probed")
    path = os.path.expanduser(device)
    if os.path.exists(path):
        return _row(channel, item, OK, f"{device} present")
    return _row(channel, item, MISSING, f"{device} not found on this host (see `panio discover`)")


def _command(channel: str, item: str, command: str) -> dict[str, str]:
    try:
        argv = shellwords.split(command)
    except ValueError as exc:
        return _row(channel, item, PROBLEM, f"cannot parse {command!r}: {exc}")
    exe = os.path.expanduser(argv[0]) if argv else ""
    found = shutil.which(exe) if os.sep not in exe else (exe if os.access(exe, os.X_OK) else None)
    if found:
        return _row(channel, item, OK, f"{argv[0]} found ({found})")
    return _row(channel, item, MISSING, f"{argv[0]} not found or not executable")


def _netboot(nb: dict[str, Any], tftp_root: str) -> list[dict[str, str]]:
    from bench_agent.netboot.channel import doctor_rows  # the link, the TFTP root, the server

    return [_row("netboot", item, status, detail) for item, status, detail in doctor_rows(nb, tftp_root)]


def _adb(serial: str, channel: str = "adb", item: str = "serial") -> dict[str, str]:
    devices = inventory.adb_devices()
    if devices is None:
        return _row(channel, item, MISSING, "adb is not installed on this host (`apt-get install adb`; docs/adb.md)")
    state = next((d["state"] for d in devices if d["serial"] == serial), None)
    if state == "device":
        return _row(channel, item, OK, f"adb {serial} attached")
    if state == "unauthorized":
        return _row(channel, item, PROBLEM, f"adb {serial} is unauthorized: accept \"Allow USB debugging\" on it")
    if state is not None:
        return _row(channel, item, PROBLEM, f"adb {serial} is {state}")
    if ":" in serial:
        return _row(channel, item, UNCHECKED, f"adb {serial} not connected yet (panio runs `adb connect` on use)")
    return _row(channel, item, MISSING, f"adb {serial} not in `adb devices`")


def check(config: dict[str, Any], tftp_root: str | None = None) -> list[dict[str, str]]:
    """One row per configured item: channel, item, status (ok/missing/problem/unchecked), detail."""
    rows = [_device("serial", i["name"], i["device"]) for i in config.get("serial", [])]
    if "netboot" in config:
        rows += _netboot(config["netboot"], tftp_root or "")
    for kind in ("video", "hid"):
        if kind in config:
            rows.append(_device(kind, "device", config[kind]["device"]))
    if "adb" in config:
        rows.append(_adb(config["adb"]["serial"]))
    power = config.get("power", {})
    levels = [("", power)] + [(f"{n}.", lv) for n, lv in power.get("levels", {}).items()]
    for prefix, hooks in levels:
        for key in ("on_cmd", "off_cmd", "cycle_cmd", "state_cmd"):
            if key in hooks:
                rows.append(_command("power", prefix + key, hooks[key]))
    for name, action in config.get("actions", {}).items():
        rows.append(_command("action", name, action["command"]))
    return rows


UNIT = "panio-worker.service"
DEVICE_GROUPS = ("dialout", "plugdev", "video")


def host_rows(version: str, groups: list | None = None) -> list[dict[str, str]]:
    """The host-level rows of `panio doctor --host`: version, worker unit, device groups."""
    return [_version_row(version), _unit_row(), *_group_rows(groups or list(DEVICE_GROUPS))]


def _version_row(version: str) -> dict[str, str]:
    from importlib import metadata

    try:
        here = metadata.version("panio")
    except metadata.PackageNotFoundError:
        here = "unknown"
    if here == version:
        return _row("host", "panio", OK, f"{here}, as on the controller")
    return _row("host", "panio", PROBLEM, f"{here} here, {version} on the controller: run `panio setup --code-only`")


def _unit_row() -> dict[str, str]:
    import subprocess

    system, user = f"/etc/systemd/system/{UNIT}", os.path.expanduser(f"~/.config/systemd/user/{UNIT}")
    path = next((p for p in (system, user) if os.path.exists(p)), None)
    if path is None:
        return _row("host", "worker", MISSING, f"no {UNIT} (install it with `panio setup --host NAME`)")
    if not os.path.isdir("/run/systemd/system"):
        return _row("host", "worker", UNCHECKED, f"{path} installed; systemd does not run here, so not checked")
    scope = [] if path == system else ["--user"]
    state = subprocess.run(["systemctl", *scope, "is-active", UNIT], capture_output=True, text=True).stdout.strip()
    status = OK if state == "active" else PROBLEM
    return _row("host", "worker", status, f"{UNIT} is {state or 'unknown'} ({path})")


def _group_rows(groups: list[str]) -> list[dict[str, str]]:
    import grp

    mine = {grp.getgrgid(g).gr_name for g in os.getgroups()}
    rows = []
    for name in groups:
        try:
            grp.getgrnam(name)
        except KeyError:
            rows.append(_row("host", f"group {name}", MISSING, f"no group {name} on this host"))
            continue
        ok = name in mine or os.geteuid() == 0
        rows.append(_row("host", f"group {name}", OK if ok else PROBLEM,
                         "this user is a member" if ok else f"this user is not in {name}: `panio setup` adds it"))
    return rows
