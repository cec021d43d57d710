"""What hardware this host has that a lab could wire: serial ports, capture devices, network links, adb devices."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench_agent.serial_ports import list_ports

SYS_NET = Path("/sys/class/net")


def video_devices() -> list[dict[str, Any]]:
    by_id = {os.path.realpath(p): p for p in glob.glob("/dev/v4l/by-id/*")}
    out = []
    for dev in sorted(glob.glob("/dev/video*")):
        name_file = Path("/sys/class/video4linux") / Path(dev).name / "name"
        name = name_file.read_text().strip() if name_file.exists() else ""
        out.append({"device": dev, "by_id": by_id.get(os.path.realpath(dev)), "name": name})
    return out


def primary_interface() -> str | None:
    """The interface of the default IPv4 route: never a netboot link."""
    try:
        lines = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000":
            return fields[0]
    return None


def network_interfaces() -> list[dict[str, Any]]:
    primary = primary_interface()
    out = []
    for iface in sorted(p.name for p in SYS_NET.iterdir()) if SYS_NET.is_dir() else []:
        if iface == "lo":
            continue
        base = SYS_NET / iface

        def read(name: str) -> str:
            try:
                return (base / name).read_text().strip()
            except OSError:
                return ""

        out.append({"interface": iface, "mac": read("address"), "state": read("operstate"),
                    "carrier": read("carrier") == "1", "usb": "usb" in os.path.realpath(base / "device"),
                    "primary": iface == primary})
    return out


def adb_devices() -> list[dict[str, Any]] | None:
    """None when adb is not installed."""
    adb = shutil.which("adb")
    if adb is None:
        return None
    try:
        out = subprocess.run([adb, "devices"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    return [{"serial": r[0], "state": r[1] if len(r) > 1 else ""} for r in rows]


def inventory() -> dict[str, Any]:
    return {"serial": list_ports(), "video": video_devices(), "network": network_interfaces(), "adb": adb_devices()}
