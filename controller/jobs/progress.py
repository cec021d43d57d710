"""Progress of a running job: a live line on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from controller.jobs.report import MARKS


HEALTH_EVENTS = {  # device health, on the job's progress (bench_agent.health.gate)
    "health_check": lambda d: f"health check of {d['target']} (job {d['job_id']}): {d['why']}",
    "health_check_end": lambda d: f"health check job {d['job_id']}: {d['health']}"
                                  + (f", {d['result']}" if d.get("result") else "") + f": {d['reason']}",
    "health_check_held": lambda d: f"health check of {d['target']} not run: {d['reason']}",
    "health_changed": lambda d: f"target {d['target']} health: {d['previous']} -> {d['health']} ({d['reason']})",
    "health_error": lambda d: f"job {d['job_id']}: could not record the target's health: {d['message']}",
}


class PlainProgress:
    """One line per event, for logs and CI."""

    def __init__(self, out: TextIO = sys.stdout, prefix: str = "") -> None:
        self.out, self.prefix = out, prefix

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        if event == "job_start":
            self._say(f"job {data['job_id']} on {data['target']}: started")
        elif event == "step_start":
            self._say(f"step {data['idx'] + 1}/{data['count']} {data['name']}: {data['command']}")
        elif event == "step_end":
            self._say(f"step {data['idx'] + 1} {data['name']}: {data['status']} ({data['duration_s']:.2f}s)")
        elif event == "waiting":
            self._say(f"job {data['job_id']} still queued: is `panio worker --host {data['host']}` running "
                      "(same PANIO_BROKER and PANIO_REDIS_PREFIX)?")
        elif event == "queued":
            self._say(f"job {data['job_id']} queued on {data['queue']}")
        elif event == "job_end":
            verdict = data["health"] + (f", {data['result']}" if data.get("result") else "")
            self._say(f"job {data['job_id']}: {verdict}: {data['reason']}")
        elif event in HEALTH_EVENTS:
            self._say(HEALTH_EVENTS[event](data))

    def _say(self, text: str) -> None:
        self.out.write(self.prefix + text + "\n")
        self.out.flush()


class LiveProgress(PlainProgress):
    """On a terminal: the running step's line updates in place with its elapsed time and last output.

    The time ticks every ``tick_s`` even while the step prints nothing: a quiet step (a long wait for a
    prompt) must not look hung."""

    def __init__(self, out: TextIO = sys.stdout, tick_s: float = 0.5) -> None:
        super().__init__(out)
        self.started = 0.0
        self.current = ""
        self.tail = ""
        self.count = 0
        self.tick_s = tick_s
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._ticker: threading.Thread | None = None

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        with self._lock:
            if event == "step_start":
                self.started, self.count, self.tail = time.monotonic(), data["count"], ""
                self.current = f"{data['idx'] + 1}/{data['count']} {data['name']}"
                self._running.set()
                self._redraw()
                self._start_ticker()
            elif event == "output":
                self.tail = data["line"].strip()[:60]
                self._redraw()
            elif event == "step_end":
                self._running.clear()
                self._line(f"{MARKS.get(data['status'], data['status'])} {self.current}  {data['duration_s']:.2f}s")
                self.out.write("\n")
            else:
                self._running.clear()
                super().__call__(event, data)

    def _redraw(self) -> None:
        self._line(f" ..  {self.current} {time.monotonic() - self.started:5.1f}s" + (f"  {self.tail}" if self.tail else ""))

    def _start_ticker(self) -> None:
        if self._ticker is None or not self._ticker.is_alive():
            self._ticker = threading.Thread(target=self._tick, name="panio-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while self._running.wait(timeout=5):
            time.sleep(self.tick_s)
            with self._lock:
                if self._running.is_set():
                    self._redraw()

    def _line(self, text: str) -> None:
        self.out.write("\r\x1b[K" + text)
        self.out.flush()


def for_stream(out: TextIO = sys.stdout):
    return LiveProgress(out) if out.isatty() else PlainProgress(out)
