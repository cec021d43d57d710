"""An MJPEG stream over HTTP (``multipart/x-mixed-replace``): network capture boxes and the simulated screen.

Each part carries one JPEG, with a ``Content-Length`` header (as mjpg-streamer,
ustreamer/PiKVM and the simulated board send); without one, the JPEG is cut
at its end-of-image marker. Frames decode with OpenCV.
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from typing import Any

from bench_agent.errors import DeviceError, Timeout, Unreachable
from bench_agent.video.base import VideoBackend, decode_image

CONNECT_TIMEOUT_S = 5.0
MAX_PART_BYTES = 32 << 20


class MjpegBackend(VideoBackend):
    kind = "mjpeg"

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self._resp = urllib.request.urlopen(url, timeout=CONNECT_TIMEOUT_S)  # noqa: S310 - the lab names the URL
        except (urllib.error.URLError, OSError) as exc:
            raise Unreachable(f"MJPEG stream {url}: {getattr(exc, 'reason', exc)}", device=url) from exc
        ctype = self._resp.headers.get("Content-Type", "")
        if "multipart" not in ctype:
            self._resp.close()
            raise DeviceError(f"{url} is not an MJPEG stream (Content-Type {ctype!r})", device=url)

    def grab(self, timeout_s: float) -> Any:
        sock = getattr(getattr(self._resp.fp, "raw", None), "_sock", None)  # the response's socket (CPython)
        if sock is not None:
            sock.settimeout(timeout_s)
        try:
            return decode_image(self._part())
        except socket.timeout as exc:
            raise Timeout(f"MJPEG stream {self.url} sent no frame within {timeout_s:g} s", device=self.url) from exc
        except OSError as exc:
            raise Unreachable(f"MJPEG stream {self.url}: {exc}", device=self.url) from exc

    def _part(self) -> bytes:
        length = None
        line = self._line()
        while not line.strip():  # the blank line after the previous part
            line = self._line()
        while line.strip():  # the boundary, then the part's headers
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
            line = self._line()
        if length is not None and 0 < length <= MAX_PART_BYTES:
            return self._resp.read(length)
        return self._until_eoi()

    def _line(self) -> bytes:
        line = self._resp.readline(65536)
        if not line:
            raise Unreachable(f"MJPEG stream {self.url} ended", device=self.url)
        return line

    def _until_eoi(self) -> bytes:
        data = bytearray()
        while not data.endswith(b"\xff\xd9"):
            chunk = self._resp.read(1)
            if not chunk or len(data) > MAX_PART_BYTES:
                raise DeviceError(f"MJPEG stream {self.url} sent a broken part", device=self.url)
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self._resp.close()
