"""How `netif down-hard` makes the target see link loss: one interface, three routes.

An administrative down (`netif mode off`) can leave the carrier up: a USB
Ethernet adapter whose PHY stays powered for Wake-on-LAN keeps the link lit,
so the target never notices. Only removing the adapter's power does. A
``HardDown`` has ``down()`` and ``up()``; each returns what it did, as data
to remember (the port path, so ``up`` still works once the interface has
vanished with its adapter).

- ``usb-sysfs`` (``usb_sysfs.py``): the kernel's per-port ``disable`` file of
  the hub port the adapter hangs off (default for a USB adapter).
- ``uhubctl`` (``uhubctl.py``): uhubctl switches the port's power (hubs with
  per-port power switching).
- ``hook`` (``hook.py``): the target's own commands, ``hard_down_cmd`` and
  ``hard_up_cmd`` (a relay, a managed switch's port, a test's wire).
"""

from __future__ import annotations

from typing import Any, Protocol

KINDS = ("usb-sysfs", "uhubctl", "hook")


class HardDown(Protocol):
    def down(self) -> dict[str, Any]: ...

    def up(self, remembered: dict[str, Any]) -> dict[str, Any]: ...


def make(target: str, netboot: dict[str, Any]) -> HardDown:
    """The backend a target's netboot table asks for (``hard_down``), else hook when it has one, else usb-sysfs."""
    kind = netboot.get("hard_down") or ("hook" if netboot.get("hard_down_cmd") else "usb-sysfs")
    if kind == "hook":
        from bench_agent.netboot.netif_backends.hook import HookHardDown

        return HookHardDown(target, netboot)
    if kind == "uhubctl":
        from bench_agent.netboot.netif_backends.uhubctl import UhubctlHardDown

        return UhubctlHardDown(target, netboot)
    from bench_agent.netboot.netif_backends.usb_sysfs import UsbSysfsHardDown

    return UsbSysfsHardDown(target, netboot)
