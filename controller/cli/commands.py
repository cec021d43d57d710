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
    "init": ("controller.cli.lab.init_cmd", "setup", "create a lab file"),
    "target": ("controller.cli.lab.target", "setup", "add, remove, show and list targets; their health (maintenance)"),
    "host": ("controller.cli.lab.host", "setup", "control hosts that own targets' devices (reached over SSH)"),
    "serial": ("controller.cli.channels.serial", "drive", "serial consoles: watch, log, send, transact, wait; add/set/rm interfaces"),
    "netboot": ("controller.cli.channels.netboot", "drive", "network boot: start|stop|status serving a kernel, stage a build's file; set/rm interface and TFTP root"),
    "netif": ("controller.cli.channels.netif", "drive", "a target's dedicated link: mode link|ffx|off, down-hard, status (ffx address)"),
    "power": ("controller.cli.channels.power", "drive", "power on|off TARGET; set/rm the hooks that switch it (optional levels)"),
    "video": ("controller.cli.channels.devices", "drive", "screen capture: watch, shot, read (OCR), wait; set/rm/show the capture device"),
    "hid": ("controller.cli.channels.devices", "drive", "keyboard/mouse input: send key|type|moveabs|click|scroll, serve; set/rm the rig"),
    "adb": ("controller.cli.channels.devices", "setup", "the Android (adb) serial of a target"),
    "action": ("controller.cli.channels.action", "drive", "named actions: action run TARGET NAME; add/rm/list"),
    "config": ("controller.cli.lab.config", "setup", "show the whole lab file"),
    "discover": ("controller.cli.lab.discover", "setup", "list this host's hardware that could be wired into the lab"),
    "doctor": ("controller.cli.lab.doctor", "setup", "check targets' configuration against the hardware actually present"),
    "configure": ("controller.cli.lab.configure", "setup", "propose a target block from a host's hardware (prints; writes nothing)"),
    "power-cycle": ("controller.cli.channels.power", "drive", "power-cycle a target through its power hooks"),
    "power-state": ("controller.cli.channels.power", "drive", "is the target powered? (state hook or serial sense line; changes nothing)"),
    "mcp": ("controller.cli.serve.mcp_cmd", "drive", "serve the runtime commands as MCP tools over stdio (for agent harnesses)"),
    "helper": ("controller.cli.admin.helper", "operate", "list the bundled helper programs (shellyplug, ...) or run one"),
    "daemons": ("controller.cli.serve.daemons", "operate", "list and stop this host's panio daemons (serial and video capture, HID rigs), strays too"),
    "ping": ("controller.cli.channels.ping", "drive", "a no-op round trip to the agent that owns a target"),
    "job": ("controller.cli.jobs.job", "operate", "run, queue and follow bench jobs (steps with expectations; JUnit, CI exit codes)"),
    "suite": ("controller.cli.jobs.suite", "operate", "run job files over a matrix of targets (parallel across targets)"),
    "schedule": ("controller.cli.jobs.schedule", "operate", "run suites at set times (exactly one scheduler)"),
    "bisect": ("controller.cli.jobs.bisect", "operate", "find the first build that breaks a board: a job over builds, binary search"),
    "lease": ("controller.cli.jobs.lease", "operate", "list and break exclusive target leases held by jobs"),
    "worker": ("controller.cli.serve.worker", "operate", "run a control host's bench worker (Celery, queue host.NAME)"),
    "recorder": ("controller.cli.serve.recorder", "operate", "record the control hosts' signed reports (workers without a results URL)"),
    "keys": ("controller.cli.admin.keys", "operate", "the keys that sign broker messages: init, trust, untrust, list"),
    "token": ("controller.cli.admin.token", "operate", "API tokens for people and CI: add (secret shown once), list, rm (revoke)"),
    "dashboard": ("controller.cli.serve.dashboard", "operate", "serve the operator's web dashboard: hosts, targets, jobs (loopback)"),
    "setup": ("controller.cli.admin.setup", "operate", "provision a control host: venv, worker unit, devices (Ansible)"),
    "skill": ("controller.cli.admin.skill", "learn", "print the panio skill: mental model, command map, traps (start here)"),
}

