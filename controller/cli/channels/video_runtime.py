"""panio video watch|stop|shot|read|wait: the capture daemon and what it sees, at run time.

Each command's plan resolves the target's video table from the lab file; its
body (``bench_agent.commands.video``) calls a ``video.<verb>`` operation on
the host that owns the capture device. ``shot`` and ``read`` read the
daemon's latest frame; ``--changed-since HASH`` blocks until the frame
differs (no polling loop on the caller's side) and ``--stable`` until the
picture stops changing.
``wait`` blocks until text (OCR) or a needle image appears on the screen.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json, add_param, add_target_positional, command
from controller.cli.runtime import Step, runtime, spec_args

SEE = "docs/video.md, panio skill kvm-puppeting"


def _wait_opts(c: argparse.ArgumentParser, op: str) -> None:
    add_param(c, op, "timeout_ms", "--timeout", "--timeout-ms", metavar="MS")
    add_param(c, op, "stable", help="wait until the picture stops changing (after a reboot or a key press)")
    add_param(c, op, "stable_ms", metavar="MS")
    add_param(c, op, "changed_since", metavar="HASH",
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
                   help="where to write the PNG (default: STATE/shots/TARGET-TIME.png, path printed; - = stdout; "
                        "with --json: base64 in png_b64)")
    _wait_opts(c, "video.shot")
    add_json(c)
    c = command(sub, "read", "read the text on the screen (OCR with tesseract)", func=read,
                example=["panio video read pico --stable", "panio video read pico --region 0,0,720,16"],
                see_also=f"panio video shot, {SEE}",
                details="OCR is weak on tiny fonts: crop with --region rather than changing the target's console\n"
                        "font (never change it to help OCR). Text goes to stdout, hash= to stderr.")
    add_target_positional(c)
    add_param(c, "video.read", "region", metavar="X,Y,W,H", help="read only this rectangle (frame pixels)")
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
    add_param(c, "video.wait", "threshold", metavar="SCORE")
    add_param(c, "video.wait", "max_distance", metavar="N",
              help="with --text: accept the text with up to N characters wrong, extra or missing (edit distance; "
                   "OCR misreads V as U, O as Q); the distance found is printed on stderr and in --json")
    add_param(c, "video.wait", "region", metavar="X,Y,W,H", help="look only in this rectangle (frame pixels)")
    add_param(c, "video.wait", "timeout_ms", "--timeout", "--timeout-ms", metavar="MS")
    add_json(c)


# -- plans (the bodies are in bench_agent.commands.video) -------------------------------------------


def _plan(args: argparse.Namespace, lab: Any, command: str, opts: dict[str, Any]) -> Step:
    lab.channel(args.target, "video")  # not_configured, with its hint, before anything else
    return Step(command, args.target, {"target": args.target, "json": args.json, **opts})


@runtime
def watch(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "video.watch", {"video": dict(lab.channel(args.target, "video"))})


@runtime
def stop(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "video.stop", {})


@runtime
def shot(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "video.shot", {**spec_args(args, "video.shot"), "output": args.output})


@runtime
def read(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "video.read", spec_args(args, "video.read"))


@runtime
def wait(args: argparse.Namespace, lab: Any) -> Step:
    # --image is a file's path: the body reads it into the operation's image_b64
    return _plan(args, lab, "video.wait", {**spec_args(args, "video.wait"), "image": args.image})
