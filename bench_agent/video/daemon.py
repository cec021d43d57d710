"""The video capture daemon of one target: keeps the latest frame on disk with its hash.

    python -m bench_agent.video.daemon --state-dir DIR --target T --config JSON

It holds the capture device, grabs frames continuously and publishes a frame
when it differs visibly from the last published one (``bench_agent.video.channel``):

    <state>/video/<target>/frame.png    the latest published frame
    <state>/video/<target>/frame.json   {"hash", "published", "seen", "seq", "grabs", "signal", "width", "height"}
    <state>/daemons/video-<target>.json the discovery file (``panio daemons`` lists it)

``grabs`` counts every frame read from the device (``seq`` only the published
ones), so a benchmark can price one grab. ``seen`` is refreshed at least every ``HEARTBEAT_S`` while frames arrive, so a
reader can tell a still picture (stable) from a dead daemon. When the device
fails, ``signal`` becomes ``lost`` and the daemon reopens it every second.
Readers (``video shot``/``read``) never talk to the daemon: they read these files.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from bench_agent.daemons.per_target import serve, write_json
from bench_agent.private import private_dir

MODULE = "bench_agent.video.daemon"
HEARTBEAT_S = 0.25
REOPEN_S = 1.0
GRAB_TIMEOUT_S = 2.0


def video_dir(target: str, state: Path) -> Path:
    return state / "video" / target


def discovery_path(target: str, state: Path) -> Path:
    return state / "daemons" / f"video-{target}.json"


class Watcher:
    def __init__(self, state: Path, target: str, config: dict[str, Any]) -> None:
        self.state, self.target, self.config = state, target, config
        self.dir = video_dir(target, state)
        private_dir(self.dir)  # the board's screen: this user's alone (bench_agent.private)
        self.stop = threading.Event()
        self._published_grey = None
        self._last_raw = None
        self._meta: dict[str, Any] = {"hash": None, "published": None, "seen": None, "seq": 0, "grabs": 0, "signal": "none",
                                      "width": None, "height": None, "pid": os.getpid()}
        self._last_meta_write = 0.0

    def run(self) -> None:
        import cv2

        from bench_agent.errors import PanioError
        from bench_agent.video import channel as video

        cv2.setNumThreads(1)  # frame-sized work: OpenCV's worker threads would spin on every grab for nothing

        while not self.stop.is_set():
            try:
                backend = video.open_backend(self.config["device"], self.config.get("width"),
                                             self.config.get("height"), self.config.get("poll_ms"))
            except PanioError as err:
                self._lost(err.message)
                continue
            try:
                while not self.stop.is_set():
                    self._frame(backend.grab(GRAB_TIMEOUT_S))
            except PanioError as err:
                self._lost(err.message)
            finally:
                backend.close()

    def close(self) -> None:
        """Nothing to release: ``run`` closes the device each time it leaves it."""

    def _frame(self, frame: Any) -> None:
        from bench_agent.video import channel as video

        now = time.time()
        self._meta["seen"] = now
        self._meta["grabs"] += 1
        # A still screen grabs the same bytes again: one comparison instead of grey + diff (benchmarks/video_hid.py)
        same = self._last_raw is not None and self._last_raw.shape == frame.shape and (self._last_raw == frame).all()
        self._last_raw = frame
        if same and self._meta["signal"] == "ok":
            if now - self._last_meta_write >= HEARTBEAT_S:
                self._write_meta(now)
            return
        grey = video.grey(frame)
        if self._meta["signal"] != "ok" or video.changed_px(self._published_grey, grey) > video.MIN_CHANGED_PX:
            tmp = self.dir / "frame.png.tmp"
            tmp.write_bytes(video.encode_png(frame))
            os.replace(tmp, self.dir / "frame.png")
            self._published_grey = grey
            h, w = grey.shape
            self._meta.update(hash=video.frame_hash(frame), published=now, seq=self._meta["seq"] + 1,
                              signal="ok", width=w, height=h, error=None)
            self._write_meta(now)
        elif now - self._last_meta_write >= HEARTBEAT_S:
            self._write_meta(now)

    def _lost(self, why: str) -> None:
        self._meta.update(signal="lost", error=why, seen=time.time())
        self._write_meta(time.time())
        self.stop.wait(REOPEN_S)

    def _write_meta(self, now: float) -> None:
        write_json(self.dir / "frame.json", self._meta)
        self._last_meta_write = now


def main(argv: list[str] | None = None) -> int:
    return serve(MODULE, "video", Watcher, discovery_path, argv)


if __name__ == "__main__":
    raise SystemExit(main())
