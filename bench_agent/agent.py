"""The host-side agent: ``python -m bench_agent.agent`` speaks JSON lines on stdin/stdout.

One agent runs per SSH connection, for the life of the connection, so an
operation costs one round trip over a kept channel instead of a fresh
``exec`` (and the host's shell start-up) per call.

Protocol, version 1. The agent first writes a hello line::

    {"panio_agent": 1, "pid": 4242, "python": "3.11.7", "lab_keys": true}

then answers each request line with exactly one response line, in order::

    -> {"v": 1, "id": 7, "op": "system.ping", "args": {"payload": 1}}
    <- {"id": 7, "ok": true, "result": {"pong": 1}}
    <- {"id": 7, "ok": false, "error": {"error": "not_configured", "exit": 3, "message": "..."}}

A request with another ``v`` is answered with a ``usage`` error naming the
versions this agent speaks. The agent exits at end of input.

``--interactive`` runs one interactive operation (``serial connect``) whose
byte stream is stdin and stdout: the controller opens a session channel of its
own for it. The hello line and, when the operation ends, its one response line
go to **stderr**; the request is the first line of stdin, and every byte after
it belongs to the operation (what the person types); stdout carries only the
operation's bytes (what the board says). The agent exits after the response.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from typing import Any, TextIO

from bench_agent import jsonlines, ops
from bench_agent.errors import UsageError, reply

VERSION = 1


def handle(line: str) -> dict[str, Any]:
    try:
        req = jsonlines.decode(line)
        if not isinstance(req, dict):
            raise ValueError("a request is a JSON object")
    except ValueError as exc:
        return {"id": None, "ok": False, "error": UsageError(f"bad request line: {exc}").to_json()}
    rid = req.get("id")
    if req.get("v") != VERSION:
        err = UsageError(f"protocol version {req.get('v')!r} not spoken here (this agent speaks {VERSION})",
                         hint="upgrade panio on both ends", versions=[VERSION])
        return {"id": rid, "ok": False, "error": err.to_json()}
    return {"id": rid, **reply(ops.call, str(req.get("op")), req.get("args") or {})}


def serve(inp: TextIO, out: TextIO) -> None:
    out.write(json.dumps(_hello()) + "\n")
    out.flush()
    for line in inp:
        if line.strip():
            out.write(jsonlines.encode(handle(line)) + "\n")
            out.flush()


def serve_interactive(err: TextIO) -> None:
    err.write(json.dumps(_hello()) + "\n")
    err.flush()
    err.write(json.dumps(handle(_first_line(sys.stdin.fileno()))) + "\n")
    err.flush()


def _first_line(fd: int, limit_bytes: int = 1 << 20) -> str:
    """One line read a byte at a time, so no byte after it lands in a buffer the operation cannot see."""
    line = bytearray()
    while len(line) < limit_bytes:
        byte = os.read(fd, 1)
        if not byte or byte == b"\n":
            break
        line += byte
    return line.decode("utf-8", "replace")


def _hello() -> dict[str, Any]:
    # lab_keys: requests carry their lab (``bench_agent.paths.LAB_ARG``), and this agent keeps state per lab
    return {"panio_agent": VERSION, "pid": os.getpid(), "python": platform.python_version(), "lab_keys": True}


if __name__ == "__main__":
    if sys.argv[1:] == ["--interactive"]:
        serve_interactive(sys.stderr)
    else:
        serve(sys.stdin, sys.stdout)
