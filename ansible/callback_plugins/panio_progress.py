"""A stdout callback that writes one JSON line per event, for `panio setup` to show progress.

    {"event": "task", "task": "Install panio ...", "play": "..."}
    {"event": "result", "host": "bench1", "task": "...", "status": "ok|changed|failed|skipped|unreachable",
     "msg": "...", "stderr": "..."}
    {"event": "stats", "hosts": {"bench1": {"ok": 9, "changed": 0, "failed": 0, "unreachable": 0, "skipped": 2}}}
"""

from __future__ import annotations

import json
import sys

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: panio_progress
    type: stdout
    short_description: one JSON line per task and result, read by `panio setup`
    description: Writes task starts, per-host results and the final stats as JSON lines on stdout.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "panio_progress"

    def _emit(self, **event) -> None:
        sys.stdout.write(json.dumps(event, default=str) + "\n")
        sys.stdout.flush()

    def v2_playbook_on_play_start(self, play) -> None:
        self._emit(event="play", play=play.get_name())

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        self._emit(event="task", task=task.get_name())

    def v2_playbook_on_handler_task_start(self, task) -> None:
        self._emit(event="task", task=task.get_name(), handler=True)

    def _result(self, result, status: str) -> None:
        res = result._result
        out = {"event": "result", "host": result._host.get_name(), "task": result._task.get_name(), "status": status}
        for key in ("msg", "stderr", "stdout", "rc", "diff"):
            if res.get(key) not in (None, "", [], {}):
                out[key] = res[key] if key != "stdout" else str(res[key])[-2000:]
        self._emit(**out)

    def v2_runner_on_ok(self, result) -> None:
        self._result(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._result(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result) -> None:
        self._result(result, "skipped")

    def v2_runner_on_unreachable(self, result) -> None:
        self._result(result, "unreachable")

    def v2_runner_item_on_failed(self, result) -> None:
        self._result(result, "failed")

    def v2_playbook_on_stats(self, stats) -> None:
        hosts = {h: stats.summarize(h) for h in sorted(stats.processed)}
        self._emit(event="stats", hosts=hosts)
