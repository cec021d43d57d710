"""Agent adapters: how to start each headless harness, realize a condition, read its stream.

Each adapter turns the harness's own event stream into ``Evidence``: shell
commands, MCP tool calls, files read, the final answer, token usage and turns.

* Claude Code ``-p --output-format stream-json --verbose``: totals from the final
  ``result`` event, else usage deduplicated by assistant message id (one
  message is streamed as several events that repeat its usage).
* Codex ``exec --json``: ``item.completed`` command_execution / mcp_tool_call /
  agent_message items; usage summed over ``turn.completed``.
* Gemini CLI ``--output-format stream-json``: ``tool_use``/``tool_result``,
  assistant ``message`` chunks, ``result.stats``; its built-in tool names are
  current (``grep_search``, ``activate_skill`` …), anything else is an MCP tool
  (``mcp_<server>_<tool>``); skills live in ``~/.gemini/skills`` (Warm).
* pi ``--print --mode json``: ``tool_execution_start/end``, assistant
  ``message_end`` (with per-message usage).
* any other command (CMD): prompt on stdin; its stdout is sniffed for one of the
  formats above, else taken as the plain final answer.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from scenarios.evidence import Evidence

MCP_CONFIG = ".panio-eval-mcp.json"  # under the sandbox HOME (mcp condition)
READ_HINTS = ("SKILL.md", "/docs/", "docs/")
# Gemini CLI's built-in tools (docs/reference/tools.md); any other tool is an MCP tool (`mcp_<server>_<tool>`)
GEMINI_BUILTIN = {"list_directory", "glob", "grep_search", "search_file_content", "write_file", "replace", "write_todos",
                  "ask_user", "web_fetch", "google_web_search", "save_memory", "codebase_investigator", "read_many_files",
                  "read_file", "run_shell_command", "activate_skill"}


def _lines(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _unwrap_shell(cmd: str) -> str:
    """``bash -lc 'panio …'`` -> ``panio …`` (Codex wraps commands this way)."""
    try:
        toks = shlex.split(cmd)
    except ValueError:
        return cmd
    if len(toks) == 3 and toks[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and toks[1] in ("-lc", "-c"):
        return toks[2]
    return cmd


def _note_read(ev: Evidence, path: str | None) -> None:
    if path and any(h in path for h in READ_HINTS):
        ev.reads.append(path)


# --- Claude Code -------------------------------------------------------------------------------------------

def parse_claude(stdout: str) -> Evidence:
    ev = Evidence(from_stream=True)
    pending: dict[str, int] = {}
    usage_by_msg: dict[str, dict] = {}
    last_text, final = "", None
    for e in _lines(stdout):
        t = e.get("type")
        if t == "system" and e.get("subtype") == "init":
            ev.model = e.get("model") or ev.model
        if t == "assistant":
            msg = e.get("message") or {}
            if msg.get("id") and isinstance(msg.get("usage"), dict):
                usage_by_msg[msg["id"]] = msg["usage"]
            for item in msg.get("content") or []:
                if item.get("type") == "text":
                    last_text = item.get("text", "")
                elif item.get("type") == "tool_use":
                    _claude_tool(ev, item, pending)
        elif t == "user":
            for item in (e.get("message") or {}).get("content") or []:
                if isinstance(item, dict) and item.get("type") == "tool_result" and item.get("tool_use_id") in pending:
                    _set_exit(ev, pending.pop(item["tool_use_id"]), 1 if item.get("is_error") else 0,
                              _text_of(item.get("content")))
        elif t == "result":
            final = e
    if final is not None and final.get("is_error") and final.get("subtype") != "error_max_turns":
        ev.harness_error = str(final.get("subtype") or "error") + (f": {final.get('result')}" if final.get("result") else "")
    if final is not None:
        ev.turns = final.get("num_turns")
        ev.tokens = _claude_usage(final.get("usage") or {})
        if final.get("total_cost_usd") is not None:
            ev.tokens["cost_usd"] = final["total_cost_usd"]
        last_text = final.get("result") or last_text
    elif usage_by_msg:
        tot: dict = {}
        for u in usage_by_msg.values():
            for k, v in _claude_usage(u).items():
                tot[k] = tot.get(k, 0) + v
        ev.tokens, ev.turns = tot, len(usage_by_msg)
    ev.add_answer(last_text)
    return ev


def _claude_usage(u: dict) -> dict:
    keys = {"input_tokens": "input", "output_tokens": "output", "cache_read_input_tokens": "cache_read",
            "cache_creation_input_tokens": "cache_write"}
    return {new: int(u[old]) for old, new in keys.items() if isinstance(u.get(old), (int, float))}


def _claude_tool(ev: Evidence, item: dict, pending: dict) -> None:
    name, inp = item.get("name", ""), item.get("input") or {}
    if name == "Bash" and inp.get("command"):
        before = len(ev.commands)
        ev.add_shell(inp["command"])
        if len(ev.commands) > before:
            pending[item.get("id", "")] = before
    elif name.startswith("mcp__"):
        ev.mcp_calls.append({"tool": name, "arguments": inp})
    elif name == "Read":
        _note_read(ev, inp.get("file_path"))
    elif name == "Skill":
        ev.reads.append(f"skill:{inp.get('skill') or inp.get('name') or inp.get('command', '')}")


def _set_exit(ev: Evidence, index: int, status: int, output: str | None = None) -> None:
    for c in ev.commands[index:]:
        if c.exit is None:
            c.exit = status
            if output:
                c.output = output  # one shell line's output: each panio command of it may have printed it


def _text_of(content) -> str:
    """A tool result's text: a string, or a list of content blocks ({"type": "text", "text": ...})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(x.get("text", "") for x in content if isinstance(x, dict) and isinstance(x.get("text"), str))
    return ""


