"""Video operations: the capture daemon (video.watch, .stop, .status) and its readers (video.shot, .read, .wait).

``video.watch`` starts ``bench_agent.video.daemon`` for a target, after reaping
an orphan of it (a daemon that outlived its discovery file, seed R10).
``video.shot`` and ``video.read`` read the daemon's latest frame from disk;
``changed_since`` and ``stable`` wait on the daemon's ``frame.json``, a small
file polled every ``POLL_S`` (a ``stat`` per poll, no decoding), so a change
is seen within one daemon grab plus 10 ms. ``video.wait`` looks at each new
frame once (OCR against a regular expression, or an OpenCV template match)
and otherwise blocks on the same file until the frame changes.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

from bench_agent.daemons import per_target as target_daemons
from bench_agent.errors import NotRunning, Timeout
from bench_agent.ops import operation
from bench_agent.ops.spec import Param, ms_deadline
from bench_agent.video.base import decode_image
from bench_agent.video.daemon import MODULE, discovery_path, video_dir

POLL_S = 0.01
DEFAULT_STABLE_MS = 1000
_TIMEOUT = Param("timeout_ms", int, "how long to wait for the frame asked for", default=2000, unit="ms",
                 minimum=0, maximum=120_000)
_STABLE = Param("stable", bool, "wait until the picture has not changed for stable_ms", default=False)
_STABLE_MS = Param("stable_ms", int, "how long the picture must stay unchanged to count as stable",
                   default=DEFAULT_STABLE_MS, unit="ms", minimum=100, maximum=60_000)
_CHANGED = Param("changed_since", str, "a hash from an earlier shot: wait until the frame differs", default=None)
_REGION = Param("region", str, "X,Y,W,H in frame pixels: read only this part", default=None)


def _state() -> Path:
    from bench_agent.paths import lab_state_dir

    return lab_state_dir()


def _discovery(target: str) -> dict[str, Any] | None:
    return target_daemons.discovery(MODULE, discovery_path(target, _state()), target)


def daemon_state(target: str) -> dict[str, Any]:
    """running (pid), untracked (a live daemon without its discovery file: pids), or stopped."""
    return target_daemons.status(MODULE, discovery_path(target, _state()), target)


@operation("video.watch", side_effect=False)
def watch(target: str, video: dict[str, Any]) -> dict[str, Any]:
    """Start the target's capture daemon (reaping an untracked one, or one still watching an old device, first)."""
    from bench_agent.video.base import backend_kind

    backend_kind(video["device"])  # a device no backend reads is refused here, not retried forever
    st = daemon_state(target)
    if st["state"] == "running" and st.get("device") == video["device"]:
        return {**st, "already_running": True, "reaped": []}
    reaped = list(st.get("pids") or ([st["pid"]] if st["pid"] else []))  # untracked, or watching another device
    why = {"running": "it watched another device", "untracked": "it had lost its discovery file"}.get(st["state"])
    target_daemons.reap(reaped, f"untracked video daemon of {target!r}")
    folder = video_dir(target, _state())
    (folder / "frame.json").unlink(missing_ok=True)
    config = {k: video.get(k) for k in ("device", "width", "height", "poll_ms")}
    pid = target_daemons.start(MODULE, target, config, folder / "daemon.err")
    return {"target": target, "state": "running", "pid": pid, "device": video["device"], "already_running": False,
            "reaped": reaped, "reaped_because": why}


@operation("video.stop", side_effect=False)
def stop(target: str) -> dict[str, Any]:
    st = daemon_state(target)
    if st["state"] == "stopped":
        raise NotRunning(f"no video daemon for {target!r}", hint=f"start one with `panio video watch {target}`",
                         target=target)
    pids = st.get("pids") or [st["pid"]]
    target_daemons.reap(pids, f"video daemon of {target!r}")
    discovery_path(target, _state()).unlink(missing_ok=True)
    return {"target": target, "pids": pids, "stopped": True}


@operation("video.status")
def status(target: str) -> dict[str, Any]:
    st = daemon_state(target)
    meta = _meta(target)
    return {**st, "hash": meta.get("hash"), "signal": meta.get("signal"), "published": meta.get("published"),
            "seen": meta.get("seen")}


def _meta(target: str) -> dict[str, Any]:
    try:
        return json.loads((video_dir(target, _state()) / "frame.json").read_text())
    except (OSError, ValueError):
        return {}


