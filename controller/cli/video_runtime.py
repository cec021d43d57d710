"""panio video watch|stop|shot|read|wait: the capture daemon and what it sees, at run time.

Each command resolves the target's video table from the lab file and calls a
``video.<verb>`` operation through ``controller.dispatch`` on the host that
owns the capture device. ``shot`` and ``read`` read the daemon's latest frame;
``--changed-since HASH`` blocks until the frame differs (no polling loop on
the caller's side) and ``--stable`` until the picture stops changing.
``wait`` blocks until text (OCR) or a needle image appears on the screen.
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path
from typing import Any

from controller.cli.common import add_json, add_target_positional, command, load_lab, print_json, say

SEE = "docs/video.md, panio skill kvm-puppeting"


def _param(op: str, name: str):
    from bench_agent import ops

    return ops.spec(op).param(name)


def _wait_opts(c: argparse.ArgumentParser, op: str) -> None:
    t = _param(op, "timeout_ms")
    c.add_argument("--timeout", "--timeout-ms", dest="timeout_ms", type=int, default=t.default, metavar="MS",
                   help=f"how long to wait for the frame asked for ({t.bounds_text()}, default {t.default})")
    c.add_argument("--stable", action="store_true",
                   help="wait until the picture stops changing (after a reboot or a key press)")
    s = _param(op, "stable_ms")
    c.add_argument("--stable-ms", type=int, default=s.default, metavar="MS",
                   help=f"how long it must stay unchanged to count as stable ({s.bounds_text()}, default {s.default})")
    c.add_argument("--changed-since", metavar="HASH",
                   help="block until the frame differs from this hash (from an earlier shot's hash=)")


def register(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "watch", "start the capture daemon of a target (keeps the latest frame on disk)", func=watch,
                example=["panio video watch pico", "panio video watch pico --json"],
                see_also=f"panio video show, panio daemons, {SEE}",
                details="Reaps an untracked daemon of the target first (one that outlived its discovery file).")
    add_target_positional(c)
    add_json(c)
    c = command(sub, "stop", "stop the capture daemon of a target", func=stop, example="panio video stop pico",
                see_also=f"panio video watch, panio daemons stop, {SEE}")
    add_target_positional(c)
    add_json(c)
    c = command(sub, "shot", "save the screen as a PNG; hash= and signal= go to stderr", func=shot,
                example=["panio video shot pico -o before.png",
                         "panio video shot pico --changed-since 3f2a9c01d4e5b6a7 --timeout 20000",
                         "panio video shot pico --stable -o booted.png"],
                see_also=f"panio video read, panio video watch, {SEE}",
                details="Needs the capture daemon (panio video watch TARGET). To wait for the screen to change\n"
                        "after an action, pass the previous shot's hash to --changed-since: it blocks, no loop.")
    add_target_positional(c)
    c.add_argument("-o", "--output", metavar="FILE",
                   help="where to write the PNG (default TARGET.png; - = stdout; with --json: base64 in png_b64)")
    _wait_opts(c, "video.shot")
    add_json(c)
    c = command(sub, "read", "read the text on the screen (OCR with tesseract)", func=read,
                example=["panio video read pico --stable", "panio video read pico --region 0,0,720,16"],
                see_also=f"panio video shot, {SEE}",
                details="OCR is weak on tiny fonts: crop with --region rather than changing the target's console\n"
                        "font (never change it to help OCR). Text goes to stdout, hash= to stderr.")
    add_target_positional(c)
    c.add_argument("--region", metavar="X,Y,W,H", help="read only this rectangle (frame pixels)")
    _wait_opts(c, "video.read")
    add_json(c)
    _register_wait(sub)


def _register_wait(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "wait", "wait until text (OCR) or an image appears on the screen", func=wait,
                example=["panio video wait pico --text 'login:' --timeout 60000",
                         "panio video wait pico --text 'Boot Menu' --region 0,0,720,16",
                         "panio video wait pico --image ok-button.png --threshold 0.95 --json"],
                see_also=f"panio video read, panio video shot, docs/jobs.md, {SEE}",
                details="Each new frame is looked at once (OCR, or an OpenCV template match of the needle);\n"
                        "between frames it blocks on the capture daemon, no polling on your side. Exit 22 on\n"
                        "timeout. With --text the screen's text goes to stdout (for a job step's expect_output);\n"
                        "with --image the match's box, score and centre in HID logical units (hid send moveabs).\n"
                        "Cut a needle from a shot: the same scale as the capture, with some detail in it.")
    add_target_positional(c)
    what = c.add_mutually_exclusive_group(required=True)
    what.add_argument("--text", metavar="REGEX", help="a regular expression the screen's text must match")
    what.add_argument("--image", metavar="NEEDLE.png", help="an image (cut from a shot) that must appear")
    th, t = _param("video.wait", "threshold"), _param("video.wait", "timeout_ms")
    c.add_argument("--threshold", type=float, default=th.default, metavar="SCORE",
                   help=f"with --image: how alike, {th.bounds_text()} (1.0 = pixel-exact; default {th.default})")
    c.add_argument("--region", metavar="X,Y,W,H", help="look only in this rectangle (frame pixels)")
    c.add_argument("--timeout", "--timeout-ms", dest="timeout_ms", type=int, default=t.default, metavar="MS",
                   help=f"how long to wait ({t.bounds_text()}, default {t.default})")
    add_json(c)


def _call(args: argparse.Namespace, op: str, extra: dict[str, Any] | None = None) -> Any:
    from controller import dispatch

    lab = load_lab(args)
    lab.channel(args.target, "video")  # not_configured, with its hint, before anything else
    return dispatch.call(lab, args.target, op, {"target": args.target, **(extra or {})})


def _wait_args(args: argparse.Namespace) -> dict[str, Any]:
    return {"timeout_ms": args.timeout_ms, "stable": args.stable, "stable_ms": args.stable_ms,
            "changed_since": args.changed_since}


def watch(args: argparse.Namespace) -> None:
    from controller import dispatch

    lab = load_lab(args)
    table = lab.channel(args.target, "video")
    r = dispatch.call(lab, args.target, "video.watch", {"target": args.target, "video": table})
    if args.json:
        print_json(r)
        return
    for pid in r["reaped"]:
        say(f"stopped the previous video daemon of {args.target} (pid {pid}): {r['reaped_because']}")
    state = "already running" if r["already_running"] else "started"
    say(f"video capture of {args.target}: {state} (pid {r['pid']}, {r['device']})")


def stop(args: argparse.Namespace) -> None:
    r = _call(args, "video.stop")
    if args.json:
        print_json(r)
    else:
        say(f"stopped the video daemon of {args.target} (pid {', '.join(map(str, r['pids']))})")


def shot(args: argparse.Namespace) -> None:
    r = _call(args, "video.shot", _wait_args(args))
    out = args.output or f"{args.target}.png"
    if out == "-" and args.json:  # the PNG inside the JSON (base64): what the MCP tool video_shot returns
        sys.stderr.write(f"signal={r['signal']} hash={r['hash']}\n")
        print_json(r)
        return
    png = base64.b64decode(r.pop("png_b64"))
    if out == "-":
        sys.stdout.buffer.write(png)
        sys.stdout.flush()
    else:
        _write(out, png)
    sys.stderr.write(f"signal={r['signal']} hash={r['hash']}\n")
    if args.json and out != "-":
        print_json({**r, "file": out})
    elif out != "-":
        say(out)


def _write(path: str, png: bytes) -> None:
    from bench_agent.errors import UsageError

    try:
        Path(path).write_bytes(png)
    except OSError as exc:  # a directory that is not there, or not ours: the command line's fault
        raise UsageError(f"cannot write the shot to {path}: {exc.strerror or exc}", argument="output",
                         hint="give -o a file in a directory you can write, or -o - for stdout") from None


def read(args: argparse.Namespace) -> None:
    r = _call(args, "video.read", {**_wait_args(args), "region": args.region})
    sys.stderr.write(f"signal={r['signal']} hash={r['hash']}\n")
    if args.json:
        print_json(r)
    else:
        say(r["text"])


def wait(args: argparse.Namespace) -> None:
    from bench_agent.errors import UsageError

    extra: dict[str, Any] = {"text": args.text, "region": args.region, "timeout_ms": args.timeout_ms,
                             "threshold": args.threshold}
    if args.image:
        try:
            extra["image_b64"] = base64.b64encode(Path(args.image).read_bytes()).decode()
        except OSError as exc:
            raise UsageError(f"cannot read the needle {args.image}: {exc.strerror}", argument="image") from None
    r = _call(args, "video.wait", extra)
    sys.stderr.write(f"signal={r['signal']} hash={r['hash']}\n")
    if args.json:
        print_json(r)
    elif args.text is not None:
        say(r["text"])
    else:
        m = r["match"]
        say(f"found {args.image} at {m['x']},{m['y']} ({m['w']}x{m['h']}) score={m['score']} "
            f"centre moveabs {m['logical'][0]} {m['logical'][1]}")


def status_line(lab: Any, target: str) -> dict[str, Any]:
    """The daemon's state for `video show`: running (pid N) | untracked (pid N) | stopped."""
    from controller import dispatch

    return dispatch.call(lab, target, "video.status", {"target": target})


def describe(st: dict[str, Any], kind: str = "video") -> str:
    """A daemon state line for `video show` / `hid show`."""
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