# --- Codex -------------------------------------------------------------------------------------------------

def parse_codex(stdout: str) -> Evidence:
    ev = Evidence(from_stream=True)
    last_text, turns, tokens = "", 0, {}
    for e in _lines(stdout):
        t = e.get("type")
        if t == "item.completed":
            item = e.get("item") or {}
            kind = item.get("type") or item.get("item_type")
            if kind == "command_execution":
                before = len(ev.commands)
                ev.add_shell(_unwrap_shell(item.get("command", "")), exit=item.get("exit_code"))
                for c in ev.commands[before:]:
                    c.output = _text_of(item.get("aggregated_output"))
                for tok in _unwrap_shell(item.get("command", "")).split():
                    _note_read(ev, tok)
            elif kind == "mcp_tool_call":
                ev.mcp_calls.append({"tool": f"{item.get('server', '')}.{item.get('tool', '')}",
                                     "arguments": item.get("arguments")})
            elif kind in ("agent_message", "assistant_message"):
                last_text = item.get("text", "")
        elif t in ("turn.failed", "error"):
            err = e.get("error") if isinstance(e.get("error"), dict) else {}
            ev.harness_error = str(err.get("message") or e.get("message") or t)
        elif t == "turn.completed":
            turns += 1
            u = e.get("usage") or {}
            for old, new in (("input_tokens", "input"), ("cached_input_tokens", "cache_read"), ("output_tokens", "output")):
                if isinstance(u.get(old), (int, float)):
                    tokens[new] = tokens.get(new, 0) + int(u[old])
    ev.turns, ev.tokens = (turns or None), tokens
    ev.add_answer(last_text)
    return ev


# --- Gemini CLI --------------------------------------------------------------------------------------------

