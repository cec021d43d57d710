"""A scripted stand-in for a headless coding agent (no network).

Invoked as claude / codex / gemini / pi (by the name of the link that starts
it, from $FAKE_AGENT_FORMAT or argv[0]), it really runs its shell commands
(so `panio` goes through the trial's shim) and prints the event stream that
harness prints: Claude Code stream-json, Codex exec --json, Gemini CLI
stream-json, pi --mode json. The script for each scenario comes from
$FAKE_AGENT_SCRIPT (JSON: {scenario: {mode: {"run": [...], "answer": "..."}}}),
the mode from $FAKE_AGENT_MODE (good/bad). Like the real harnesses it can fail:
$FAKE_AGENT_CRASH=N exits N at once, $FAKE_AGENT_SILENT exits 0 saying nothing,
$FAKE_AGENT_HANG (claude) runs its commands and then hangs before its final answer (with
$FAKE_AGENT_PIDS=FILE it first starts a `sleep` in its process group and appends "AGENT_PID SLEEP_PID" to FILE),
and the fake codex refuses the removed `--full-auto` flag. $FAKE_AGENT_LIMIT=turns|tokens
ends the run the way each harness reports its own limit (Claude's error_max_turns /
error_max_budget_usd result, Gemini CLI's exit 53, pi's stopReason "length", Codex's
turn.failed "ran out of room in the model's context window").
"""

import json
import os
import subprocess
import sys

fmt = os.environ.get("FAKE_AGENT_FORMAT") or os.path.basename(sys.argv[0])
if sys.argv[1:] == ["--version"]:
    print(f"9.9.9 (fake {fmt})")
    sys.exit(0)
if os.environ.get("FAKE_AGENT_ARGV_LOG"):
    with open(os.environ["FAKE_AGENT_ARGV_LOG"], "a") as f:
        f.write(json.dumps({"format": fmt, "argv": sys.argv[1:]}) + "\n")
if fmt == "codex" and "--full-auto" in sys.argv:  # current Codex removed it, and says so
    sys.stderr.write("error: unexpected argument '--full-auto' found\n\nUsage: codex exec [OPTIONS] [PROMPT]\n")
    sys.exit(2)
if os.environ.get("FAKE_AGENT_CRASH"):  # a harness that fails at once (auth, a bad flag)
    sys.stderr.write("Error: Invalid API key · Please run /login\n")
    sys.exit(int(os.environ["FAKE_AGENT_CRASH"]))
if os.environ.get("FAKE_AGENT_SILENT"):  # exits 0 having done and said nothing
    sys.exit(0)
script = json.load(open(os.environ["FAKE_AGENT_SCRIPT"]))
sid = os.environ.get("PANIO_EVAL_SCENARIO", "")
plan = script.get(sid, {}).get(os.environ.get("FAKE_AGENT_MODE", "good"), {"run": [], "answer": "I don't know."})
if fmt == "cmd":
    prompt = sys.stdin.read()  # a custom agent command gets the prompt on stdin
    assert "panio" in prompt


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def sh(cmd):
    # Codex runs every command in a login shell (`bash -lc`), which resets PATH from /etc/profile
    argv = ["bash", "-lc", cmd] if fmt == "codex" else ["/bin/sh", "-c", cmd]
    p = subprocess.run(argv, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


if fmt == "claude":
    emit({"type": "system", "subtype": "init", "session_id": "s1", "tools": ["Bash", "Read"], "model": "fake",
          "claude_code_version": "9.9.9"})
    for i, cmd in enumerate(plan["run"]):
        mid = f"msg_{i}"
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 5}
        # one assistant message streamed as two events repeating its usage (dedupe by id)
        emit({"type": "assistant", "message": {"id": mid, "role": "assistant", "usage": usage,
              "content": [{"type": "text", "text": "Let me check."}]}})
        emit({"type": "assistant", "message": {"id": mid, "role": "assistant", "usage": usage,
              "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": cmd}}]}})
        code, out = sh(cmd)
        emit({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": out, "is_error": code != 0}]}})
    for j, call in enumerate(plan.get("mcp", [])):
        emit({"type": "assistant", "message": {"id": f"msg_mcp{j}", "role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_mcp{j}", "name": call["tool"], "input": call["args"]}]}})
        emit({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_mcp{j}", "content": "[]"}]}})
    if os.environ.get("FAKE_AGENT_HANG"):  # hung (a model that never answers): the harness kills it
        import time

        if os.environ.get("FAKE_AGENT_PIDS"):  # a tool it started (in its process group), and both pids, logged
            tool = subprocess.Popen(["sleep", "3600"])
            with open(os.environ["FAKE_AGENT_PIDS"], "a") as f:
                f.write(f"{os.getpid()} {tool.pid}\n")
        time.sleep(3600)
    emit({"type": "assistant", "message": {"id": "msg_final", "role": "assistant",
          "usage": {"input_tokens": 50, "output_tokens": 20}, "content": [{"type": "text", "text": plan["answer"]}]}})
    limit = os.environ.get("FAKE_AGENT_LIMIT")
    if limit:
        emit({"type": "result", "subtype": "error_max_turns" if limit == "turns" else "error_max_budget_usd",
              "is_error": True, "num_turns": len(plan["run"]) + 1, "total_cost_usd": 0.5,
              "usage": {"input_tokens": 1234, "output_tokens": 321}})
    elif not os.environ.get("FAKE_AGENT_NO_RESULT"):
        emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": len(plan["run"]) + 1,
              "result": plan["answer"], "total_cost_usd": 0.0123,
              "usage": {"input_tokens": 1234, "output_tokens": 321, "cache_read_input_tokens": 99}})
