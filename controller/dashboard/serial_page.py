"""A job's serial log on the dashboard (``/jobs/ID/serial``): paged, searchable, an anchor per line and per step.

A boot log of a few megabytes is one page no browser scrolls well and nobody finds a line in: the saved window is
cut into pages of ``PER_PAGE`` lines (``?page=N``), searched server-side (``?q=``: each hit links to its page and
line), and each step of the job has an anchor (``#step-N``) at the first line received once it started
(``?step=N`` opens the page that holds it). Lines carry their capture time (``[HH:MM:SS.mmm] #seq text``, local
time), which is how a step's start (wall clock) finds its line.
"""

from __future__ import annotations

import time

PER_PAGE = 1000
MAX_HITS = 200
MAX_QUERY = 200


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def clock(ts: float) -> float:
    """Seconds into the local day of epoch time ``ts`` (what a serial line's stamp says)."""
    local = time.localtime(ts)
    return local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec + (ts % 1)


def stamp_s(line: str) -> float | None:
    """The time of day of a serial-log line, None for a line without a stamp."""
    if line[:1] != "[" or line[13:14] != "]":
        return None
    try:
        return int(line[1:3]) * 3600 + int(line[4:6]) * 60 + float(line[7:13])
    except ValueError:
        return None


def step_lines(lines: list[str], steps: list[dict]) -> dict[int, int]:
    """Step number (1-based) -> index of the first line stamped at or after the step's start. The log's lines are
    in time order; a step that printed nothing on the console gets the next line after its start."""
    out: dict[int, int] = {}
    stamps = [stamp_s(line) for line in lines]
    start_clock = next((s for s in stamps if s is not None), None)
    for step in sorted(steps, key=lambda s: s["idx"]):
        if not step.get("started_at") or start_clock is None:
            continue
        at = clock(step["started_at"])
        if at < start_clock - 43200:  # the log crossed midnight before this step began
            at += 86400
        for i, s in enumerate(stamps):
            if s is None:
                continue
            if s < start_clock - 43200:
                s += 86400
            if s > at - 0.001:  # a stamp is cut to the millisecond
                out[step["idx"] + 1] = i
                break
    return out


def search(lines: list[str], query: str) -> list[int]:
    """Indexes of the lines holding ``query`` (case-insensitive, plain text: no regex a caller could make slow)."""
    q = query.lower()
    return [i for i, line in enumerate(lines) if q in line.lower()][:MAX_HITS]


def view(logs: dict[str, str], steps: list[dict], params) -> dict:
    """What the template shows of ``logs`` (iface -> saved text) for the query ``params``: one interface's page of
    lines, with anchors for the steps that begin on it, and the search's hits over the whole log."""
    ifaces = list(logs)
    iface = params.get("iface") if params.get("iface") in logs else (ifaces[0] if ifaces else None)
    if iface is None:
        return {"ifaces": [], "iface": None}
    lines = lines_of(logs[iface])
    anchors = step_lines(lines, steps)
    pages = max(1, -(-len(lines) // PER_PAGE))
    page = _number(params.get("page"))
    step = _number(params.get("step"))
    if step and step in anchors:
        page = anchors[step] // PER_PAGE + 1
    page = min(max(page or 1, 1), pages)
    first = (page - 1) * PER_PAGE
    at_line = {i: n for n, i in anchors.items()}
    shown = [{"no": i + 1, "text": lines[i], "step": at_line.get(i)} for i in range(first, min(first + PER_PAGE,
                                                                                           len(lines)))]
    query = (params.get("q") or "")[:MAX_QUERY]
    hits = [{"no": i + 1, "page": i // PER_PAGE + 1, "text": lines[i][:300]} for i in search(lines, query)] \
        if query.strip() else []
    return {"ifaces": ifaces, "iface": iface, "page": page, "pages": pages, "lines": shown, "total": len(lines),
            "steps": {n: i // PER_PAGE + 1 for n, i in anchors.items()}, "q": query, "hits": hits,
            "more_hits": len(hits) == MAX_HITS}


def _number(text: str | None) -> int | None:
    return int(text) if text and text.isascii() and text.isdigit() and len(text) < 10 else None