def parse_gemini(stdout: str) -> Evidence:
    ev = Evidence(from_stream=True)
    pending: dict[str, int] = {}
    chunks: list[str] = []
    for e in _lines(stdout):
        t = e.get("type")
        if t == "message" and e.get("role") == "assistant":
            chunks.append(e.get("content") or "")
        elif t == "tool_use":
            chunks = []
            name, params = e.get("tool_name", ""), e.get("parameters") or {}
            if name in ("run_shell_command", "shell") and params.get("command"):
                before = len(ev.commands)
                ev.add_shell(params["command"])
                pending[e.get("tool_id", "")] = before
            elif name in ("read_file", "read_many_files"):
                _note_read(ev, params.get("absolute_path") or params.get("file_path") or params.get("path"))
            elif name == "activate_skill":
                ev.reads.append(f"skill:{params.get('name') or params.get('skill') or ''}")
            elif name not in GEMINI_BUILTIN:
                ev.mcp_calls.append({"tool": name, "arguments": params})
        elif t == "tool_result" and e.get("tool_id") in pending:
            _set_exit(ev, pending.pop(e["tool_id"]), 0 if e.get("status") == "success" else 1,
                      _text_of(e.get("output")) or _text_of((e.get("error") or {}).get("message")
                                                            if isinstance(e.get("error"), dict) else None))
        elif t == "init":
            ev.model = e.get("model") or ev.model
        elif t == "result":
            if e.get("status") == "error":
                ev.harness_error = str((e.get("error") or {}).get("message") if isinstance(e.get("error"), dict) else e.get("error") or "error")
            s = e.get("stats") or {}
            ev.tokens = {new: int(s[old]) for old, new in (("input_tokens", "input"), ("output_tokens", "output"),
                                                           ("total_tokens", "total")) if isinstance(s.get(old), (int, float))}
    ev.add_answer("".join(chunks))
    return ev


# --- pi ----------------------------------------------------------------------------------------------------

