"""The JSON-lines codec of panio's request/response roads: the serial supervisor's control socket, the SSH
agent and the controller's SSH transport.

A line is one compact JSON object and its ``\\n``. ``json.dumps`` and ``json.loads`` build their C encoder (and
a closure it does not use) afresh at every call and wrap the C scanner in Python; a serial transact encodes two
lines and decodes two, an operation over SSH as many, so both are made once here (docs/performance.md,
"Serial"). Where the interpreter has no C encoder, or one of another signature, json does it as before. What
``json.loads`` refuses (two objects on a line, trailing bytes) is refused here too, with json's own message.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # a capture need not import typing (docs/scale.md: every supervisor pays for it)
if TYPE_CHECKING:
    from typing import Any

# compact (fewer bytes for the far side to parse), and no search for cycles: a request or a reply is built afresh
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)
_encode = _ENCODER.encode
_decode = json.JSONDecoder().decode  # of str: json.loads of bytes first guesses their encoding in Python
_SCAN = json.JSONDecoder().scan_once  # the decoder's own scanner (C where there is one), less its Python wrapper


def _c_encoder():
    """``_ENCODER``'s C encoder, made once; None where there is none, or it does not write what json writes."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    probe = {"a": [1, 0.5, None, True, "\u00e9"]}
    try:
        made = make(None, _ENCODER.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
        return made if "".join(made(probe, 0)) == _encode(probe) else None
    except TypeError:
        return None


_C_ENCODE = _c_encoder()


def encode(obj: Any) -> str:
    """``obj`` as compact JSON (what ``json.dumps(obj, separators=(",", ":"))`` writes)."""
    if _C_ENCODE is not None and type(obj) is dict:
        return "".join(_C_ENCODE(obj, 0))
    return _encode(obj)


def decode(text: str) -> Any:
    """What ``json.loads(text)`` reads, or its ValueError."""
    if text[:1] == "{":  # a request or a reply: one object, then only its line's end (else ``_decode`` says why)
        try:
            obj, end = _SCAN(text, 0)
        except StopIteration:
            return _decode(text)
        if not text[end:].strip():
            return obj
    return _decode(text)


def dump_line(obj: Any) -> bytes:
    return encode(obj).encode() + b"\n"


def load_line(line: bytes) -> Any:
    return decode(line.decode())
