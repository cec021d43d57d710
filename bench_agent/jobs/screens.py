"""Screenshots as job artifacts: ``step-NN.png``.

The runner takes one after a step that asks for it (``screenshot = true``) and
after any step that did not pass, when the target has a video channel: a
failure on a screen is easier to read than its log. The shot comes from the
target's capture daemon through the step's own road (the ``video.shot``
operation, with the job's lease token), so it works wherever the steps do.
No daemon, no picture: an automatic shot is then skipped quietly, an asked-for
one is recorded as ``step-NN.png.txt`` saying why.
"""

from __future__ import annotations

import base64
from typing import Any, Callable

from bench_agent.errors import PanioError

SHOT_TIMEOUT_MS = 2000


def take(call: Callable[[str, dict], Any], target: str) -> tuple[bytes | None, str]:
    """(PNG bytes, "") or (None, why not)."""
    try:
        r = call("video.shot", {"target": target, "timeout_ms": SHOT_TIMEOUT_MS})
    except PanioError as err:
        return None, f"video shot failed ({err.code}, exit {err.exit_status}): {err.message}"
    try:
        return base64.b64decode(r["png_b64"]), ""
    except (ValueError, KeyError, TypeError) as exc:
        return None, f"video shot returned no picture: {exc}"


def keep(store, job_id: int, idx: int, step: dict, status: str, payload: dict, call) -> None:
    """Store the step's screenshot if it asked for one or did not pass (see the module docstring)."""
    asked = bool(step.get("screenshot"))
    has_video = "video" in (payload.get("target_config") or {})
    if not asked and (status == "pass" or not has_video):
        return
    png, why = take(call, payload["target"])
    name = f"step-{idx + 1:02d}.png"
    if png is not None:
        store.add_artifact(job_id, name, png)
    elif asked:
        store.add_artifact(job_id, name + ".txt", f"no screenshot after step {idx + 1}: {why}\n")
