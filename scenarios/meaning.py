"""What a command line means, beyond its text (issue 40).

* **Corrected calls**: a panio command that ran and failed, followed at once by the same command run
  right, is the agent reading an error and fixing it: not graded (its failure still costs D7).
* **Equivalences** (``catalog/_equivalences.toml``): consecutive commands that mean another command
  (``power off`` + ``power on`` is ``power-cycle``), where the scenario's traps allow it.
* **Units**: every numeric flag's unit comes from the operation specs (``Param.unit``, read into the
  surface). A value the answer (or the goal) states in another unit ("``--timeout 30`` … 30 seconds"
  on a flag in ms) contradicts the command: a fail. A wait (a ``timeout`` flag) under a second with
  nothing said about it cannot be settled: undetermined.
* **Claims after failures**: a command of a step the goal needs (any required reference step) ran and
  failed, never ran right after, and the answer reports a result anyway: a fail. An answer that says
  it could not get the result (or that the step was refused) claims nothing.
* **Claims against what panio printed** (``printed_claims``): output the answer quotes as the result
  (an output block, or "reads `pico login:`") that no command printed; a state it reports that is the
  opposite of the one panio printed (``off`` reported as on); a doctor report's missing item called
  present, or the configuration called consistent while doctor lists something missing: a fail.
* **Flags named in passing** (`` `--rust-only` also works``): checked against the command they are
  said of (the nearest stated command before them); one that no command the answer names has is an
  invented flag.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from scenarios.evidence import Command, Evidence
from scenarios.matching import PLACEHOLDER, matches, pattern_argv
from scenarios.scenario import Scenario
from scenarios.surface import CATALOG, GLOBAL_FLAGS, GLOBAL_VALUE_OPTS, Surface, _resolve_opt, parse


# ---------------------------------------------------------------- corrected calls

def mark_corrected(commands: list[Command], surface: Surface) -> None:
    """Flag each run that failed and was followed at once (the next panio run) by the same command, succeeding."""
    runs = [c for c in commands if c.source in ("run", "mcp") and not c.is_help and not c.hook and c.argv]
    for a, b in zip(runs, runs[1:]):
        if a.exit in (0, None) or b.exit != 0:
            continue
        pa, pb = parse(surface, a.argv, strict=False), parse(surface, b.argv, strict=False)
        if pa.path and pa.path == pb.path:
            a.corrected = True


# ---------------------------------------------------------------- equivalences

@dataclass(frozen=True)
class Equivalence:
    id: str
    means: tuple[str, ...]
    sequence: tuple[tuple[str, ...], ...]
    why: str = ""


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[Equivalence, ...]:
    p = Path(path)
    if not p.is_file():
        return ()
    with open(p, "rb") as f:
        raw = tomllib.load(f).get("equivalence", [])
    return tuple(Equivalence(e["id"], tuple(pattern_argv(e["means"])), tuple(tuple(pattern_argv(s)) for s in e["sequence"]),
                             e.get("why", "")) for e in raw)


def equivalences(catalog: Path = CATALOG) -> tuple[Equivalence, ...]:
    return _load(str(catalog / "_equivalences.toml"))


def allowed(sc: Scenario, surface: Surface, eq: Equivalence) -> bool:
    """Where the trap allows: no `forbid` trap of the scenario forbids a step of the sequence."""
    if eq.id in (getattr(sc, "no_equivalence", None) or []):
        return False
    for t in sc.traps:
        c = t.check or {}
        if c.get("kind") != "forbid":
            continue
        pats = [c["cmd"]] if isinstance(c["cmd"], str) else list(c["cmd"])
        for step in eq.sequence:
            probe = [_probe(x) for x in step if x != "*"]
            if any(matches(surface, p, probe) for p in pats):
                return False
    return True


def _probe(tok: str) -> str:
    """A concrete stand-in for a pattern token (for asking a trap whether it forbids the step)."""
    if PLACEHOLDER.match(tok):
        return "pico"
    if tok.startswith("re:"):
        return "200"
    return tok


def expand(commands: list[Command], sc: Scenario, surface: Surface) -> list[Command]:
    """``commands`` with, after each run of commands that means another, the command it means."""
    eqs = [e for e in equivalences() if allowed(sc, surface, e)]
    if not eqs:
        return commands
    graded = [c for c in commands if not c.rejected and not c.hook and not c.corrected and not c.is_help]
    after: dict[int, list[Command]] = {}
    for eq in eqs:
        n = len(eq.sequence)
        for k in range(len(graded) - n + 1):
            run = graded[k:k + n]
            binding = _bind(surface, eq, run)
            made = None if binding is None else _means(surface, eq, run, binding)
            if made is not None:
                last = run[-1]
                after.setdefault(id(last), []).append(
                    replace(last, argv=made, means=eq.id, line=f"{last.line}  [= {eq.id}]", inline=False, exit=_exit(run)))
    out = []
    for c in commands:
        out.append(c)
        out += after.get(id(c), [])
    return out


def _exit(run: list[Command]) -> int | None:
    codes = [c.exit for c in run]
    if any(x is None for x in codes):
        return None
    return next((x for x in codes if x != 0), 0)


def _bind(surface: Surface, eq: Equivalence, run: list[Command]) -> dict | None:
    binding: dict[str, str] = {}
    for step, cmd in zip(eq.sequence, run):
        if not matches(surface, list(step), cmd.argv):
            return None
        pp = parse(surface, [t for t in step if t != "*"], strict=False)
        sp = parse(surface, cmd.argv, strict=False)
        for pv, sv in zip(pp.positionals, sp.positionals):
            if isinstance(pv, str) and PLACEHOLDER.match(pv):
                if binding.setdefault(pv, sv) != sv:
                    return None
    return binding


def _means(surface: Surface, eq: Equivalence, run: list[Command], binding: dict) -> list[str] | None:
    """The argv ``means`` stands for: its placeholders bound, plus the run's flags the command accepts."""
    argv = [binding.get(t, t) for t in eq.means]
    if any(PLACEHOLDER.match(t) for t in argv):
        return None
    node = surface.find(parse(surface, argv, strict=False).path)
    if node is None:
        return None
    for cmd in run:
        p = parse(surface, cmd.argv, strict=False)
        for flag, value in p.flags.items():
            if flag in node.options and flag not in argv:
                argv += [flag] if value is True else [flag, str(value)]
    return argv