def wait_frame(target: str, changed_since: str | None, stable: bool, stable_ms: int, timeout_ms: int) -> dict:
    """The daemon's latest frame record once it satisfies the wait; ``Timeout`` otherwise."""
    if _discovery(target) is None:
        raise NotRunning(f"no video daemon for {target!r}: shots come from it",
                         hint=f"start it with `panio video watch {target}`", target=target)
    end = time.monotonic() + timeout_ms / 1000
    while True:
        meta = _meta(target)
        if _satisfied(meta, changed_since, stable, stable_ms):
            return meta
        if time.monotonic() >= end:
            raise _timeout(target, meta, changed_since, stable, timeout_ms)
        time.sleep(POLL_S)


def _satisfied(meta: dict[str, Any], changed_since: str | None, stable: bool, stable_ms: int) -> bool:
    if meta.get("signal") != "ok" or not meta.get("hash"):
        return False
    if changed_since and meta["hash"] == changed_since:
        return False
    if stable:
        fresh = time.time() - (meta.get("seen") or 0) < 2.0  # the daemon still sees frames
        return fresh and time.time() - meta["published"] >= stable_ms / 1000
    return True


def _timeout(target: str, meta: dict, changed_since: str | None, stable: bool, timeout_ms: int) -> Timeout:
    if meta.get("signal") != "ok":
        why = f"no picture (signal {meta.get('signal', 'none')}: {meta.get('error') or 'no frame yet'})"
    elif changed_since:
        why = f"the frame did not change from {changed_since}"
    else:
        why = "the picture did not settle" if stable else "no frame"
    return Timeout(f"video of {target}: {why} within {timeout_ms} ms", target=target, hash=meta.get("hash"),
                   signal=meta.get("signal"))


def _frame_bytes(target: str) -> bytes:
    return (video_dir(target, _state()) / "frame.png").read_bytes()


@operation("video.shot", params=(_CHANGED, _STABLE, _STABLE_MS, _TIMEOUT), deadline=ms_deadline("timeout_ms"))
def shot(target: str, changed_since: str | None = None, stable: bool = False, stable_ms: int = DEFAULT_STABLE_MS,
         timeout_ms: int = 2000) -> dict[str, Any]:
    """The latest frame as PNG (base64), with its hash and signal."""
    for _ in range(3):  # the daemon may replace frame.png between reading the record and the file
        meta = wait_frame(target, changed_since, stable, stable_ms, timeout_ms)
        png = _frame_bytes(target)
        if _meta(target).get("hash") == meta["hash"]:
            break
    return {"target": target, "hash": meta["hash"], "signal": meta["signal"], "width": meta["width"],
            "height": meta["height"], "time": meta["published"], "png_b64": base64.b64encode(png).decode()}


@operation("video.read", params=(_STABLE, _STABLE_MS, _TIMEOUT, _REGION, _CHANGED),
           deadline=lambda a: a["timeout_ms"] / 1000 + 30)  # + OCR time
def read(target: str, stable: bool = False, stable_ms: int = DEFAULT_STABLE_MS, timeout_ms: int = 2000,
         region: str | None = None, changed_since: str | None = None) -> dict[str, Any]:
    """The text on the screen (OCR of the latest frame, or of a region of it)."""
    from bench_agent.video import channel as video

    box = video.parse_region(region)
    got = shot(target, changed_since=changed_since, stable=stable, stable_ms=stable_ms, timeout_ms=timeout_ms)
    frame = decode_image(base64.b64decode(got["png_b64"]))
    started = time.monotonic()
    text = video.ocr(frame, box)
    return {"target": target, "hash": got["hash"], "signal": got["signal"], "region": region, "text": text,
            "ocr_ms": round((time.monotonic() - started) * 1000)}


MAX_NEEDLE_B64 = 8 << 20
MAX_DISTANCE = 8
OCR_MARGIN_S = 30  # the last frame's OCR may start just before the timeout


