"""MCP tool calls as panio commands, so the checker grades them like shell commands.

panio's MCP server names a tool after its command (``serial_send`` is
``panio serial send``, ``power_state`` is ``panio power-state``) and takes the
target, text and names as arguments, everything else as the command's flags.
A call to a tool panio's MCP server serves becomes exactly the command that server
would run (``served_argv``: its tool list, its argument check, its flags; video_shot's
``timeout_ms`` is ``--timeout``), and a stated call it would refuse (an unknown or
missing argument) is graded as a command panio refuses. A call the surface cannot
place is kept as an MCP call but not graded.
"""

from __future__ import annotations

import json
import re

from scenarios.surface import Node, Surface

PREFIXES = ("mcp__panio__", "mcp_panio_", "panio.", "panio__", "panio_")  # Claude, Gemini CLI, Codex, others
NEGATED = {"newline": "--no-newline"}


def tool_path(surface: Surface, tool: str) -> Node | None:
    for p in PREFIXES:
        if tool.startswith(p):
            tool = tool[len(p):]
            break
    parts = tool.split("_")
    for cut in range(len(parts), 0, -1):  # serial_send -> serial send; power_state -> power-state
        head = ["-".join(parts[:cut])] if cut > 1 else [parts[0]]
        for path in ([*parts[:cut]], head):
            node = surface.find(path)
            rest = parts[cut:]
            if node is not None and node.path:
                if rest:
                    node = surface.find([*node.path, "-".join(rest)]) or surface.find([*node.path, *rest])
                if node is not None:
                    return node
    return None


def mcp_argv(surface: Surface, tool: str, args: dict | None) -> list[str] | None:
    node = tool_path(surface, tool)
    if node is None:
        return None
    args = dict(args or {})
    argv = list(node.path)
    for name, _ in node.positionals:
        key = name.lower()
        if key in args:
            argv.append(str(args.pop(key)))
    for key, value in args.items():
        if key in NEGATED:
            if value is False:
                argv.append(NEGATED[key])
            continue
        flag = "--" + key.replace("_", "-")
        if flag not in node.options or value is None or value is False:
            continue
        argv += [flag] if value is True else [flag, str(value)]
    return argv


PLACEHOLDER_VALUE = re.compile(r"^\s*(?:<[^<>]+>|\$\{?\w+\}?|\{\{?[^{}]+\}?\})\s*$")
DUMMY = {"integer": 1, "number": 1, "boolean": True, "array": ["x"], "string": "x"}


def served_argv(tool: str, args: dict) -> tuple[list[str] | None, str]:
    """(argv, refusal) as panio's own MCP server would run the call (controller.mcp: its tool list, its argument
    check, its argv): (None, "") for a tool it does not serve; (None, why) for a call it refuses (an unknown
    argument, a missing required one, a value of the wrong type or out of bounds). A placeholder value
    (``"<seq>"``, ``"$HASH"``) stands for a value of the right type."""
    from controller.mcp.args import BadArguments, check
    from controller.mcp.tools import BY_NAME

    name = _strip(tool)
    spec = BY_NAME.get(name)
    if spec is None:
        return None, ""
    probe = {}
    for key, value in args.items():
        a = spec.arg(key)
        held = a is not None and isinstance(value, str) and PLACEHOLDER_VALUE.match(value) and a.kind != "string"
        probe[key] = DUMMY[a.kind] if held else value
    try:
        check(spec, probe)
    except BadArguments as exc:
        return None, f"panio's MCP server refuses {name} {json.dumps(args, sort_keys=True)}: {exc}"
    flags, positionals = [], []
    for a in spec.args:
        value = args.get(a.name)
        if value is None:
            continue
        if a.flag is None:
            positionals += [str(v) for v in value] if isinstance(value, list) else [str(value)]
        elif a.kind == "boolean":
            if bool(value) != a.negate:
                flags.append(a.flag)
        else:
            flags += [a.flag, str(value)]
    words = [w for w in spec.command if not w.startswith("-")]  # the command path, then its own flags (--json)
    return [*words, *positionals, *[w for w in spec.command if w.startswith("-")], *flags], ""


def _strip(tool: str) -> str:
    for p in PREFIXES:
        if tool.startswith(p):
            return tool[len(p):]
    return tool


def add_calls(ev, surface: Surface):
    """The evidence's MCP tool calls (run or stated as JSON lines) as commands of source ``mcp``, in order,
    so ``panio-eval grade`` grades an mcp-condition answer as a trial does (run, regrade and grade all use
    this). A call is the command panio's MCP server would run for it; a stated call it would refuse is kept
    as a command with that ``problem`` (graded as a command panio refuses); a run one that was refused did
    nothing and is left out. Calls already added are not added twice."""
    from scenarios.evidence import Command

    if any(c.source == "mcp" for c in ev.commands):
        return ev
    for call in ev.mcp_calls:
        args = call.get("arguments")
        args = args if isinstance(args, dict) else {}
        argv, refused = served_argv(call.get("tool", ""), args)
        if refused:
            if call.get("stated"):
                node = tool_path(surface, call.get("tool", ""))
                ev.commands.append(Command(list(node.path) if node else [_strip(call.get("tool", ""))], "mcp",
                                           problem=refused))
            continue
        if argv is None:
            argv = mcp_argv(surface, call.get("tool", ""), args)
        if argv is not None:
            ev.commands.append(Command(argv, "mcp"))
    return ev
