"""`panio discover` lists USB devices by VID:PID (libusb through pyusb, else sysfs) and keyboard/mouse rigs."""

from __future__ import annotations

from pathlib import Path

from bench_agent.inventory import usb_devices


def fake_device(root: Path, name: str, **attrs: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    for key, value in attrs.items():
        (d / key).write_text(value + "\n")


def test_usb_devices_from_sysfs_by_vid_pid_with_a_role(tmp_path):
    fake_device(tmp_path, "1-1", idVendor="0403", idProduct="6001", busnum="1", manufacturer="FTDI",
                product="FT232R USB UART", serial="A12345")
    fake_device(tmp_path, "1-1:1.0", idVendor="ignored")  # an interface, not a device
    fake_device(tmp_path, "2-3.1", idVendor="534d", idProduct="2109", busnum="2", product="USB Video")
    found = usb_devices(tmp_path)
    assert [(d["vid"], d["pid"], d["path"]) for d in found] == [("0403", "6001", "1-1"), ("534d", "2109", "2-3.1")]
    assert found[0]["serial"] == "A12345" and "FTDI" in found[0]["role"]
    assert "capture" in found[1]["role"] and found[1]["serial"] == ""


def test_discover_json_has_usb_and_hid_sections(panio):
    inv = panio("discover", "--json").json()
    assert isinstance(inv["usb"], list) and isinstance(inv["hid"], list)
    assert all({"vid", "pid", "path", "role"} <= set(d) for d in inv["usb"])