@operation("video.wait", params=(
    Param("text", str, "a regular expression the screen's text (OCR) must match", default=None),
    Param("image_b64", str, "a needle image (PNG, base64) that must appear on the screen", default=None),
    Param("threshold", float, "how alike the needle and the screen must be (1.0 = pixel-exact)", default=0.9,
          minimum=0.1, maximum=1.0),
    Param("max_distance", int, "with text: how many characters the screen's text may have wrong, extra or missing "
          "and still match (edit distance; OCR misreads V as U); the reply states the distance found", default=0,
          minimum=0, maximum=MAX_DISTANCE),
    _REGION,
    Param("timeout_ms", int, "how long to wait for the text or image", default=30000, unit="ms", minimum=0,
          maximum=3_600_000),
), deadline=lambda a: a["timeout_ms"] / 1000 + OCR_MARGIN_S)
def wait(target: str, text: str | None = None, image_b64: str | None = None, threshold: float = 0.9,
         region: str | None = None, timeout_ms: int = 30000, max_distance: int = 0) -> dict[str, Any]:
    """Wait until the screen shows ``text`` (a regex over its OCR, within ``max_distance`` edits) or the
    ``image_b64`` needle; Timeout otherwise."""
    from bench_agent.video import channel as video

    look = _matcher(text, image_b64, threshold, video.parse_region(region), max_distance)
    started = time.monotonic()
    end, seen, frames, last = started + timeout_ms / 1000, None, 0, None
    while True:
        left_ms = max(0, round((end - time.monotonic()) * 1000))
        try:
            got = shot(target, changed_since=seen, timeout_ms=left_ms)
        except Timeout:
            raise _wait_timeout(target, text, threshold, timeout_ms, frames, last, seen, started) from None
        frames, seen = frames + 1, got["hash"]
        frame = decode_image(base64.b64decode(got["png_b64"]))
        found, last = look(frame)
        if found:
            return {"target": target, "hash": got["hash"], "signal": got["signal"], "region": region, "frames": frames,
                    "elapsed_ms": round((time.monotonic() - started) * 1000), **last}
        if time.monotonic() >= end:
            raise _wait_timeout(target, text, threshold, timeout_ms, frames, last, seen, started)


def _matcher(text: str | None, image_b64: str | None, threshold: float, box: Any, max_distance: int = 0):
    """A function frame -> (matched, what was seen) for the one thing asked for."""
    from bench_agent import patterns
    from bench_agent.errors import UsageError
    from bench_agent.video import channel as video

    if (text is None) == (image_b64 is None):
        raise UsageError("give exactly one of text (a regular expression) or image (a needle PNG)")
    if text is not None:
        rx = patterns.compile_text(text, True)  # a bad pattern is a usage error before the first frame
        # BESTMATCH: the fewest edits anywhere on the screen, so the stated distance is the closest reading
        fuzzy = patterns.compile_fuzzy(text, max_distance) if max_distance else None
        tolerance = {"max_distance": max_distance} if max_distance else {}

        def by_text(frame: Any) -> tuple[bool, dict[str, Any]]:
            seen = video.ocr(frame, box)
            m, distance = patterns.search(rx, seen), 0
            if m is None and fuzzy is not None:
                m = patterns.search(fuzzy, seen)
                distance = sum(m.fuzzy_counts) if m else None
            return m is not None, {"text": seen, "match": m.group(0) if m else None,
                                   "distance": distance if m else None, **tolerance}
        return by_text
    if len(image_b64) > MAX_NEEDLE_B64:
        raise UsageError(f"the needle image is larger than {MAX_NEEDLE_B64 >> 20} MiB (base64)", argument="image")
    try:
        needle = video.load_needle(base64.b64decode(image_b64, validate=True))
    except ValueError as exc:
        raise UsageError(f"the needle is not base64: {exc}", argument="image") from None

    def by_image(frame: Any) -> tuple[bool, dict[str, Any]]:
        m = video.find_image(frame, needle, box)
        height, width = frame.shape[:2]
        m["logical"] = [video.to_logical(m["x"] + m["w"] / 2, width), video.to_logical(m["y"] + m["h"] / 2, height)]
        return m["score"] >= threshold, {"match": m}
    return by_image


def _wait_timeout(target: str, text: str | None, threshold: float, timeout_ms: int, frames: int,
                  last: dict[str, Any] | None, hash_: str | None, started: float) -> Timeout:
    """``elapsed_ms``: how long the wait took, the timeout plus the last frame's look (OCR is slow on a busy host)."""
    elapsed_ms = round((time.monotonic() - started) * 1000)
    if not frames:
        return Timeout(f"video of {target}: no frame within {timeout_ms} ms", target=target, elapsed_ms=elapsed_ms,
                       hint=f"is the capture daemon seeing a picture? `panio video show {target}`")
    if text is not None:
        seen = " | ".join(((last or {}).get("text") or "").splitlines()[-3:])
        within = f" within edit distance {last['max_distance']}" if (last or {}).get("max_distance") else ""
        return Timeout(f"video of {target}: no text matching /{text}/{within} within {timeout_ms} ms ({frames} frame(s) "
                       f"read; last: {seen[-120:]!r})", target=target, hash=hash_, frames=frames,
                       elapsed_ms=elapsed_ms)
    score = ((last or {}).get("match") or {}).get("score")
    return Timeout(f"video of {target}: the image did not appear within {timeout_ms} ms (best score {score} < "
                   f"threshold {threshold}, {frames} frame(s))", target=target, hash=hash_, frames=frames,
                   score=score, elapsed_ms=elapsed_ms)


__all__ = ["watch", "stop", "status", "shot", "read", "wait", "daemon_state"]
