"""The T1-safe command set (seed §2.2): what a config-only trial may run.

Lab-mutating verbs and read-only inspections only. Everything else (any
start/watch/send/mode/on/off/cycle/console/setup, running a named helper,
``daemons stop``) is T0-only: the argv shim refuses it and the trial fails.
The drift guard asserts every key here is a real (or announced) command.

Beyond the seed's list: ``action add/rm`` and ``hid show`` (they only edit or
read lab.toml, like their siblings).
"""

from __future__ import annotations

ANY, BARE = "any", "bare"

SAFE: dict[str, str] = {
    # lab-mutating verbs
    "init": ANY,
    "target add": ANY, "target rm": ANY,
    "serial add": ANY, "serial set": ANY, "serial rm": ANY,
    "netboot set": ANY, "netboot rm": ANY,
    "power set": ANY, "power rm": ANY,
    "video set": ANY, "video rm": ANY,
    "hid set": ANY, "hid rm": ANY,
    "adb set": ANY, "adb rm": ANY,
    "host add": ANY, "host set": ANY, "host rm": ANY,
    "action add": ANY, "action rm": ANY,
    # read-only inspections
    "config show": ANY,
    "target show": ANY, "host show": ANY, "adb show": ANY, "video show": ANY, "hid show": ANY,
    "target list": ANY, "host list": ANY, "action list": ANY,
    "serial log": ANY, "serial devices": ANY,
    "netboot tftp-root": ANY, "netboot status": ANY,
    "netif status": ANY,
    "discover": ANY, "doctor": ANY, "skill": ANY, "configure": ANY,
    "helper": BARE,  # the list only: running a named helper is T0
    "daemons": BARE,  # the list only: daemons stop is T0
}

HELP = {"-h", "--help"}
GLOBAL_VALUE = {"--lab"}


def command_path(argv: list[str], groups: set[str]) -> tuple[str, list[str]]:
    """(the command path, the tokens after it); ``groups`` are commands that have subcommands."""
    toks = list(argv)
    while toks and toks[0].startswith("-"):
        t = toks.pop(0)
        if t in GLOBAL_VALUE and toks:
            toks.pop(0)
    if not toks:
        return "", []
    path = toks.pop(0)
    if path in groups and toks and not toks[0].startswith("-"):
        path = f"{path} {toks.pop(0)}"
    return path, toks


def classify(argv: list[str], groups: set[str], lab: str | None = None) -> str | None:
    """None when ``argv`` is allowed in a T1 trial, else the reason it is refused (fail closed)."""
    for i, t in enumerate(argv):
        if t == "--lab" or t.startswith("--lab="):
            value = t.split("=", 1)[1] if "=" in t else (argv[i + 1] if i + 1 < len(argv) else "")
            if lab is None or value != lab:
                return "--lab points away from this trial's lab file"
    if HELP & set(argv) or "--version" in argv:
        return None
    path, rest = command_path(argv, groups)
    if path == "":
        return None  # bare `panio`: the top help
    rule = SAFE.get(path)
    if rule is None:
        return f"`panio {path}` is outside the T1-safe set (it may touch hardware)"
    if rule == BARE and any(not t.startswith("-") for t in rest):
        return f"only the bare `panio {path}` listing is T1-safe"
    return None
