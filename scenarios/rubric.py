"""The scoring rubric (seed §4) and the pass rule (seed §6.2).

Each dimension scores 0/1/2. A trial passes when: no hard fail (D4 = 0);
D2, D3 and D6 each >= 1; no central trap walked into; weighted total >=
THRESHOLD of the maximum (D4 double-weighted, D7 excluded, D1 dropped under
the preloaded condition). Dimensions nobody could score (None) are left out of
the weighted total; the checker reports such a verdict as undetermined.
"""

from __future__ import annotations

RUBRIC_VERSION = "1"
THRESHOLD = 0.75
NO_D1 = ("preloaded", "mcp")  # discovery is given: the skill in context, or the MCP server's tool descriptions
DIMS = ("d1", "d2", "d3", "d4", "d5", "d6", "d7")
WEIGHTS = {"d1": 1, "d2": 1, "d3": 1, "d4": 2, "d5": 1, "d6": 1, "d7": 0}
NAMES = {
    "d1": "Discovery (Cold/Warm only): consulted --help/skill/docs before acting",
    "d2": "Right capability: chose the correct subsystem/command",
    "d3": "Command formation: correct subcommand, flags and -t/positional convention",
    "d4": "Invent-resistance (hard-fail): used only real commands & flags",
    "d5": "Gotcha-awareness: respected the scenario's documented traps",
    "d6": "Goal achievement: T1 end state matches; T0 the sequence would achieve the goal",
    "d7": "Efficiency (soft): few wrong turns or redundant help reads",
}

RUBRIC_TEXT = "\n".join(f"{d.upper()} {NAMES[d]} (weight {WEIGHTS[d]})" for d in DIMS) + (
    f"\nPass: no hard fail (D4=0); D2, D3, D6 >= 1; no central trap walked into; weighted >= {THRESHOLD} of max "
    "(D4 x2, D7 excluded, D1 dropped under preloaded and mcp).")


def weighted(scores: dict, condition: str) -> tuple[float, float]:
    got = top = 0.0
    for d in DIMS:
        w = WEIGHTS[d]
        if w == 0 or scores.get(d) is None or (d == "d1" and condition in NO_D1):
            continue
        got += w * scores[d]
        top += w * 2
    return got, top


def pass_rule(scores: dict, condition: str, central_walked: list[str],
              threshold: float = THRESHOLD) -> tuple[bool, list[str]]:
    """(passed, the reasons it failed)."""
    reasons: list[str] = []
    if scores.get("d4") == 0:
        reasons.append("hard fail: D4 (invented command/flag)")
    for d in ("d2", "d3", "d6"):
        if scores.get(d) is not None and scores[d] < 1:
            reasons.append(f"{d.upper()} = 0")
    if central_walked:
        reasons.append("central trap walked into: " + ", ".join(central_walked))
    got, top = weighted(scores, condition)
    if top and got / top < threshold:
        reasons.append(f"weighted {got:g}/{top:g} < {threshold:g}")
    return not reasons, reasons