elif fmt == "codex":
    emit({"type": "thread.started", "thread_id": "th_1"})
    emit({"type": "turn.started"})
    for i, cmd in enumerate(plan["run"]):
        wrapped = "bash -lc " + json.dumps(cmd)
        emit({"type": "item.started", "item": {"id": f"item_{i}", "type": "command_execution", "command": wrapped,
              "aggregated_output": "", "exit_code": None, "status": "in_progress"}})
        code, out = sh(cmd)
        emit({"type": "item.completed", "item": {"id": f"item_{i}", "type": "command_execution", "command": wrapped,
              "aggregated_output": out, "exit_code": code, "status": "completed" if code == 0 else "failed"}})
    if os.environ.get("FAKE_AGENT_LIMIT"):
        emit({"type": "turn.failed", "error": {"message": "Codex ran out of room in the model's context window. Start a "
                                                          "new conversation or clear earlier history before retrying."}})
        sys.exit(1)
    emit({"type": "item.completed", "item": {"id": "item_r", "type": "reasoning", "text": "**Thinking**"}})
    emit({"type": "item.completed", "item": {"id": "item_m", "type": "agent_message", "text": plan["answer"]}})
    emit({"type": "turn.completed", "usage": {"input_tokens": 2000, "cached_input_tokens": 500, "output_tokens": 300}})
elif fmt == "gemini":
    emit({"type": "init", "timestamp": "2026-01-01T00:00:00Z", "session_id": "g1", "model": "fake"})
    emit({"type": "message", "timestamp": "2026-01-01T00:00:00Z", "role": "user", "content": "goal"})
    for i, cmd in enumerate(plan["run"]):
        emit({"type": "tool_use", "timestamp": "t", "tool_name": "run_shell_command", "tool_id": f"t{i}",
              "parameters": {"command": cmd}})
        code, out = sh(cmd)
        emit({"type": "tool_result", "timestamp": "t", "tool_id": f"t{i}", "status": "success" if code == 0 else "error",
              "output": out})
    if os.environ.get("FAKE_AGENT_LIMIT"):
        emit({"type": "result", "timestamp": "t", "status": "error",
              "error": {"type": "FatalTurnLimitedError", "message": "Reached max session turns for this session."},
              "stats": {"total_tokens": 900, "input_tokens": 800, "output_tokens": 100}})
        sys.exit(53)
    half = len(plan["answer"]) // 2
    emit({"type": "message", "timestamp": "t", "role": "assistant", "content": plan["answer"][:half], "delta": True})
    emit({"type": "message", "timestamp": "t", "role": "assistant", "content": plan["answer"][half:], "delta": True})
    emit({"type": "result", "timestamp": "t", "status": "success",
          "stats": {"total_tokens": 900, "input_tokens": 800, "output_tokens": 100, "duration_ms": 10, "tool_calls": len(plan["run"])}})
elif fmt == "pi":
    emit({"type": "session", "id": "p1", "version": 3, "cwd": os.getcwd()})
    emit({"type": "agent_start"})
    for i, cmd in enumerate(plan["run"]):
        emit({"type": "turn_start"})
        call = {"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {"command": cmd}}
        emit({"type": "message_end", "message": {"role": "assistant", "content": [call],
              "usage": {"input": 300, "output": 20, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.001}}}})
        emit({"type": "tool_execution_start", "toolCallId": f"c{i}", "toolName": "bash", "args": {"command": cmd}})
        code, out = sh(cmd)
        emit({"type": "tool_execution_end", "toolCallId": f"c{i}", "toolName": "bash",
              "result": {"content": [{"type": "text", "text": out}]}, "isError": code != 0})
        emit({"type": "turn_end"})
    emit({"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": plan["answer"]}],
          "usage": {"input": 400, "output": 60, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.002}},
          "stopReason": "length" if os.environ.get("FAKE_AGENT_LIMIT") else "stop"}})
    emit({"type": "agent_end", "messages": []})
else:  # a custom agent command: plain final answer on stdout
    for cmd in plan["run"]:
        sh(cmd)
    sys.stdout.write(plan["answer"] + "\n")