# ---------------------------------------------------------------- units

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
         "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60,
         "ninety": 90, "a hundred": 100, "half a": 0.5, "a": 1, "an": 1}
UNITS = {"ms": "ms", "msec": "ms", "msecs": "ms", "millisecond": "ms", "milliseconds": "ms",
         "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
         "min": "min", "mins": "min", "minute": "min", "minutes": "min"}
DURATION = re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?|" + "|".join(sorted(map(re.escape, WORDS), key=len, reverse=True))
                      + r")[\s-]?(" + "|".join(sorted(UNITS, key=len, reverse=True)) + r")\b", re.I)
SCALE = {"ms": 1, "s": 1000, "min": 60000}


def durations(text: str) -> list[tuple[float, str]]:
    """(number, unit) for every duration the text states: "30 seconds", "5 s", "two minutes", "200ms"."""
    out = []
    for m in DURATION.finditer(text):
        num = m.group(1).lower()
        value = float(num) if num[0].isdigit() else float(WORDS[num])
        out.append((value, UNITS[m.group(2).lower()]))
    return out


def units(sc: Scenario, ev: Evidence, cmds: list[Command], surface: Surface) -> tuple[list[str], list[str]]:
    """(contradictions, unsettled): a flag's value stated in another unit; a wait too short to be meant."""
    stated = durations(sc.goal + "\n" + ev.text)
    wrong, open_ = [], []
    for c in cmds:
        p = parse(surface, c.argv, strict=False)
        node = surface.find(p.path) if p.path else None
        if node is None:
            continue
        for flag, value in p.flags.items():
            opt = node.options.get(flag)
            if opt is None or opt.unit not in SCALE or not isinstance(value, str):
                continue
            try:
                v = float(value)
            except ValueError:
                continue
            ms = v * SCALE[opt.unit]  # what the command waits
            # the flag's number read in another unit is a duration the answer states ("up to a minute" beside
            # `--timeout 60` in ms), and nothing the answer states is what the command waits
            other = [(n, u) for n, u in stated if u in SCALE and n * SCALE[u] != ms
                     and any(n * SCALE[u] == v * SCALE[w] for w in SCALE if w != opt.unit)]
            same = [(n, u) for n, u in stated if u in SCALE and n * SCALE[u] == ms]
            if other and not same:
                n, u = other[0]
                wrong.append(f"`{c.text}`: {flag} is in {opt.unit} (the operation's unit), but the answer means "
                             f"{n:g} {u}: {flag} {value} waits {v * SCALE[opt.unit] / 1000:g} s")
            elif "timeout" in opt.dest and 0 < v * SCALE[opt.unit] < 1000 and not same:
                open_.append(f"`{c.text}`: {flag} {value} is {v:g} {opt.unit}, a wait too short to be meant, and the "
                             "answer never says which unit it meant")
    return wrong, open_


