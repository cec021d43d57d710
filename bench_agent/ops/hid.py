"""HID operations: ``hid.send`` runs one command (key, type, moveabs, click, scroll) on the target's rig."""

from __future__ import annotations

from typing import Any

from bench_agent.ops import operation
from bench_agent.ops.spec import Param

MAX_TYPE_CHARS = 4096


def _deadline(args: dict[str, Any]) -> float:
    words = args.get("command") or []
    chars = len(" ".join(map(str, words[1:]))) if words[:1] == ["type"] else 1
    return 10 + chars * 3 * args.get("pace_ms", 20) / 1000


@operation("hid.send", params=(
    Param("command", list, "one HID command as words, e.g. [\"key\", \"ENTER\"], [\"type\", \"root\"], "
          "[\"moveabs\", \"16384\", \"16384\"], [\"click\", \"left\"], [\"scroll\", \"-3\"]"),
    Param("pace_ms", int, "pause between a key's press and release and after it", default=20, unit="ms",
          minimum=1, maximum=1000),
), side_effect=True, deadline=_deadline)
def send(target: str, hid: dict[str, Any], command: list, pace_ms: int = 20) -> dict[str, Any]:
    """Inject keyboard or mouse input through the target's HID rig."""
    from bench_agent import hid as hidlib
    from bench_agent.errors import UsageError

    words = [str(w) for w in command]
    if len(" ".join(words)) > MAX_TYPE_CHARS:
        raise UsageError(f"a HID command is at most {MAX_TYPE_CHARS} characters; split longer text", argument="command")
    backend = hidlib.open_backend(hid)
    try:
        done = hidlib.run_words(hidlib.Driver(backend, pace_ms), words)
    finally:
        backend.close()
    return {"target": target, "protocol": hid.get("protocol") or "ch9329", **done}
