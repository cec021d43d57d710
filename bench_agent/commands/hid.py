"""The bodies of ``panio hid show|send|serve|stop``.

``opts`` carries ``target``, ``json``, ``hid`` (the lab's table; not for
``stop``) and, for ``send``, ``words`` (the HID command as typed, options
that argparse left among them included) and ``pace_ms``. ``show`` takes
``channel`` and ``table`` (``bench_agent.commands.video.show``).
"""

from __future__ import annotations

from typing import Any

from bench_agent.commands import Call, Output, command, fields
from bench_agent.commands.daemon_shapes import SHOW, STOPPED, WATCH
from bench_agent.errors import UsageError

OPTIONS = ("--json", "--pace-ms")

SENT = fields({
    "target": ("string", "the target"),
    "protocol": ("string", "the rig's protocol (ch9329, hidg, qmp)"),
    "via": ("string", "daemon (the rig's daemon held it) or direct"),
    "verb": ("string", "key, type, moveabs, click or scroll"),
    "key?": ("string", "key: the key or chord sent"),
    "chars?": ("integer", "type: characters typed"),
    "x?": ("integer", "moveabs: logical x (0..32767)"),
    "y?": ("integer", "moveabs: logical y (0..32767)"),
    "button?": ("string", "click: the button"),
    "notches?": ("integer", "scroll: notches (negative: down)"),
})


@command("hid.show", output=SHOW)
def show(call: Call, opts: dict, out: Output, context: dict) -> None:
    from bench_agent.commands.video import show as show_daemon

    show_daemon(call, opts, out)


@command("hid.serve", output=WATCH)
def serve(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    r = call("hid.serve", {"target": target, "hid": opts["hid"]})
    if opts.get("json"):
        out.json(r)
        return
    for pid in r["reaped"]:
        out.say(f"reaped an untracked HID daemon of {target} (pid {pid})")
    out.say(f"HID rig of {target}: {'already held' if r['already_running'] else 'held'} by pid {r['pid']} "
            f"({r['device']})")


@command("hid.stop", output=STOPPED)
def stop(call: Call, opts: dict, out: Output, context: dict) -> None:
    r = call("hid.stop", {"target": opts["target"]})
    if opts.get("json"):
        out.json(r)
    else:
        out.say(f"stopped the HID daemon of {opts['target']} (pid {', '.join(map(str, r['pids']))})")


def _leading_options(flags: dict[str, Any], words: list[str]) -> list[str]:
    """Options between TARGET and the command (argparse hands them over as command words), into ``flags``."""
    while words and words[0] in OPTIONS:
        if words.pop(0) == "--json":
            flags["json"] = True
            continue
        try:
            flags["pace_ms"] = int(words.pop(0))
        except (IndexError, ValueError):
            raise UsageError("--pace-ms takes a whole number of milliseconds", hint="see `panio hid send --help`") \
                from None
    return words


def _trailing_options(flags: dict[str, Any], words: list[str]) -> list[str]:
    """Options after the command (`key ENTER --json`), which argparse hands over as command words.

    After key, moveabs, click and scroll a word can never be an option. After `type` the words are
    text, so a word that is exactly an option is refused rather than typed into the target.
    """
    if words and words[0].lower() == "type":
        stray = [w for w in words[1:] if w in OPTIONS]
        if stray:
            raise UsageError(f"{stray[0]} after `type` would be typed into the target",
                             hint="put options before the command (`panio hid send T --json type TEXT`), "
                                  "or quote the text to type it: type 'ls --json'")
        return words
    for i, word in enumerate(words):
        if word in OPTIONS:
            return words[:i] + _leading_options(flags, words[i:])  # anything left makes a bad command
    return words


@command("hid.send", output=SENT)
def send(call: Call, opts: dict, out: Output, context: dict) -> None:
    flags = {"json": opts.get("json", False), "pace_ms": opts.get("pace_ms")}
    words = _trailing_options(flags, _leading_options(flags, list(opts["words"])))
    if not words:
        raise UsageError("give a HID command: key NAME | type TEXT | moveabs X Y | click [BUTTON] | scroll N",
                         hint="see `panio hid send --help`")
    target = opts["target"]
    r = call("hid.send", {"target": target, "hid": opts["hid"], "command": words, "pace_ms": flags["pace_ms"]})
    if flags["json"]:
        out.json(r)
        return
    detail = {"key": lambda: r["key"], "type": lambda: f"{r['chars']} characters",
              "moveabs": lambda: f"{r['x']} {r['y']}", "click": lambda: r["button"],
              "scroll": lambda: str(r["notches"])}[r["verb"]]()
    out.say(f"{target}: {r['verb']} {detail}")
