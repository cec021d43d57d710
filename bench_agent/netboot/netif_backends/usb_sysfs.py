"""UsbSysfsHardDown: power the adapter's hub port off through the kernel's ``disable`` file.

Linux exposes each hub port as ``/sys/bus/usb/devices/<hub>:1.0/<hub>-port<N>``
with a ``disable`` attribute; a USB device links to its port as ``port``.
Writing 1 disables the port and, on hubs with per-port power switching, cuts
its power; the adapter (and its netdev) disappears until 0 is written back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench_agent.errors import DeviceError, NotConfigured, Refused
from bench_agent.netboot import values

SYS = Path("/sys")


def usb_device_dir(interface: str, sys_root: Path = SYS) -> Path:
    """The sysfs folder of the USB device behind ``interface`` (``.../1-1/1-1.2``)."""
    dev = sys_root / "class" / "net" / interface / "device"
    real = Path(os.path.realpath(dev)) if dev.exists() else None
    if real is None or "usb" not in str(real) or ":" not in real.name:
        why = "is not a USB adapter" if real is not None else "has no device in sysfs (absent, or virtual)"
        raise NotConfigured(f"{interface} {why}, so usb-sysfs cannot power it off",
                            hint="give a hook: `panio netboot set -t TARGET --hard-down-cmd CMD --hard-up-cmd CMD`"
                                 " (or --usb-port DEV)", interface=interface)
    return real.parent  # the USB interface (1-1.2:1.0) sits under its device (1-1.2)


class UsbSysfsHardDown:
    def __init__(self, target: str, netboot: dict[str, Any], sys_root: Path = SYS) -> None:
        self.target, self.netboot, self.sys_root = target, netboot, sys_root

    def _port_file(self) -> Path:
        if self.netboot.get("usb_port"):
            try:
                values.usb_port(self.netboot["usb_port"])  # it becomes a path under /sys: no "../"
            except values.BadValue as exc:
                raise Refused(f"netif of {self.target!r}: {exc}", target=self.target) from None
            device = self.sys_root / "bus" / "usb" / "devices" / self.netboot["usb_port"]
        else:
            device = usb_device_dir(self.netboot["interface"], self.sys_root)
        port = device / "port" / "disable"
        if not port.exists():
            raise NotConfigured(f"no port disable file for {device.name} (kernel too old, or a root hub port)",
                                hint="use `--hard-down uhubctl` or a hook", device=str(device))
        return Path(os.path.realpath(port))

    def down(self) -> dict[str, Any]:
        port = self._port_file()
        _write(port, "1")
        return {"backend": "usb-sysfs", "port_file": str(port)}

    def up(self, remembered: dict[str, Any]) -> dict[str, Any]:
        port = Path(remembered.get("port_file") or self._port_file())
        _write(port, "0")
        return {"backend": "usb-sysfs", "port_file": str(port)}


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except PermissionError:
        raise Refused(f"writing {path} needs root", hint="run the bench agent as root, or add a udev rule") from None
    except OSError as exc:
        raise DeviceError(f"cannot write {value} to {path}: {exc.strerror}") from None
