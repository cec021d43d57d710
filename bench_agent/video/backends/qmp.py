"""A QEMU display through QMP ``screendump`` (PPM: 2-4 ms for a 720x400 text screen).

Each frame is one QMP connection (``qmp.run``): between two frames the socket
is free, so keys (``hid send``) and a lab's power hook can share the board's
one ``-qmp`` socket with a running ``video watch``.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from bench_agent import qmp
from bench_agent.errors import DeviceError
from bench_agent.video.base import VideoBackend

POLL_INTERVAL_S = 0.04  # QEMU pushes nothing: poll at 25 frames/s, so a change is seen within ~40 ms


class QmpBackend(VideoBackend):
    kind = "qmp"

    def __init__(self, socket_path: str) -> None:
        self.path = socket_path
        fd, self._ppm = tempfile.mkstemp(prefix="panio-screendump-", suffix=".ppm")
        os.close(fd)
        self._last = 0.0

    def grab(self, timeout_s: float) -> Any:
        import cv2

        time.sleep(max(0.0, self._last + POLL_INTERVAL_S - time.monotonic()))
        self._last = time.monotonic()
        qmp.run(self.path, "screendump", timeout_s=timeout_s, filename=self._ppm)
        frame = cv2.imread(self._ppm, cv2.IMREAD_COLOR)
        if frame is None:
            raise DeviceError(f"QMP screendump of {self.path} wrote no readable image")
        return frame

    def close(self) -> None:
        try:
            os.unlink(self._ppm)
        except OSError:
            pass
