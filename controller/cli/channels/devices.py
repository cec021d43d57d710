"""panio video|hid|adb set|rm|show: single-device channels of a target.

These three share a shape (one table per target, one required key) and so
one module. The runtime commands of video and hid (watch, shot, read, send)
live in ``video_runtime`` and ``hid_runtime``; ``video show`` and ``hid show``
add their daemon's state (running / untracked / stopped), read on the
target's host by a body (``bench_agent.commands.video.show``); ``adb show``
prints only what the lab says.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable

from bench_agent.errors import NotConfigured, UsageError
from controller.cli.common import add_field, add_json, command, load_lab, print_json, say, subcommands
from controller.cli.runtime import Step, runtime, static
from controller.lab import edit, edits
from controller.lab.schema import HID_PROTOCOLS


@dataclass(frozen=True)
class Channel:
    key: str
    intro: str
    set_example: str
    add_flags: Callable[[argparse.ArgumentParser, bool], None]
    required: str


def _video_flags(c: argparse.ArgumentParser, first: bool) -> None:
    c.add_argument("--device", help="capture device, e.g. /dev/video0 or /dev/v4l/by-id/...")
    from controller.lab.schema import VIDEO

    add_field(c, VIDEO, "width", help="capture width in pixels")
    add_field(c, VIDEO, "height", help="capture height in pixels")


def _hid_flags(c: argparse.ArgumentParser, first: bool) -> None:
    c.add_argument("--device", help="the rig: a CH9329 serial port, a /dev/hidg gadget, or a QMP socket")
    c.add_argument("--protocol", choices=HID_PROTOCOLS, help="rig protocol (default ch9329)")
    from controller.lab.schema import HID

    add_field(c, HID, "baud", help="line rate of a CH9329 rig", fallback="bench_agent.hid.backends.ch9329:DEFAULT_BAUD")
    add_field(c, HID, "reply_timeout_ms", metavar="MS", fallback="bench_agent.hid.backends.ch9329:REPLY_TIMEOUT_MS",
              help="how long a CH9329 rig's reply to each command may take, in ms (more for a rig reached\n"
                   "over the network, e.g. rfc2217:// or ser2net)")


def _adb_flags(c: argparse.ArgumentParser, first: bool) -> None:
    c.add_argument("--serial", help="the device's adb serial (from `adb devices`)")


CHANNELS = {
    "video": Channel("video", "Video capture: the device that sees the target's screen (a USB dongle, an MJPEG\n"
                              "stream, a QEMU display). `watch` starts the capture daemon; `shot` and `read`\n"
                              "look at the screen (docs/video.md).",
                     "panio video set -t pico --device /dev/video0", _video_flags, "device"),
    "hid": Channel("hid", "Keyboard/mouse rig: types and clicks into the target with `send` (a CH9329 or a\n"
                          "QEMU VM; see `panio skill kvm-puppeting` and docs/hid.md).",
                   "panio hid set -t pico --device /dev/ttyUSB2 --protocol ch9329", _hid_flags, "device"),
    "adb": Channel("adb", "Android targets over adb. To reboot one, make its power hook\n"
                          "`adb -s SERIAL reboot` (panio power set --cycle-cmd); there is no adb reboot command.",
                   "panio adb set -t tablet --serial ABC123", _adb_flags, "serial"),
}


def register(p: argparse.ArgumentParser, name: str) -> None:
    ch = CHANNELS[name]
    p.description = ch.intro
    sub = subcommands(p)
    c = command(sub, "set", f"set the {name} channel of a target", func=lambda a: set_(a, ch),
                example=ch.set_example, see_also=f"panio {name} show, panio {name} rm")
    c.add_argument("-t", "--target", required=True, metavar="TARGET", help="the target to configure")
    ch.add_flags(c, True)
    c = command(sub, "rm", f"remove the {name} channel of a target", func=lambda a: rm(a, ch),
                example=f"panio {name} rm -t pico", see_also=f"panio {name} set")
    c.add_argument("-t", "--target", required=True, metavar="TARGET", help="the target")
    c = command(sub, "show", f"show the {name} channel of a target", func=SHOW[name],
                example=f"panio {name} show pico --json", see_also=f"panio {name} set, panio target show")
    c.add_argument("target_pos", nargs="?", metavar="TARGET", help="the target (or -t TARGET)")
    c.add_argument("-t", "--target", metavar="TARGET", help=argparse.SUPPRESS)
    add_json(c)
    if name == "video":
        from controller.cli.channels import video_runtime

        video_runtime.register(sub)
    elif name == "hid":
        from controller.cli.channels import hid_runtime

        hid_runtime.register(sub)


def _values(args: argparse.Namespace) -> dict:
    keys = ("device", "width", "height", "protocol", "baud", "reply_timeout_ms", "serial")
    return {k: getattr(args, k) for k in keys if hasattr(args, k)}


def set_(args: argparse.Namespace, ch: Channel) -> None:
    values = _values(args)
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if ch.key not in t:
            if not values.get(ch.required):
                raise UsageError(f"target {args.target!r} has no {ch.key} channel yet: give --{ch.required}",
                                 hint=f"e.g. {ch.set_example}")
            t[ch.key] = edits.new_table(values)
            changed = [k for k, v in values.items() if v is not None]
        else:
            changed = edits.set_fields(t[ch.key], values)
    say(f"{ch.key} on {args.target}: " + (f"set {', '.join(changed)}" if changed else "nothing to change"))


def rm(args: argparse.Namespace, ch: Channel) -> None:
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if ch.key not in t:
            raise NotConfigured(f"target {args.target!r} has no {ch.key} channel", target=args.target, channel=ch.key)
        del t[ch.key]
    say(f"removed {ch.key} from {args.target}")


def _show_target(args: argparse.Namespace, key: str) -> str:
    target = args.target_pos or args.target
    if not target:
        raise UsageError(f"name the target: panio {key} show TARGET")
    return target


@static
def show_adb(args: argparse.Namespace) -> None:
    target = _show_target(args, "adb")
    table = load_lab(args).channel(target, "adb")
    if args.json:
        print_json({"target": target, "channel": "adb", **table})
        return
    say(f"{target} adb: " + ", ".join(f"{k}={v}" for k, v in table.items()))


def _show_daemon(args: argparse.Namespace, lab: Any, key: str) -> Step:
    """``video show`` and ``hid show``: the table, and the daemon's state (``bench_agent.commands.video.show``)."""
    target = _show_target(args, key)
    return Step(f"{key}.show", target, {"target": target, "channel": key, "table": dict(lab.channel(target, key)),
                                        "json": args.json})


def _named(args: argparse.Namespace) -> bool:
    return bool(args.target_pos or args.target)  # else "name the target" comes first, whatever the lab file


@runtime(needs_lab=_named)
def show_video(args: argparse.Namespace, lab: Any) -> Step:
    return _show_daemon(args, lab, "video")


@runtime(needs_lab=_named)
def show_hid(args: argparse.Namespace, lab: Any) -> Step:
    return _show_daemon(args, lab, "hid")


SHOW = {"video": show_video, "hid": show_hid, "adb": show_adb}