def parse_pi(stdout: str) -> Evidence:
    ev = Evidence(from_stream=True)
    pending: dict[str, int] = {}
    last_text, turns, tokens = "", 0, {}
    for e in _lines(stdout):
        t = e.get("type")
        if t == "tool_execution_start":
            args = e.get("args") or {}
            if e.get("toolName") == "bash" and args.get("command"):
                before = len(ev.commands)
                ev.add_shell(args["command"])
                pending[e.get("toolCallId", "")] = before
            elif e.get("toolName") == "read":
                _note_read(ev, args.get("path") or args.get("file_path"))
        elif t == "tool_execution_end" and e.get("toolCallId") in pending:
            result = e.get("result")
            _set_exit(ev, pending.pop(e["toolCallId"]), 1 if e.get("isError") else 0,
                      _text_of(result.get("content") if isinstance(result, dict) else result))
        elif t == "message_end" and (e.get("message") or {}).get("role") == "assistant":
            msg = e["message"]
            turns += 1
            texts = [c.get("text", "") for c in msg.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
            if any(x.strip() for x in texts):
                last_text = "\n".join(texts)
            u = msg.get("usage") or {}
            for old, new in (("input", "input"), ("output", "output"), ("cacheRead", "cache_read"), ("cacheWrite", "cache_write")):
                if isinstance(u.get(old), (int, float)):
                    tokens[new] = tokens.get(new, 0) + int(u[old])
            cost = (u.get("cost") or {}).get("total") if isinstance(u.get("cost"), dict) else None
            if isinstance(cost, (int, float)):
                tokens["cost_usd"] = tokens.get("cost_usd", 0) + cost
    ev.turns, ev.tokens = (turns or None), tokens
    ev.add_answer(last_text)
    return ev


# --- limits ------------------------------------------------------------------------------------------------

CONTEXT_RE = re.compile(r"context[ _](?:window|length)|prompt is too long|maximum context", re.I)


def limit_of(name: str, stdout: str, status: int | None) -> tuple[str, str] | None:
    """The limit the harness says it stopped at, as (kind, what): ``turns`` or ``tokens`` (None: no limit).

    Claude Code ends with a ``result`` of subtype ``error_max_turns`` (``--max-turns``) or
    ``error_max_budget_usd`` (``--max-budget-usd``); Gemini CLI exits 53 when its turn limit
    is exceeded (docs/cli/headless.md); pi's last assistant message stops for ``length`` (its
    output-token limit); any harness that reports running out of its context window hit a token
    limit. (The time limit, ``--timeout-s``, is the runner's own.)"""
    events = _lines(stdout)
    if name == "cmd":  # a custom command: whichever format it printed
        types = {e.get("type") for e in events}
        name = ("claude" if "result" in types and ("assistant" in types or "system" in types) else
                "codex" if types & {"item.completed", "thread.started", "turn.completed"} else
                "pi" if types & {"tool_execution_start", "message_end", "agent_start"} else
                "gemini" if types & {"init", "tool_use", "message"} and "result" in types else "cmd")
    results = [e for e in events if e.get("type") == "result"]
    if name == "claude" and results:
        sub = str(results[-1].get("subtype") or "")
        if sub == "error_max_turns":
            return "turns", f"claude stopped at its turn limit after {results[-1].get('num_turns', '?')} turn(s)"
        if sub == "error_max_budget_usd":
            return "tokens", "claude stopped at its spending limit (--max-budget-usd)"
    if name == "gemini" and status == 53:
        return "turns", "gemini exited 53: its turn limit was exceeded"
    if name == "pi":
        ends = [e["message"] for e in events if e.get("type") == "message_end"
                and isinstance(e.get("message"), dict) and e["message"].get("role") == "assistant"]
        if ends and ends[-1].get("stopReason") == "length":
            return "tokens", "pi's last reply stopped at its output-token limit (stopReason length)"
    errors = [_error_text(e) for e in events if e.get("type") in ("turn.failed", "error")
              or (e.get("type") == "result" and (e.get("is_error") or e.get("status") == "error"))]
    for text in errors:
        if CONTEXT_RE.search(text):
            return "tokens", f"{name} ran out of its context window: {text.strip()[:200]}"
    return None


def stream_version(stdout: str) -> str | None:
    """The harness version its own stream states (Claude Code's ``system``/``init`` event carries
    ``claude_code_version``); None where the format has no such field."""
    for e in _lines(stdout):
        if e.get("type") == "system" and e.get("subtype") == "init" and e.get("claude_code_version"):
            return str(e["claude_code_version"])[:200]
    return None


def _error_text(e: dict) -> str:
    err = e.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or "")
    return str(e.get("result") or e.get("message") or err or "")


def sniff(stdout: str) -> Evidence:
    """A custom agent command: recognise one of the four formats, else plain text."""
    types = {e.get("type") for e in _lines(stdout)}
    if "result" in types and ("assistant" in types or "system" in types):
        return parse_claude(stdout)
    if types & {"item.completed", "thread.started", "turn.completed"}:
        return parse_codex(stdout)
    if types & {"tool_execution_start", "message_end", "agent_start"}:
        return parse_pi(stdout)
    if types & {"init", "tool_use", "message"} and "result" in types:
        return parse_gemini(stdout)
    ev = Evidence()
    ev.add_answer(stdout)
    return ev


