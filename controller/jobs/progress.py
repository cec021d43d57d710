"""Progress of a running job: a live line on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from controller.jobs.report import MARKS


HEALTH_EVENTS = {  # device health, on the job's progress (bench_agent.jobs.health_gate)
    "health_check": lambda d: f"health check of {d['target']} (job {d['job_id']}): {d['why']}",
    "health_check_end": lambda d: f"health check job {d['job_id']}: {d['health']}"
                                  + (f", {d['result']}" if d.get("result") else "") + f": {d['reason']}",
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
    """On a terminal: the running step's line updates in place with its elapsed time and last output."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        super().__init__(out)
        self.started = 0.0
        self.current = ""
        self.count = 0

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        if event == "step_start":
            self.started, self.count = time.monotonic(), data["count"]
            self.current = f"{data['idx'] + 1}/{data['count']} {data['name']}"
            self._line(f" ..  {self.current}")
        elif event == "output":
            tail = data["line"].strip()[:60]
            self._line(f" ..  {self.current} {time.monotonic() - self.started:5.1f}s  {tail}")
        elif event == "step_end":
            self._line(f"{MARKS.get(data['status'], data['status'])} {self.current}  {data['duration_s']:.2f}s")
            self.out.write("\n")
        else:
            super().__call__(event, data)

    def _line(self, text: str) -> None:
        self.out.write("\r\x1b[K" + text)
        self.out.flush()


def for_stream(out: TextIO = sys.stdout):
    return LiveProgress(out) if out.isatty() else PlainProgress(out)
