"""MCP tool calls as panio commands, so the checker grades them like shell commands.

panio's MCP server names a tool after its command (``serial_send`` is
``panio serial send``, ``power_state`` is ``panio power-state``) and takes the
target, text and names as arguments, everything else as the command's flags.
A call the surface cannot place is kept as an MCP call but not graded.
"""

from __future__ import annotations

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


def add_calls(ev, surface: Surface):
    """The evidence's MCP tool calls (run or stated as JSON lines) as commands of source ``mcp``, in order,
    so ``panio-eval grade`` grades an mcp-condition answer as a trial does. Calls already added are not
    added twice."""
    from scenarios.evidence import Command

    if any(c.source == "mcp" for c in ev.commands):
        return ev
    for call in ev.mcp_calls:
        args = call.get("arguments")
        argv = mcp_argv(surface, call.get("tool", ""), args if isinstance(args, dict) else {})
        if argv is not None:
            ev.commands.append(Command(argv, "mcp"))
    return ev
