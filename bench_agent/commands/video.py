"""The bodies of ``panio video show|watch|stop|shot|read|wait`` and ``describe``, the daemon line of ``show``.

``opts`` carries ``target``, ``json`` and the command's own flags (see
``controller.cli.channels.video_runtime``): ``video`` (the lab's table) for ``watch``,
``timeout_ms``/``stable``/``stable_ms``/``changed_since`` for ``shot`` and
``read``, ``output`` (a file, ``-`` for stdout, None for ``STATE/shots/TARGET-TIME.png``),
``region``, and ``text``/``image``/``threshold`` for ``wait``. ``show``
takes ``channel`` and ``table``. A file ``-o`` names is written, and a needle
``--image`` names is read, where the body runs.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from bench_agent.commands import Call, Output, command, fields, passed
from bench_agent.commands.daemon_shapes import SHOW, STOPPED, WATCH
from bench_agent.errors import UsageError


FRAME = {
    "target": ("string", "the target"),
    "hash": ("string", "the frame's hash: pass it as --changed-since to wait for a change"),
    "signal": ("string", "the capture's signal (ok, no signal...)"),
}
SHOT = fields({
    **FRAME,
    "width": ("integer", "pixels"),
    "height": ("integer", "pixels"),
    "time": ("number", "when the frame was captured (epoch s)"),
    "png_b64?": ("string", "the PNG, base64 (with -o -)"),
    "file?": ("string", "the file the PNG was written to"),
})
READ = fields({
    **FRAME,
    "region": ("string|null", "X,Y,W,H read (null: the whole frame)"),
    "text": ("string", "the text read (OCR)"),
    "ocr_ms": ("integer", "how long the OCR took"),
})
FOUND = fields({
    **FRAME,
    "region": ("string|null", "X,Y,W,H looked at (null: the whole frame)"),
    "frames": ("integer", "frames looked at"),
    "elapsed_ms": ("integer", "how long the wait took"),
    "text?": ("string", "--text: the screen's text (OCR)"),
    "match": ("string|object|null", "--text: the matched text; --image: x, y, w, h, score, logical [x, y]"),
    "distance?": ("integer|null", "--text: the edit distance of the match"),
    "max_distance?": ("integer", "--text: the edit distance allowed (--max-distance)"),
})


def describe(st: dict[str, Any], kind: str = "video") -> str:
    """A daemon state line for `video show` / `hid show`: running (pid N) | untracked (pid N) | stopped."""
    start = f"panio video watch {st['target']}" if kind == "video" else f"panio hid serve {st['target']}"
    if st["state"] == "running":
        extra = ""
        if kind == "video":  # no hash yet: the daemon has not published its first frame
            extra = f", signal={st.get('signal')} hash={st['hash']}" if st.get("hash") else ", no frame yet"
        return f"running (pid {st['pid']}){extra}"
    if st["state"] == "untracked":
        return (f"untracked (pid {st['pid']}): a daemon without its discovery file; "
                f"`{start}` reaps it and starts a fresh one")
    return f"stopped (start it with `{start}`)"


def show(call: Call, opts: dict, out: Output) -> None:
    """``video show`` and ``hid show``: the lab's table and the daemon's state."""
    target, kind, table = opts["target"], opts["channel"], opts["table"]
    daemon = call(f"{kind}.status", {"target": target})
    if opts.get("json"):
        out.json({"target": target, "channel": kind, **table, "daemon": daemon})
        return
    out.say(f"{target} {kind}: " + ", ".join(f"{k}={v}" for k, v in table.items()))
    out.say(f"daemon: {describe(daemon, kind)}")


@command("video.show", output=SHOW)
def show_video(call: Call, opts: dict, out: Output, context: dict) -> None:
    show(call, opts, out)


def _signal(out: Output, r: dict[str, Any]) -> None:
    out.note(f"signal={r['signal']} hash={r['hash']}")


@command("video.watch", output=WATCH)
def watch(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    r = call("video.watch", {"target": target, "video": opts["video"]})
    if opts.get("json"):
        out.json(r)
        return
    for pid in r["reaped"]:
        out.say(f"stopped the previous video daemon of {target} (pid {pid}): {r['reaped_because']}")
    state = "already running" if r["already_running"] else "started"
    out.say(f"video capture of {target}: {state} (pid {r['pid']}, {r['device']})")


@command("video.stop", output=STOPPED)
def stop(call: Call, opts: dict, out: Output, context: dict) -> None:
    r = call("video.stop", {"target": opts["target"]})
    if opts.get("json"):
        out.json(r)
    else:
        out.say(f"stopped the video daemon of {opts['target']} (pid {', '.join(map(str, r['pids']))})")


@command("video.shot", output=SHOT)
def shot(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    r = call("video.shot", {"target": target, **passed("video.shot", opts)})
    where = opts.get("output") or str(default_shot_path(target))
    if where == "-" and opts.get("json"):  # the PNG inside the JSON (base64): what the MCP tool video_shot returns
        _signal(out, r)
        out.json(r)
        return
    png = base64.b64decode(r.pop("png_b64"))
    if where == "-":
        out.write("stdout", png)
    else:
        _write(where, png)
    _signal(out, r)
    if where == "-":
        return
    if opts.get("json"):
        out.json({**r, "file": where})
    else:
        out.say(where)


def default_shot_path(target: str) -> Path:
    """Where a shot with no ``-o`` goes: the state directory's ``shots/``, named by target and the time of the
    shot (UTC, ms), so shots never overwrite each other nor land in whatever directory the command ran from."""
    import time

    from bench_agent.paths import state_dir
    from bench_agent.private import private_dir

    moment = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(moment)) + f".{int(moment * 1000) % 1000:03d}Z"
    folder = Path(private_dir(state_dir() / "shots"))
    return folder / f"{target}-{stamp}.png"


def _write(path: str, png: bytes) -> None:
    try:
        Path(path).write_bytes(png)
    except OSError as exc:  # a directory that is not there, or not ours: the command line's fault
        raise UsageError(f"cannot write the shot to {path}: {exc.strerror or exc}", argument="output",
                         hint="give -o a file in a directory you can write, or -o - for stdout") from None


@command("video.read", output=READ)
def read(call: Call, opts: dict, out: Output, context: dict) -> None:
    r = call("video.read", {"target": opts["target"], **passed("video.read", opts)})
    _signal(out, r)
    if opts.get("json"):
        out.json(r)
    else:
        out.say(r["text"])


@command("video.wait", output=FOUND)
def wait(call: Call, opts: dict, out: Output, context: dict) -> None:
    image = opts.get("image")
    args: dict[str, Any] = {"target": opts["target"], "text": opts.get("text"), "region": opts.get("region"),
                            "timeout_ms": opts.get("timeout_ms"), "threshold": opts.get("threshold"),
                            "max_distance": opts.get("max_distance") or 0}
    if image:
        try:
            args["image_b64"] = base64.b64encode(Path(image).read_bytes()).decode()
        except OSError as exc:
            raise UsageError(f"cannot read the needle {image}: {exc.strerror}", argument="image") from None
    r = call("video.wait", args)
    _signal(out, r)
    if r.get("max_distance"):
        out.note(f"matched {r['match']!r} at edit distance {r['distance']} (at most {r['max_distance']} allowed)")
    if opts.get("json"):
        out.json(r)
    elif opts.get("text") is not None:
        out.say(r["text"])
    else:
        m = r["match"]
        out.say(f"found {image} at {m['x']},{m['y']} ({m['w']}x{m['h']}) score={m['score']} "
                f"centre moveabs {m['logical'][0]} {m['logical'][1]}")
