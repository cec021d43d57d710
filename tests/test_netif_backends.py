"""The hard-down backends' addressing: the hub port of a USB adapter, in a sysfs tree laid out as the kernel's.

The netns tests prove the hook backend end to end (tests/test_netboot_netns.py);
no USB hub is attached here, so these check that usb-sysfs finds and writes the
port's ``disable`` file the kernel exposes, and that uhubctl gets the right
hub location and port.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench_agent.errors import NotConfigured
from bench_agent.netboot.netif_backends import make
from bench_agent.netboot.netif_backends.uhubctl import UhubctlHardDown, location
from bench_agent.netboot.netif_backends.usb_sysfs import UsbSysfsHardDown


def fake_sys(tmp_path: Path) -> Path:
    """/sys for an adapter enx0 on port 2 of hub 1-1: class/net/enx0/device -> .../1-1/1-1.2/1-1.2:1.0."""
    sys_root = tmp_path / "sys"
    hub = sys_root / "devices" / "pci0000:00" / "0000:00:14.0" / "usb1" / "1-1"
    port = hub / "1-1:1.0" / "1-1-port2"
    port.mkdir(parents=True)
    (port / "disable").write_text("0")
    adapter = hub / "1-1.2"
    (adapter / "1-1.2:1.0").mkdir(parents=True)
    (adapter / "port").symlink_to(port)
    netdir = sys_root / "class" / "net" / "enx0"
    netdir.mkdir(parents=True)
    (netdir / "device").symlink_to(adapter / "1-1.2:1.0")
    (sys_root / "bus" / "usb" / "devices").mkdir(parents=True)
    os.symlink(adapter, sys_root / "bus" / "usb" / "devices" / "1-1.2")
    virt = sys_root / "class" / "net" / "veth0"
    virt.mkdir()
    return sys_root


def test_usb_sysfs_disables_the_adapters_port_and_enables_it_from_memory(tmp_path: Path) -> None:
    sys_root = fake_sys(tmp_path)
    disable = sys_root / "devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/1-1-port2/disable"
    backend = UsbSysfsHardDown("pico", {"interface": "enx0"}, sys_root)
    done = backend.down()
    assert disable.read_text() == "1" and done["port_file"] == str(disable)
    # the adapter (and its netdev) vanish with its power: up() must not need them
    os.unlink(sys_root / "class" / "net" / "enx0" / "device")
    assert backend.up(done) == done and disable.read_text() == "0"


def test_usb_sysfs_takes_a_configured_usb_port_and_refuses_a_virtual_link(tmp_path: Path) -> None:
    sys_root = fake_sys(tmp_path)
    backend = UsbSysfsHardDown("pico", {"interface": "absent", "usb_port": "1-1.2"}, sys_root)
    assert backend.down()["port_file"].endswith("1-1-port2/disable")
    with pytest.raises(NotConfigured, match="usb-sysfs cannot power it off") as err:
        UsbSysfsHardDown("pico", {"interface": "veth0"}, sys_root).down()
    assert "--hard-down-cmd" in err.value.hint


@pytest.mark.parametrize("device, want", [("1-1.2", ("1-1", "2")), ("1-3", ("1", "3")), ("2-1.4.3", ("2-1.4", "3"))])
def test_uhubctl_location_of_a_usb_device_path(device: str, want: tuple[str, str]) -> None:
    assert location(device) == want


def test_backend_choice_follows_the_netboot_table() -> None:
    assert type(make("p", {"interface": "x", "hard_down_cmd": "relay off"})).__name__ == "HookHardDown"
    assert isinstance(make("p", {"interface": "x", "hard_down": "uhubctl"}), UhubctlHardDown)
    assert isinstance(make("p", {"interface": "x"}), UsbSysfsHardDown)
    with pytest.raises(NotConfigured):
        location("nonsense")
