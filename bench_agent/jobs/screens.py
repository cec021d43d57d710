"""Screenshots as job artifacts: ``step-NN.png``.

The runner takes one after a step that asks for it (``screenshot = true``) and
after any step that did not pass, when the target has a video channel: a
failure on a screen is easier to read than its log. The shot comes from the
target's capture daemon through the step's own road (``panio video shot -o -
--json``, lease token in the environment), so it works wherever the steps do.
No daemon, no picture: an automatic shot is then skipped quietly, an asked-for
one is recorded as ``step-NN.png.txt`` saying why.
"""

from __future__ import annotations

import base64
import json

SHOT_TIMEOUT_MS = 2000


def has_video(lab_path: str, target: str) -> bool:
    import tomllib

    try:
        with open(lab_path, "rb") as f:
            return "video" in tomllib.load(f).get("targets", {}).get(target, {})
    except (OSError, tomllib.TOMLDecodeError):
        return False


def take(panio_argv: list[str], lab_path: str, target: str, env: dict) -> tuple[bytes | None, str]:
    """(PNG bytes, "") or (None, why not)."""
    from bench_agent.jobs.steps import error_of
    from bench_agent.process import run

    argv = [*panio_argv, "--lab", lab_path, "video", "shot", target, "-o", "-", "--json",
            "--timeout", str(SHOT_TIMEOUT_MS)]
    try:
        done = run(argv, deadline_s=SHOT_TIMEOUT_MS / 1000 + 30, env=env, limit_bytes=64 << 20)
    except OSError as exc:
        return None, f"video shot could not start: {exc}"
    if done.code != 0:
        err = error_of(done.err) or {}
        return None, f"video shot exited {done.code}: {err.get('message', done.err.strip()[-300:])}"
    try:
        return base64.b64decode(json.loads(done.out)["png_b64"]), ""
    except (ValueError, KeyError) as exc:
        return None, f"video shot printed no picture: {exc}"


def keep(store, job_id: int, idx: int, step: dict, status: str, target: str, panio_argv: list[str],
         lab_path: str, env: dict) -> None:
    """Store the step's screenshot if it asked for one or did not pass (see the module docstring)."""
    asked = bool(step.get("screenshot"))
    if not asked and (status == "pass" or not has_video(lab_path, target)):
        return
    png, why = take(panio_argv, lab_path, target, env)
    name = f"step-{idx + 1:02d}.png"
    if png is not None:
        store.add_artifact(job_id, name, png)
    elif asked:
        store.add_artifact(job_id, name + ".txt", f"no screenshot after step {idx + 1}: {why}\n")