@dataclass
class Adapter:
    """How to run one harness headlessly under a condition."""

    name: str
    exe: str
    parse: callable
    skill_dir: str | None  # where a registered skill goes under HOME (Warm); None: Warm not realizable
    prompt_on_stdin: bool = False

    def argv(self, prompt: str, condition: str, skill_text: str, model: str | None = None,
             provider: str | None = None, extra: list[str] | None = None, mcp_config: Path | None = None) -> list[str]:
        """The harness's headless command line; ``model``/``provider`` pin the agent, ``extra`` passes through.

        Under the mcp condition ``mcp_config`` is the JSON file registering `panio mcp` (Claude reads it with
        --mcp-config; Codex gets the server by -c overrides; Gemini CLI from its settings.json)."""
        text = _preload(prompt, condition, skill_text) if self.name != "claude" else prompt
        extra = list(extra or [])
        if mcp_config is not None and self.name == "claude":
            extra = ["--mcp-config", str(mcp_config), "--strict-mcp-config"] + extra
        if mcp_config is not None and self.name == "codex":
            srv = json.loads(mcp_config.read_text())["mcpServers"]["panio"]
            env = "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in srv.get("env", {}).items()) + "}"  # a TOML inline table
            extra = ["-c", f"mcp_servers.panio.command={json.dumps(srv['command'])}",
                     "-c", f"mcp_servers.panio.args={json.dumps(srv['args'])}", "-c", f"mcp_servers.panio.env={env}"] + extra
        if self.name == "claude":
            tools = "Bash,Read,Glob,Grep,Skill" + (",mcp__panio" if mcp_config is not None else "")
            a = [self.exe, "-p", text, "--output-format", "stream-json", "--verbose",
                 "--allowedTools", tools] + (["--model", model] if model else [])
            return a + (["--append-system-prompt", skill_text] if condition == "preloaded" else []) + extra
        if self.name == "codex":
            # `--full-auto` is gone from current Codex; workspace-write lets it run panio in the sandbox cwd
            return ([self.exe, "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]
                    + (["--model", model] if model else []) + extra + [text])
        if self.name == "gemini":
            return [self.exe, "-p", text, "--output-format", "stream-json", "--yolo"] + (["--model", model] if model else []) + extra
        if self.name == "pi":
            return ([self.exe, "--print", "--mode", "json", "--no-session"] + (["--provider", provider] if provider else [])
                    + (["--model", model] if model else []) + extra + [text])
        return shlex.split(self.exe) + extra

    def stdin(self, prompt: str, condition: str, skill_text: str) -> str | None:
        return _preload(prompt, condition, skill_text) if self.prompt_on_stdin else None

    def register(self, home: Path, condition: str, skill_path: Path | None, mcp_server: dict | None = None) -> str | None:
        """Realize Warm (the skill registered, description only) or mcp (panio mcp registered). Returns why not."""
        if condition == "mcp":
            return self._register_mcp(home, mcp_server or {})
        if condition != "warm":
            return None
        if self.skill_dir is None:
            return f"{self.name} has no lazily loaded skill registry: warm is not realizable"
        if skill_path is None:
            return "panio skill is unavailable (no bundled SKILL.md)"
        dest = home / self.skill_dir / "panio"
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "SKILL.md").write_text(skill_path.read_text(encoding="utf-8"), encoding="utf-8")
        return None

    def _register_mcp(self, home: Path, server: dict) -> str | None:
        if self.name == "pi":
            return "pi has no MCP client: the mcp condition is not realizable"
        conf = {"mcpServers": {"panio": server}}
        (home / MCP_CONFIG).write_text(json.dumps(conf, indent=1))
        if self.name == "gemini":  # Gemini CLI reads its servers from settings.json
            (home / ".gemini").mkdir(parents=True, exist_ok=True)
            (home / ".gemini" / "settings.json").write_text(json.dumps(conf, indent=1))
        return None


def _preload(prompt: str, condition: str, skill_text: str) -> str:
    if condition != "preloaded":
        return prompt
    return f"<skill name=\"panio\">\n{skill_text}\n</skill>\n\n{prompt}"


def adapter(name: str) -> Adapter:
    known = {
        "claude": Adapter("claude", "claude", parse_claude, ".claude/skills"),
        "codex": Adapter("codex", "codex", parse_codex, ".codex/skills"),
        "gemini": Adapter("gemini", "gemini", parse_gemini, ".gemini/skills"),
        "pi": Adapter("pi", "pi", parse_pi, ".pi/agent/skills"),
    }
    if name in known:
        return known[name]
    return Adapter("cmd", name, sniff, ".agents/skills", prompt_on_stdin=True)