# What a job step may run: commands that drive or read a target and never edit the lab file, manage jobs
# or start servers. A name mapped to None allows the whole command; a tuple allows only those subcommands.
# Anything not listed is refused (by `job check`, and by the step's own panio at run time), so a command
# added to the CLI stays out of jobs until it is listed here. The MCP tools are a subset (a test checks).
RUNTIME: dict[str, tuple[str, ...] | None] = {
    "serial": ("watch", "stop", "log", "send", "transact", "wait", "evidence", "status", "reset", "dtr", "devices"),
    "power": ("on", "off"),
    "power-cycle": None,
    "power-state": None,
    "action": ("run", "list"),
    "ping": None,
    "netboot": ("tftp-root", "start", "stop", "status", "stage"),
    "netif": ("mode", "down-hard", "status"),
    "video": ("show", "watch", "stop", "shot", "read", "wait"),
    "hid": ("show", "send", "serve", "stop"),
    "adb": ("show",),
    "target": ("show", "list"),
    "host": ("show", "list"),
    "config": ("show",),
    "doctor": None,
    "discover": None,
    "configure": None,
}

# Reading commands ``main`` runs without building a parser (``main._quick_parse``): argparse and the ``re``,
# ``enum`` and ``functools`` it imports are most of such a command's start-up. (command, subcommand) -> the
# handler (module:function), its positional arguments, its on/off flags, its other options that take a value
# (-> their dest), and the operation whose parameters are its other flags and options (their spelling, type,
# bounds, default and which exclude each other come from the spec, as ``common.add_param`` builds them).
# Only a plain line is taken this way (`[--lab PATH] COMMAND SUBCOMMAND` and those words, an option's value
# as `--opt V` or `--opt=V`); anything else (--help, a typo, an abbreviation, a bad value) goes to argparse as
# before, and a test parses every shape both ways and requires the same result (tests/test_light_help.py).
QUICK: dict[tuple[str, str], dict] = {
    ("target", "list"): {"handler": "controller.cli.lab.target:list_", "flags": ("--json",)},
    ("config", "show"): {"handler": "controller.cli.lab.config:show", "flags": ("--json", "--path")},
    ("serial", "log"): {"handler": "controller.cli.channels.serial_runtime:log", "positionals": ("target",),
                        "flags": ("--json",), "options": {"-i": "interface", "--interface": "interface"},
                        "op": "serial.log"},
}

# Words a newcomer types for a goal whose command has another name. A spelling near miss alone
# would point them astray: `reset` is closest to `setup` (provision a host), `flash` to `lease`.
INTENTS = {
    "reboot": "power-cycle", "reset": "power-cycle", "restart": "power-cycle", "cycle": "power-cycle",
    "flash": "action run", "console": "serial connect", "log": "serial log", "logs": "serial log",
    "send": "serial send", "watch": "serial watch",
}


def near_command(word: str) -> str | None:
    """The command a mistyped or guessed top-level word most likely meant, or None."""
    from bench_agent.nearmiss import closest

    if word in INTENTS:
        return INTENTS[word]
    return closest(word, COMMANDS, cutoff=0.75)


def is_runtime(command: str, subcommand: str | None) -> bool:
    """Whether ``panio COMMAND [SUBCOMMAND]`` is a runtime command (see ``RUNTIME``)."""
    if command not in RUNTIME:
        return False
    allowed = RUNTIME[command]
    return allowed is None or subcommand in allowed


def runtime_names() -> list[str]:
    """The runtime commands as people type them (``serial send``, ``power-cycle``), for messages and docs."""
    return [name if subs is None else f"{name} {'|'.join(subs)}" for name, subs in RUNTIME.items()]


def refuse_in_job(command: str, subcommand: str | None) -> str | None:
    """Why ``panio COMMAND [SUBCOMMAND]`` may not run as a job step, or None if it may."""
    if is_runtime(command, subcommand):
        return None
    what = f"panio {command}" + (f" {subcommand}" if subcommand else "")
    section = COMMANDS.get(command, ("", "", ""))[1]
    if section == "operate":
        why = "manages jobs, workers, daemons or helpers, not a target"
    elif section == "learn":
        why = "does nothing to a target"
    elif command == "serial" and subcommand == "connect":
        why = "is interactive, and a job step has no terminal"
    elif command == "mcp":
        why = "starts a server"
    else:
        why = "configures the lab (a job never edits the lab file, host keys or hooks)"
    return f"`{what}` cannot run inside a job: it {why}; a step runs only runtime commands (docs/jobs.md)"
