"""This host's serial ports, through pyserial's port listing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BY_ID = Path("/dev/serial/by-id")


def _by_id_links() -> dict[str, str]:
    links: dict[str, str] = {}
    if BY_ID.is_dir():
        for link in sorted(BY_ID.iterdir()):
            links[os.path.realpath(link)] = str(link)
    return links


def list_ports() -> list[dict[str, Any]]:
    """Each port: device, stable by-id path (None when udev made none), VID:PID, serial number, description."""
    from serial.tools import list_ports as lp

    links = _by_id_links()
    out = []
    for port in sorted(lp.comports(), key=lambda p: p.device):
        vid_pid = f"{port.vid:04x}:{port.pid:04x}" if port.vid is not None and port.pid is not None else None
        out.append({
            "device": port.device,
            "by_id": links.get(os.path.realpath(port.device)),
            "vid_pid": vid_pid,
            "serial_number": port.serial_number,
            "manufacturer": port.manufacturer,
            "description": port.description if port.description != "n/a" else "",
            "location": port.location,
        })
    return out