# ---------------------------------------------------------------- claims after failed commands

ACK = re.compile(
    r"\b(?:could(?:n'?t| not)|can(?:'?t|not)\s+(?:tell|say|read|determine|confirm|get|see)|unable\s+to\s+"
    r"(?:tell|read|determine|confirm|get|see|reach)|(?:failed|fails|errored|was\s+refused|timed\s+out)\b|"
    r"did(?:n'?t| not)\s+(?:work|answer|respond|return|succeed|print)|no\s+(?:answer|reply|output|result)\b|"
    r"not\s+(?:able|possible)\s+to|I\s+(?:don'?t|do\s+not)\s+know|unknown)", re.I)
QUOTED = re.compile(r"```.*?```|~~~.*?~~~|`[^`\n]*`|\"[^\"\n]*\"|“[^”\n]*”", re.S)


def failed_claims(sc: Scenario, ev: Evidence, surface: Surface) -> list[str]:
    """The goal's result came from a command that failed (and never ran right), yet the answer reports one."""
    required = [s for s in sc.reference if not s.optional]
    if not required or not ev.from_stream:
        return []
    # any step the goal needs: a refused `netif mode ffx` under "switched over to ffx" is a claim on its result
    result_paths = {parse(surface, p, strict=False).path for step in required for p in step.patterns()}
    runs = [c for c in ev.commands if c.source in ("run", "mcp") and not c.is_help and not c.hook and c.argv]
    failed = []
    for i, c in enumerate(runs):
        path = parse(surface, c.argv, strict=False).path
        if path not in result_paths or c.exit in (0, None):
            continue
        if any(parse(surface, d.argv, strict=False).path == path and d.exit == 0 for d in runs[i + 1:]):
            continue  # it ran right later: the answer may report that
        failed.append(c)
    if not failed:
        return []
    said = QUOTED.sub(" ", ev.text)
    if ACK.search(said):
        return []  # the answer says it could not get the result: no claim
    return [f"`{c.text}` failed (exit {c.exit}) and never ran right, yet the answer reports its result" for c in failed]


# ---------------------------------------------------------------- flags named in passing

def flags_in_passing(ev: Evidence, surface: Surface) -> list[str]:
    """A `--flag` named alone in prose that neither the command it is said of nor any command the answer
    names has: an invented flag recommended in passing."""
    stated = sorted((c for c in ev.commands if c.pos >= 0 and c.argv), key=lambda c: c.pos)
    named = [surface.find(p.path) for p in (parse(surface, c.argv, strict=False) for c in ev.commands if c.argv)
             if p.path and p.status != "invented_command"]
    nodes = [n for n in named if n is not None]
    out = []
    for flag, pos, rejected in ev.flag_mentions:
        if rejected:
            continue
        before = [c for c in stated if c.pos < pos]
        near = [surface.find(parse(surface, before[-1].argv, strict=False).path)] if before else []
        if flag in GLOBAL_VALUE_OPTS or flag in GLOBAL_FLAGS:
            continue
        if any(n is not None and _resolve_opt(n, flag) is not None for n in near + nodes):
            continue
        if not nodes:
            continue  # prose with no command at all: nothing it could be said of
        said_of = f" (said of `{before[-1].text}`)" if before else ""
        out.append(f"{flag}{said_of}: no command the answer names has it")
    return out


# ---------------------------------------------------------------- claims against what panio printed

