"""Helpers for HID gadget tests: the USB host side of an f_hid gadget node, played by a FIFO."""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path


class FhidHost:
    """The USB host side of one gadget node: collects every report written to the FIFO."""

    def __init__(self, path: Path, report_len: int) -> None:
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # RDWR: never EOF between two panio processes
        self.report_len, self.data, self.stop = report_len, bytearray(), threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if select.select([self.fd], [], [], 0.05)[0]:
                chunk = os.read(self.fd, 4096)
                with self.lock:
                    self.data += chunk

    def reports(self, count: int, timeout_s: float = 30) -> list[bytes]:
        """The reports received so far, once there are ``count`` of them (or ``timeout_s`` passed); then forgets them."""
        end = time.monotonic() + timeout_s
        while len(self.data) < count * self.report_len and time.monotonic() < end:
            time.sleep(0.02)
        with self.lock:
            got = [bytes(self.data[i:i + self.report_len]) for i in range(0, len(self.data), self.report_len)]
            del self.data[:]
        return got

    def halt(self) -> None:
        """Stop reading (the host went away): what is written stays in the FIFO."""
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the FIFO reader did not stop"

    def close(self) -> None:
        self.halt()
        os.close(self.fd)
