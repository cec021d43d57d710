"""The top-level command table: name → (module, section, one-line summary).

``main`` imports a command's module only when that command runs, so
``panio --help`` costs nothing but this table. A module serving several
top-level names (``power``, ``power-cycle``, ``power-state``) gets the name
it is registering.
"""

from __future__ import annotations

SECTIONS = {
    "setup": "Set up the lab (edits lab.toml; channel commands take -t TARGET)",
    "drive": "Drive a target (runtime; the target is positional: panio power-cycle pico)",
    "operate": "Operate the bench",
    "learn": "Learn",
}

COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("controller.cli.init_cmd", "setup", "create a lab file"),
    "target": ("controller.cli.target", "setup", "add, remove, show and list targets"),
    "host": ("controller.cli.host", "setup", "control hosts that own targets' devices (reached over SSH)"),
    "serial": ("controller.cli.serial", "drive", "serial consoles: watch, log, send, transact, wait; add/set/rm interfaces"),
    "netboot": ("controller.cli.netboot", "setup", "network boot: interface and TFTP root of a target"),
    "power": ("controller.cli.power", "drive", "power on|off TARGET; set/rm the hooks that switch it (optional levels)"),
    "video": ("controller.cli.channels", "drive", "screen capture: watch, shot, read (OCR); set/rm/show the capture device"),
    "hid": ("controller.cli.channels", "drive", "keyboard/mouse input: send key|type|moveabs|click|scroll, serve; set/rm the rig"),
    "adb": ("controller.cli.channels", "setup", "the Android (adb) serial of a target"),
    "action": ("controller.cli.action", "drive", "named actions: action run TARGET NAME; add/rm/list"),
    "config": ("controller.cli.config", "setup", "show the whole lab file"),
    "discover": ("controller.cli.discover", "setup", "list this host's hardware that could be wired into the lab"),
    "doctor": ("controller.cli.doctor", "setup", "check targets' configuration against the hardware actually present"),
    "configure": ("controller.cli.configure", "setup", "propose a target block from a host's hardware (prints; writes nothing)"),
    "power-cycle": ("controller.cli.power", "drive", "power-cycle a target through its power hooks"),
    "power-state": ("controller.cli.power", "drive", "is the target powered? (state hook or serial sense line; changes nothing)"),
    "mcp": ("controller.cli.mcp_cmd", "drive", "serve the runtime commands as MCP tools over stdio (for agent harnesses)"),
    "helper": ("controller.cli.helper", "operate", "list the bundled helper programs (shellyplug, ...) or run one"),
    "daemons": ("controller.cli.daemons", "operate", "list and stop this host's panio daemons (serial and video capture, HID rigs), strays too"),
    "ping": ("controller.cli.ping", "drive", "a no-op round trip to the agent that owns a target"),
    "job": ("controller.cli.job", "operate", "run, queue and follow bench jobs (steps with expectations; JUnit, CI exit codes)"),
    "suite": ("controller.cli.suite", "operate", "run job files over a matrix of targets (parallel across targets)"),
    "schedule": ("controller.cli.schedule", "operate", "run suites at set times (exactly one scheduler)"),
    "lease": ("controller.cli.lease", "operate", "list and break exclusive target leases held by jobs"),
    "worker": ("controller.cli.worker", "operate", "run a control host's bench worker (Celery, queue host.NAME)"),
    "skill": ("controller.cli.skill", "learn", "print the panio skill: mental model, command map, traps (start here)"),
}
