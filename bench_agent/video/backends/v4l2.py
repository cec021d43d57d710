"""A USB capture dongle (UVC) through OpenCV's V4L2 backend."""

from __future__ import annotations

from typing import Any

from bench_agent.errors import DeviceError, Unreachable
from bench_agent.video.base import VideoBackend


class V4l2Backend(VideoBackend):
    kind = "v4l2"

    def __init__(self, device: str, width: int | None = None, height: int | None = None) -> None:
        import cv2

        self.device = device
        self._cap = cv2.VideoCapture(device, cv2.CAP_V4L2)
        if not self._cap.isOpened():
            raise Unreachable(f"cannot open capture device {device}", hint="check `panio discover` and permissions "
                              "(the video group)", device=device)
        if width and height:
            self._cap.set(cv2.CAP_PROP_FRAME_WIDTH, width)
            self._cap.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
        self._cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # the newest frame, not one queued seconds ago

    def grab(self, timeout_s: float) -> Any:
        ok, frame = self._cap.read()
        if not ok or frame is None:
            raise DeviceError(f"capture device {self.device} gave no frame (unplugged? no signal?)", device=self.device)
        return frame

    def close(self) -> None:
        self._cap.release()
