"""The stdio wire, checked line by line: every malformed JSON-RPC message gets its error reply.

The SDK's stdio transport hands a line it cannot parse to the session as an
exception, and the session only logs it: the client that sent it never hears
back and waits on that id forever. JSON-RPC 2.0 says otherwise (section 5.1):
a line that is not JSON gets ``-32700 Parse error``, a message that is not a
valid request gets ``-32600 Invalid Request``, both with ``id: null`` unless
the request's own id could be read.

Two kinds of request the SDK cannot survive or answer are refused here too: a
string holding a lone UTF-16 surrogate (``"\ud800"`` is valid JSON but not
Unicode text; the SDK's reply could not be encoded and the failed write ended
the server, exit 70), and a request whose ``id`` is ``null`` (MCP forbids it;
the SDK took it for a notification and never answered), and a line nested more than ``MAX_DEPTH``
arrays or objects deep (json.loads took 975 levels, then the SDK's validation recursed past Python's
limit and the server exited 70: the depth is counted before anything parses the line). ``checked_stdin`` sits between stdin and
the SDK: it answers malformed lines itself, through the same writer as every
other reply (so frames never interleave), and passes the rest on unchanged.
"""

from __future__ import annotations

import json
import re
from typing import Any, AsyncIterator

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
# a line: two text arguments of args.MAX_TEXT_CHARS (65536) each, every character escaped, fit in 1.5 MiB
MAX_LINE_BYTES = 4 << 20
MAX_DEPTH = 64  # arrays and objects, the message's own object included; panio's tools take flat arguments
# a string, or an unterminated one up to the line's end: the first try always matches, so the scan is linear
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_PAIRS = str.maketrans("[]{}", "()()")


def too_deep(line: str) -> bool:
    """Whether ``line`` nests arrays and objects more than ``MAX_DEPTH`` deep, counted without parsing it.

    Strings are cut out first (a bracket in a string is text); then each pass
    removes the innermost pairs, so a pair left after ``MAX_DEPTH`` passes sits
    deeper. Unbalanced brackets are not judged here: json.loads refuses them.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", line)).translate(_PAIRS)
    for _ in range(MAX_DEPTH):
        shorter = brackets.replace("()", "")
        if shorter == brackets:
            return False
        brackets = shorter
    return "()" in brackets


def problem(line: str) -> tuple[int, str, Any] | None:
    """``(code, message, id)`` for a malformed message, or ``None`` when the SDK may have it."""
    if too_deep(line):
        return PARSE_ERROR, f"Parse error: nested more than {MAX_DEPTH} arrays or objects deep", None
    try:
        msg = json.loads(line)
    except RecursionError:
        return PARSE_ERROR, "Parse error: nested too deeply", None
    except ValueError as exc:
        return PARSE_ERROR, f"Parse error: {exc}", None
    if isinstance(msg, list):
        return INVALID_REQUEST, "Invalid Request: batches are not supported (send one message per line)", None
    if not isinstance(msg, dict):
        return INVALID_REQUEST, "Invalid Request: a message is a JSON object", None
    rid = msg.get("id")
    good_id = rid is None or (isinstance(rid, (str, int)) and not isinstance(rid, bool))
    reply_id = rid if good_id and _text(rid) else None
    if msg.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', reply_id
    if not good_id:
        return INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer', None
    if not _text(msg):
        return INVALID_REQUEST, "Invalid Request: a string holds a lone UTF-16 surrogate (not Unicode text)", reply_id
    if "method" in msg and "id" in msg and rid is None:
        return INVALID_REQUEST, 'Invalid Request: "id" must not be null (send a string or an integer)', None
    if "method" not in msg and not ("result" in msg or "error" in msg):
        return INVALID_REQUEST, 'Invalid Request: no "method"', reply_id
    if "method" in msg and not isinstance(msg["method"], str):
        return INVALID_REQUEST, 'Invalid Request: "method" must be a string', reply_id
    if "params" in msg and not isinstance(msg["params"], dict):
        return INVALID_REQUEST, 'Invalid Request: "params" must be an object', reply_id
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # noqa: BLE001 - pydantic's error, reported to the client, not raised
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return INVALID_REQUEST, f"Invalid Request: {first}", reply_id
    return None


def error_message(code: int, message: str, rid: Any) -> SessionMessage:
    # a reply that cannot be encoded would end the server: escape what is not Unicode text
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid,
                                             error=types.ErrorData(code=code, message=message)))


def _text(value: Any) -> bool:
    """Whether every string in ``value`` (a parsed message, or a part of one) can be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class CheckedStdin:
    """An async line source for the SDK's ``stdio_server(stdin=...)`` that answers malformed lines itself.

    ``attach(write_stream)`` gives it the server's outgoing stream once the
    transport exists; lines read before that wait for it.
    """

    def __init__(self, raw, log) -> None:
        self.raw, self.log = raw, log
        self.write_stream = None
        self._attached = anyio.Event()

    def attach(self, write_stream) -> None:
        self.write_stream = write_stream
        self._attached.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            data = await anyio.to_thread.run_sync(self.raw.readline, MAX_LINE_BYTES + 1)
            if not data:
                return
            line = data.decode("utf-8", errors="strict") if _utf8(data) else None
            if line is None:
                await self._answer(PARSE_ERROR, "Parse error: not UTF-8", None)
                continue
            if not line.strip():
                continue
            if len(data) > MAX_LINE_BYTES:
                await self._answer(INVALID_REQUEST, f"Invalid Request: longer than {MAX_LINE_BYTES} bytes", None)
                self._skip_rest()
                continue
            bad = problem(line)
            if bad is not None:
                await self._answer(*bad)
                continue
            yield line

    def _skip_rest(self) -> None:
        while True:
            chunk = self.raw.readline(MAX_LINE_BYTES)
            if not chunk or chunk.endswith(b"\n"):
                return

    async def _answer(self, code: int, message: str, rid: Any) -> None:
        self.log(f"malformed message answered with {code}: {message}")
        await self._attached.wait()
        await self.write_stream.send(error_message(code, message, rid))


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
