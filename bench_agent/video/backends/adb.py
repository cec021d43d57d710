"""An Android device's screen through ``adb exec-out screencap -p`` (a PNG, decoded by OpenCV).

The device pushes nothing: the capture daemon polls, every ``poll_ms`` (the
video table's, default 200 ms: a screencap of a 1080x1920 screen costs a phone
tens of milliseconds, so a faster poll only heats it). A screencap that is not
an image (SurfaceFlinger busy, a locked-down build printing an error) is a
``DeviceError`` quoting what came back, and the daemon reports the signal
lost until frames decode again.
"""

from __future__ import annotations

import time
from typing import Any

from bench_agent.adb import client
from bench_agent.errors import DeviceError
from bench_agent.video.base import VideoBackend

DEFAULT_POLL_MS = 200
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def screencap(serial: str, timeout_s: float) -> bytes:
    """One PNG of the screen; ``DeviceError`` when what came back is not one."""
    data = client.run(serial, ["exec-out", "screencap", "-p"], timeout_s)
    if not data.startswith(PNG_MAGIC):
        said = data[:120].decode("utf-8", "replace").strip() or "nothing"
        raise DeviceError(f"screencap on {serial} sent {len(data)} bytes that are not a PNG image: {said!r}",
                          serial=serial, hint="is the screen on and the device unlocked? `adb -s SERIAL exec-out "
                                              "screencap -p > x.png` shows what it sends (docs/adb.md)")
    return data


class AdbBackend(VideoBackend):
    kind = "adb"

    def __init__(self, serial: str, poll_ms: int | None = None) -> None:
        self.serial = serial
        self.interval_s = (poll_ms or DEFAULT_POLL_MS) / 1000
        self._last = 0.0
        client.ready(serial)

    def grab(self, timeout_s: float) -> Any:
        from bench_agent.video.base import decode_image

        time.sleep(max(0.0, self._last + self.interval_s - time.monotonic()))
        self._last = time.monotonic()
        png = screencap(self.serial, max(timeout_s, 5.0))
        try:
            return decode_image(png)
        except DeviceError as err:
            raise DeviceError(f"screencap on {self.serial}: {err.message}", serial=self.serial) from None
