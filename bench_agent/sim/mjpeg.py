"""Serve a SimScreen as a capture box does: MJPEG over HTTP on loopback.

``GET /stream.mjpg`` is ``multipart/x-mixed-replace`` with one JPEG per part
(and its ``Content-Length``), sent when the picture changes and at least
every ``KEEPALIVE_S`` like a capture box's steady stream; ``GET /snapshot.jpg``
is one JPEG.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BOUNDARY = "panioframe"
KEEPALIVE_S = 0.5
JPEG_QUALITY = 90


class MjpegServer:
    def __init__(self, screen: Any, port: int = 0) -> None:
        self.screen = screen
        self._jpeg: tuple[int, bytes] | None = None
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/stream.mjpg"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="sim-mjpeg", daemon=True)
        self.closed = threading.Event()

    def start(self) -> MjpegServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self.closed.set()
        with self.screen.changed:
            self.screen.changed.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    def jpeg(self) -> tuple[int, bytes]:
        import cv2

        with self._lock:
            version = self.screen.version
            if self._jpeg is None or self._jpeg[0] != version:
                ok, buf = cv2.imencode(".jpg", self.screen.frame(), [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
                self._jpeg = (version, buf.tobytes())
            return self._jpeg


class _Handler(BaseHTTPRequestHandler):
    server_ref: MjpegServer
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/snapshot.jpg"):
            _, data = self.server_ref.jpeg()
            self._headers("image/jpeg", len(data))
            self.wfile.write(data)
        elif self.path.startswith("/stream.mjpg"):
            self._headers(f"multipart/x-mixed-replace; boundary={BOUNDARY}")
            self._stream()
        else:
            self.send_error(404)

    def _headers(self, ctype: str, length: int | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache")
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _stream(self) -> None:
        srv, screen, sent = self.server_ref, self.server_ref.screen, -1
        try:
            while not srv.closed.is_set():
                version, data = srv.jpeg()
                self.wfile.write(f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(data)}\r\n\r\n"
                                 .encode() + data + b"\r\n")
                self.wfile.flush()
                sent = version
                with screen.changed:
                    screen.changed.wait_for(lambda: screen.version != sent or srv.closed.is_set(), KEEPALIVE_S)
        except (BrokenPipeError, ConnectionResetError):
            pass
