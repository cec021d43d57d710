"""Raw, malformed JSON-RPC on `panio mcp`'s stdin: every message gets its error reply, nothing hangs, no traceback.

The SDK alone logged these and answered nothing, so a client waiting on the
id waited forever (issue 12, item 7).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import PANIO

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def converse(panio, lines: list[bytes], wait_for: tuple = ()) -> tuple[list[dict], str]:
    """Send raw lines, then a ping (id 99) as a sentinel; the other replies in order, and the server's log.

    Replies to tool calls (``wait_for`` ids) may come after the sentinel's: they run a child first."""
    p = subprocess.Popen([PANIO, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=panio.env)
    try:
        p.stdin.write(b"".join(line + b"\n" for line in lines) + b'{"jsonrpc":"2.0","id":99,"method":"ping"}\n')
        p.stdin.flush()
        replies = []
        for raw in p.stdout:  # the sentinel's reply proves every earlier line was answered or passed on
            replies.append(json.loads(raw))
            if {99, *wait_for} <= {r.get("id") for r in replies}:
                break
        p.stdin.close()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert {"jsonrpc": "2.0", "id": 99, "result": {}} in replies, replies
    return [r for r in replies if r.get("id") != 99], p.stderr.read().decode()


@pytest.mark.parametrize("line,code,rid", [
    (b"not json", -32700, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700, None),
    (b"\xff\xfe\xfd", -32700, None),
    (b"[" * 100000 + b"]" * 100000, -32700, None),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600, 1),
    (b'{"id": 2, "method": "ping"}', -32600, 2),
    (b'{"jsonrpc": "2.0", "id": 3}', -32600, 3),
    (b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": [1]}', -32600, 4),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', -32600, None),
    (b'[{"jsonrpc": "2.0", "id": 5, "method": "ping"}]', -32600, None),
    (b'"just a string"', -32600, None),
    (rb'{"jsonrpc": "2.0", "id": "\ud800", "method": "ping"}', -32600, None),  # a lone surrogate: not Unicode
    (rb'{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"x": "\udc00"}}', -32600, 6),
    (rb'{"jsonrpc": "2.0", "id": 7, "method": "\ud800"}', -32600, 7),
    (rb'{"jsonrpc": "2.0", "id": "\ud800", "result": {}}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, None),  # MCP: an id is never null
])
def test_each_malformed_message_gets_its_error_reply(panio, line, code, rid):
    panio("init")
    replies, log = converse(panio, [line])
    assert len(replies) == 1, replies
    assert replies[0]["error"]["code"] == code and replies[0]["id"] == rid
    assert "Traceback" not in log


def test_a_session_carries_on_after_malformed_lines(panio):
    panio("init")
    panio("target", "add", "pico")
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "target_list", "arguments": {}}}
    replies, log = converse(panio, [json.dumps(INIT).encode(), b"garbage",
                                    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                                    json.dumps(call).encode()], wait_for=(7,))
    assert [r.get("id") for r in replies] == [0, None, 7]
    assert "pico" in replies[2]["result"]["content"][0]["text"]
    assert "Traceback" not in log


def test_a_lone_surrogate_or_a_null_id_after_initialize_does_not_stop_the_server(panio):
    """Issue 22, item 5: the reply to a surrogate id could not be encoded and `panio mcp` exited 70."""
    panio("init")
    panio("target", "add", "pico")
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "target_list", "arguments": {}}}
    replies, log = converse(panio, [json.dumps(INIT).encode(),
                                    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                                    rb'{"jsonrpc":"2.0","id":"\ud800","method":"ping"}',
                                    b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
                                    rb'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"\udfff"}}',
                                    json.dumps(call).encode()], wait_for=(9,))
    assert [(r.get("id"), r.get("error", {}).get("code")) for r in replies] == [
        (0, None), (None, -32600), (None, -32600), (8, -32600), (9, None)]
    assert "pico" in replies[-1]["result"]["content"][0]["text"]
    assert "Traceback" not in log and "internal" not in log


def test_a_huge_serial_send_is_refused_and_not_echoed(panio):
    panio("init")
    panio("target", "add", "pico")
    text = "x" * 200_000
    call = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": "serial_send", "arguments": {"target": "pico", "text": text}}}
    replies, log = converse(panio, [json.dumps(INIT).encode(),
                                    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                                    json.dumps(call).encode()], wait_for=(8,))
    reply = replies[-1]
    assert reply["id"] == 8 and reply["error"]["code"] == -32602
    assert "at most 65536" in reply["error"]["message"]
    assert len(json.dumps(reply)) < 2000 and text not in log


def test_a_deeply_nested_line_is_refused_and_the_next_request_answered(panio):
    """Issue 45, hole 6: 975 arrays inside a ping's params passed json.loads, then the SDK's own
    validation recursed past Python's limit and `panio mcp` exited 70 (RecursionError)."""
    panio("init")
    deep = {"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": "@"}}
    deep_line = json.dumps(deep).replace('"@"', "[" * 975 + "]" * 975).encode()
    nested = json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping",  # 20 levels, and brackets in a string
                         "params": {"x": [[[{"a": "[" * 5000}]]] * 1, "y": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}}).encode()
    listing = b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}'
    replies, log = converse(panio, [json.dumps(INIT).encode(),
                                    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                                    deep_line, nested, listing], wait_for=(7,))
    by_id = {r.get("id"): r for r in replies}
    assert by_id[None]["error"]["code"] == -32700 and "nested" in by_id[None]["error"]["message"], replies
    assert by_id[6] == {"jsonrpc": "2.0", "id": 6, "result": {}}  # brackets inside a string are text, not depth
    assert "target_list" in {t["name"] for t in by_id[7]["result"]["tools"]}
    assert "Traceback" not in log and "internal" not in log


def test_a_line_over_the_size_bound_is_refused_and_the_next_request_answered(panio):
    """A 5 MiB line is refused before anything parses it (the bound was 64 MiB); the server reads past it."""
    panio("init")
    huge = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": "y" * (5 << 20)}}).encode()
    listing = b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}'
    replies, log = converse(panio, [json.dumps(INIT).encode(),
                                    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                                    huge, listing], wait_for=(7,))
    assert [(r.get("id"), r.get("error", {}).get("code")) for r in replies] == [(0, None), (None, -32600), (7, None)]
    assert "longer than 4194304 bytes" in replies[1]["error"]["message"]
    assert "target_list" in {t["name"] for t in replies[2]["result"]["tools"]}
    assert "Traceback" not in log
