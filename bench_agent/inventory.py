"""What hardware this host has that a lab could wire: serial ports, capture devices, network links, adb devices."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench_agent.serial.ports import list_ports

SYS_NET = Path("/sys/class/net")
SYS_USB = Path("/sys/bus/usb/devices")
# What a bench's USB devices usually are, by vendor id (a hint for the operator, never a decision).
USB_ROLES = {"0403": "serial adapter (FTDI)", "10c4": "serial adapter (Silicon Labs CP210x)",
             "067b": "serial adapter (Prolific)", "1a86": "serial adapter or CH9329 HID rig (WCH)",
             "2e8a": "Raspberry Pi (RP2040/RP2350)", "534d": "capture dongle (MacroSilicon)",
             "345f": "capture dongle", "1d6b": "root hub"}


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


def usb_devices(root: Path = SYS_USB) -> list[dict[str, Any]]:
    """Every USB device by VID:PID with its strings and bus path: through libusb (pyusb) when it has a
    backend, else from sysfs (the same facts, no library needed)."""
    found = _usb_sysfs(root) if root != SYS_USB else (_usb_libusb() or _usb_sysfs(root))
    for dev in found:
        dev["role"] = USB_ROLES.get(dev["vid"], "")
    return sorted(found, key=lambda d: (d["bus"], d["path"]))


def _usb_libusb() -> list[dict[str, Any]]:
    try:
        import usb.core
        import usb.util

        devices = list(usb.core.find(find_all=True))
    except Exception:  # noqa: BLE001 - no libusb backend or no permission: sysfs has the same facts
        return []
    out = []
    for d in devices:
        path = f"{d.bus}-" + ".".join(map(str, d.port_numbers or ())) if d.port_numbers else f"{d.bus}-0"
        out.append({"vid": f"{d.idVendor:04x}", "pid": f"{d.idProduct:04x}", "bus": d.bus, "path": path,
                    "manufacturer": _usb_string(d, d.iManufacturer), "product": _usb_string(d, d.iProduct),
                    "serial": _usb_string(d, d.iSerialNumber)})
    return out


def _usb_string(dev: Any, index: int) -> str:
    if not index:
        return ""
    try:
        import usb.util

        return usb.util.get_string(dev, index) or ""
    except Exception:  # noqa: BLE001 - strings need permission on the device node; VID:PID does not
        return ""


def _usb_sysfs(root: Path) -> list[dict[str, Any]]:
    out = []
    for dev in sorted(root.glob("*")) if root.is_dir() else []:
        if ":" in dev.name or not (dev / "idVendor").exists():
            continue  # interfaces ("1-1:1.0"), not devices

        def read(name: str, d: Path = dev) -> str:
            try:
                return (d / name).read_text().strip()
            except OSError:
                return ""

        out.append({"vid": read("idVendor"), "pid": read("idProduct"), "bus": int(read("busnum") or 0),
                    "path": dev.name, "manufacturer": read("manufacturer"), "product": read("product"),
                    "serial": read("serial")})
    return out


def hid_rigs() -> list[dict[str, Any]]:
    """Keyboard/mouse rigs: CH9329 boards show up as WCH serial adapters; USB gadgets as /dev/hidg*."""
    rigs = [{"kind": "ch9329 (probably)", "device": p["device"], "usb": p["vid_pid"]}
            for p in list_ports() if (p.get("vid_pid") or "").startswith("1a86:")]
    rigs += [{"kind": "hidg", "device": dev} for dev in sorted(glob.glob("/dev/hidg*"))]
    return rigs


def inventory() -> dict[str, Any]:
    return {"serial": list_ports(), "video": video_devices(), "hid": hid_rigs(), "usb": usb_devices(),
            "network": network_interfaces(), "adb": adb_devices()}
