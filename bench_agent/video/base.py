"""What a video backend needs: the ``VideoBackend`` interface, which backend reads a device string, and
``decode_image``. The backends (``backends/``) import this module, never the channel (``channel.py``),
which picks and opens them.
"""

from __future__ import annotations

from typing import Any

from bench_agent.errors import DeviceError, NotConfigured


class VideoBackend:
    """The interface: ``grab`` the next frame (waiting at most ``timeout_s``), ``close``."""

    kind = "?"

    def grab(self, timeout_s: float) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


def backend_kind(device: str) -> str:
    """mjpeg | qmp | v4l2 for ``device``; ``NotConfigured`` for anything else (checked before a daemon starts)."""
    if device.startswith(("http://", "https://")):
        return "mjpeg"
    if device.startswith("qmp:"):
        return "qmp"
    if device.startswith("adb:") and not device.startswith("adb://"):
        return "adb"
    if device.startswith("/dev/"):
        return "v4l2"
    raise NotConfigured(f"video device {device!r} is not /dev/videoN, an http(s):// MJPEG stream, qmp:SOCKET "
                        "or adb:SERIAL",
                        hint="see docs/video.md", device=device)


def decode_image(data: bytes) -> Any:
    import cv2
    import numpy as np

    frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if frame is None:
        raise DeviceError("the capture device sent an image that does not decode")
    return frame