SAY_VERB = r"(?:reads|read|says|said|shows|showed|shown|printed|prints|returned|returns|reported|reports|displays|displayed|outputs?)"
SAID = re.compile(SAY_VERB + r"\s*:?\s*(?:`([^`\n]+)`|\"([^\"\n]+)\"|“([^”\n]+)”)", re.I)
OPPOSITE = {"on": "off", "off": "on", "up": "down", "down": "up", "running": "stopped", "stopped": "running",
            "enabled": "disabled", "disabled": "enabled"}
STATE_CLAIM = r"\b(?:is|are|'s|was|were|powered|currently|now|still|stays|remains)\s+(?:[*_]{1,2})?(?:(?:currently|now|still|powered)\s+)?(?:[*_]{1,2})?(%s)\b(?=[*_]{0,2}(?:\s*[.,;:!)—–-]|\s*$|\s+(?:right\s+now|now|currently|at\s+the\s+moment|and|but|so)\b))"
NEGATION = re.compile(r"\b(?:not|no|never|none|neither|nor|without|missing|absent|cannot)\b|n't\b", re.I)
PRESENT = re.compile(r"\b(?:present|found|plugged\s+in|connected|detected|attached|available|ok)\b", re.I)
CONSISTENT = re.compile(r"\b(?:consistent|matches|match|matching|in\s+sync|agrees?|lines\s+up)\b", re.I)
# a clause that says what a command checks, or what will be, claims nothing about what it printed
UNASSERTED = re.compile(r"\b(?:whether|if|checks|verif(?:y|ies)|would|will|should|once|until|unless|when|expect)\b", re.I)
EVERY = re.compile(r"\b(?:every|all|both|each|everything)\b", re.I)
DOCTOR_LINE = re.compile(r"^\s*([A-Z]{2,})\s+(\w+)\s+(\S+)\s+(.*)$")
CLAUSE = re.compile(r"[.;:!?](?=\s|$)|,\s|\n\s*\n|\s[—–]\s")
PROMPTED = re.compile(r"^\s*(?:\$|%|#|>|❯)\s|^\s*panio\s")
OUTPUT_SUBJECT = re.compile(r"`|\b(?:panio|screen|console|output|log|status|doctor|reply|response|prompt|frame|"
                            r"capture|it|which|that|state)\b", re.I)
NOT_OUTPUT = re.compile(r"\b(?:skill|docs?|documentation|help|readme|manual|man\s+page|SKILL\.md)\b", re.I)
ELLIPSIS = re.compile(r"\.\.\.|…|<[^<>]*>")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def printed_claims(sc: Scenario, ev: Evidence, surface: Surface) -> list[str]:
    """What the answer says panio printed, against what it printed: a claim it contradicts is a fail."""
    every = [c for c in ev.commands if c.source in ("run", "mcp") and c.output.strip()]  # help printed, too
    ran = [c for c in every if not c.is_help and c.argv]
    if not ran:
        return []
    printed = _norm("\n".join(c.output for c in every))
    prose, blocks = _prose_and_output_blocks(ev.text)
    out = []
    if _result_ran(sc, ev, surface):  # the answer reports the result of a command that ran: it must be that output
        for line in blocks:
            if PROMPTED.match(line):
                continue  # the command the output came from, not output
            frags = [f for f in ELLIPSIS.split(line) if len(f.strip()) >= 4]
            missing = next((f for f in frags if _norm(f) not in printed), None)
            if missing is not None:
                out.append(f"the answer shows {line.strip()!r} as the output, but no panio command printed it")
        for m in SAID.finditer(ev.text):
            quoted = next(g for g in m.groups() if g is not None)
            if quoted.strip().startswith(("panio ", "-")) or len(quoted.strip()) < 2:
                continue  # a command or a flag named, not output quoted
            left = max([0, *[x.end() for x in CLAUSE.finditer(ev.text[:m.start()])]])
            subject = ev.text[max(left, m.start() - 80):m.start()]
            if not OUTPUT_SUBJECT.search(subject) or NOT_OUTPUT.search(subject):
                continue  # what the docs, the help or the skill say is not what a command printed
            frags = [f for f in ELLIPSIS.split(quoted) if f.strip()]
            if frags and any(_norm(f) not in printed for f in frags):
                out.append(f"the answer says panio {m.group(0).split()[0].lower()} {quoted!r}, but no panio command "
                           "printed it")
    out += _state_claims(ran, prose) + _report_claims(ran, prose)
    return out


