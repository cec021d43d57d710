"""A job's serial-log artifact: every line its target's consoles printed while the job held the target.

Before the first step, the last line of each serial interface is noted
(``marks``); at the end every line after it is read, page by page (``serial.log``
says ``more_after`` while more follow), so the artifact is whole however long
the log grew (``artifacts``). Both go through the job's road to the target
(``call``: the local ops layer on a worker, the dispatcher in ``panio job run``).
"""

from __future__ import annotations

from typing import Any, Callable

from bench_agent.errors import PanioError

Call = Callable[[str, dict[str, Any]], Any]


def interfaces(payload: dict) -> list[dict]:
    return [dict(i) for i in (payload.get("target_config") or {}).get("serial", [])]


def marks(payload: dict, call: Call) -> dict[str, int | None]:
    """The sequence number each interface's window starts after (-1: from the log's start)."""
    out: dict[str, int | None] = {}
    for iface in interfaces(payload):
        try:
            r = call("serial.log", {"target": payload["target"], "iface": iface, "tail": 1})
        except PanioError:
            r = {"lines": []}
        lines = [ln for ln in r["lines"] if "seq" in ln]
        # an unterminated last line may still grow during the job: start the window with it
        out[iface["name"]] = (lines[-1]["seq"] - (0 if lines[-1]["complete"] else 1)) if lines else -1
    return out


def artifacts(payload: dict, marks: dict[str, int | None], call: Call) -> list[tuple[str, str]]:
    """``(name, text)`` of each interface's log since its mark (``serial-NAME.log``); none for an empty window."""
    from bench_agent.ops.serial import SEQ_MAX
    from bench_agent.serial.lines import format_entry

    out = []
    for iface in interfaces(payload):
        seq, parts = marks.get(iface["name"]), []
        window: dict[str, Any] = {"since": seq} if seq is not None and seq >= 0 else {"first": 0, "last": SEQ_MAX}
        while True:
            try:
                r = call("serial.log", {"target": payload["target"], "iface": iface, **window})
            except PanioError as err:
                parts.append(f"-- the log could not be read further: {err.message} --\n")
                break
            if r.get("evicted_before") is not None and not parts:
                parts.append(f"-- lines before #{r['evicted_before']} were evicted from the log (its size limit) --\n")
            parts += [format_entry(entry) + "\n" for entry in r["lines"]]
            if r.get("more_after") is None:
                break
            window = {"since": r["more_after"]}
        if any(parts):
            out.append((f"serial-{iface['name']}.log", "".join(parts)))
    return out
