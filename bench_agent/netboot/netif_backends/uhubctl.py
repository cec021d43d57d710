"""UhubctlHardDown: switch the adapter's hub port power with uhubctl (``-l HUB -p PORT -a off|on``)."""

from __future__ import annotations

import shlex
from typing import Any

from bench_agent import hooks
from bench_agent.errors import NotConfigured
from bench_agent.netboot.netif_backends.usb_sysfs import usb_device_dir


def location(device: str) -> tuple[str, str]:
    """uhubctl's (hub location, port) of a USB device path: ``1-1.2`` → (``1-1``, ``2``), ``1-3`` → (``1``, ``3``)."""
    bus, _, path = device.partition("-")
    if not path or not bus.isdigit():
        raise NotConfigured(f"{device!r} is not a USB device path like 1-1.2", device=device)
    parts = path.split(".")
    hub = f"{bus}-{'.'.join(parts[:-1])}" if len(parts) > 1 else bus
    return hub, parts[-1]


class UhubctlHardDown:
    def __init__(self, target: str, netboot: dict[str, Any]) -> None:
        self.target, self.netboot = target, netboot

    def _where(self, remembered: dict[str, Any] | None = None) -> tuple[str, str]:
        if remembered and remembered.get("hub"):
            return remembered["hub"], remembered["port"]
        device = self.netboot.get("usb_port") or usb_device_dir(self.netboot["interface"]).name
        return location(device)

    def _run(self, hub: str, port: str, action: str) -> dict[str, Any]:
        command = shlex.join(["uhubctl", "-l", hub, "-p", port, "-a", action])
        hooks.run(command, name=f"uhubctl for {self.target}", timeout_s=30)
        return {"backend": "uhubctl", "hub": hub, "port": port}

    def down(self) -> dict[str, Any]:
        return self._run(*self._where(), "off")

    def up(self, remembered: dict[str, Any]) -> dict[str, Any]:
        return self._run(*self._where(remembered), "on")