def _result_ran(sc: Scenario, ev: Evidence, surface: Surface) -> bool:
    required = [s for s in sc.reference if not s.optional]
    if not required:
        return False
    paths = {parse(surface, p, strict=False).path for p in required[-1].patterns()}
    return any(c.exit == 0 and parse(surface, c.argv, strict=False).path in paths
               for c in ev.commands if c.source in ("run", "mcp") and c.argv)


def _prose_and_output_blocks(text: str) -> tuple[str, list[str]]:
    """The answer's prose (fenced blocks out, inline code kept as its words) and the lines of the blocks it
    gives as output (a data language such as ``text``, or introduced as output: "Output:")."""
    from scenarios import stance
    from scenarios.evidence import DATA_LANGS, FENCE_RE

    lines, prose, last = [], [], 0
    for m in FENCE_RE.finditer(text):
        prose.append(text[last:m.start()])
        last = m.end()
        lang = m.group("lang").lower()
        if lang in DATA_LANGS - {"json", "jsonl", "toml", "yaml", "yml", "ini", "diff", "csv", "xml", "html"} \
                or (not lang and stance.output_block(text[:m.start()])):
            lines += [x for x in m.group("body").splitlines() if x.strip()]
    prose.append(text[last:])
    return re.sub(r"`([^`\n]*)`", r"\1", "".join(prose)), lines


def _state_claims(ran: list[Command], prose: str) -> list[str]:
    """The last command that printed one state on one short line (``Power OFF (pico)``, ``off``) against the
    state the answer reports."""
    state = None
    for c in ran:
        lines = [x for x in c.output.splitlines() if x.strip()]
        words = [w for w in re.findall(r"[a-z]+", _norm(c.output)) if w in OPPOSITE]
        if len(lines) == 1 and len(lines[0]) <= 80 and len(words) == 1:
            state = (c, words[0])
    if state is None:
        return []
    c, got = state
    said = {w for w in (OPPOSITE[got], got) if _claims(prose, STATE_CLAIM % w)}
    if OPPOSITE[got] in said and got not in said:
        return [f"`{c.text}` printed {got!r}, but the answer reports {OPPOSITE[got]!r}"]
    return []


def _claims(prose: str, pattern: str) -> bool:
    for m in re.finditer(pattern, prose, re.I):
        left = max([0, *[x.end() for x in CLAUSE.finditer(prose[:m.start()])]])
        if not NEGATION.search(prose[left:m.end()]) and not UNASSERTED.search(prose[left:m.end()]):
            return True
    return False


def _report_claims(ran: list[Command], prose: str) -> list[str]:
    """A doctor report's items that are not OK: none may be called present, nor the whole called consistent."""
    bad: list[tuple[str, ...]] = []
    for c in ran:
        if c.argv[:1] != ["doctor"]:
            continue
        bad += _doctor_items(c.output)
    if not bad:
        return []
    out = []
    for clause in CLAUSE.split(prose):
        if NEGATION.search(clause) or UNASSERTED.search(clause):
            continue
        low = clause.lower()
        if PRESENT.search(clause):
            named = [item for item in bad if any(w and w.lower() in low for w in item)]
            if named or EVERY.search(clause):
                what = "/".join(named[0][:2]) if named else "every item"
                out.append(f"doctor reported {what} missing, but the answer calls it present: {clause.strip()!r}")
                continue
        if CONSISTENT.search(clause):
            out.append(f"doctor reported {len(bad)} item(s) missing, but the answer calls the configuration "
                       f"consistent: {clause.strip()!r}")
    return out


def _doctor_items(output: str) -> list[tuple[str, ...]]:
    """(channel, item, device) of each item `panio doctor` reports not OK, from its text or its --json."""
    import json

    items = []
    try:
        data = json.loads(output)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("targets"), dict):
        for rows in data["targets"].values():
            for r in rows if isinstance(rows, list) else []:
                if isinstance(r, dict) and str(r.get("status", "")).lower() not in ("ok", "present"):
                    dev = str(r.get("detail", "")).split()[:1]
                    items.append((str(r.get("channel", "")), str(r.get("item", "")), *dev))
        return items
    for line in output.splitlines():
        m = DOCTOR_LINE.match(line)
        if m and m.group(1) not in ("OK", "PRESENT"):
            items.append((m.group(2), m.group(3), *m.group(4).split()[:1]))
    return items
