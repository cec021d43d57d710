"""Does an answer recommend a command it mentions, or name it only to reject it?

A mention is *rejected* only when the rejection governs that very span, not
when a negation word happens to sit somewhere in its sentence ("If the tablet
isn't listed, run `panio adb devices`" recommends an invented command):

* a cue right before it: "there is no `X`", "not `X`", "instead of `X`",
  "rather than `X`", "avoid `X`", "don't run `X`", "without `X`", "never `X`";
* or the span is the subject of its clause and the clause rejects it: "`X`
  doesn't exist", "`X` is the wrong tool", "`X` would pulse DTR, which dut
  hasn't opted into, so it errors", "Running `X` to check would reboot it —
  exactly what not to do". Spans joined by "or"/"and"/"," share the clause.

In code blocks: a trailing comment with a cue (``# wrong``, ``# not this``)
rejects its line, a comment line with one rejects the next command line, and
a block introduced by "Don't do this:" / "Wrong:" is rejected whole.
"""

from __future__ import annotations

import re

_FILL = r"(?:\s+(?:a|an|the|any|use|using|run|running|call|calling|reach\s+for|with|via|through|do|type|typing|need|needed|needs|to|for|of|like|such\s+as|e\.g\.|,))*"
PRE_CUE = re.compile(
    r"(?:\bthere(?:'s|\s+is|\s+are)\s+no|\bno\s+such|\bno\s+need\s+(?:for|to\s+\w+)|\bno|\bnot|\bnever|\bdon'?t|\bdo\s+not|"
    r"\b(?:unknown|invented|fabricated|made[- ]up|non-?existent|fake|bogus)(?:\s+(?:panio\s+)?(?:command|subcommand|flag|option)s?)?(?:\s+such\s+as|\s+like)?|"
    r"\bfabricat\w*|\binvent(?:ing|s)?|"
    r"\bdoesn'?t|\bcan'?t|\bcannot|\bwon'?t|\binstead\s+of|\brather\s+than|\bavoid(?:ing)?|\bwithout|\bunlike|\bnor|\bneither|"
    r"\bskip|\bwrong|\bbad|\bincorrect|❌|✗)" + _FILL + r"\s*[:\"'(]?\s*$", re.I)
SUBJECT_PRE = re.compile(r"^\s*(?:[-*•]\s*)?(?:(?:\w+ing|the|a|an|so|and|but|also|then|just|note(?: that)?:?)\b[^.`]{0,40})?[\s(\"']*$", re.I)
AUX = re.compile(r"^[\s)\"',:—–-]*(?:(?:only|just|also|here|then)\s+)?(?:is|are|was|were|would|will|does|do|did|can|could|"
                 r"won'?t|isn'?t|aren'?t|doesn'?t|don'?t|can'?t|cannot|wouldn'?t|has|have|hasn'?t|haven'?t|to\s+\S+)\b", re.I)
CLAUSE_CUE = re.compile(
    r"(?:n't\b|\bnot\b|\bno\s+(?:such|longer)\b|\bnever\b|\bwrong\b|\bavoid|\binstead\b|\brather\b|\berrors?\b|\bfails?\b|"
    r"\brefuse|\bdoes\s+not\s+exist|\bisn't\s+real|\binvented\b|\bfabricated\b|\bmade[- ]up\b|\bwould\s+(?:have\s+)?"
    r"(?:delete|deleted|remove|removed|wipe|reboot|change|switch|drop|kill|destroy|clobber)|exactly\s+what|\bso\s+I\b|"
    r"\bfor\s+humans\b|\binteractive\b)", re.I)
JOINER = re.compile(r"^\s*(?:,|/|\bor\b|\band\b|\bnor\b)\s*$", re.I)
BLOCK_INTRO = re.compile(r"^\W*(?:don'?t|do\s+not|never|avoid|wrong|bad|incorrect|not\s+this|what\s+not\s+to\s+do|"
                         r"anti-?pattern|instead\s+of)\b[^\n]*:\s*$", re.I)
# a comment rejects a command only when it says so of that command ("# wrong", "# don't do this"), not when it
# explains it ("# not -t: the target is positional", "# Don't use serial reset here:" above the right command)
COMMENT_CUE = re.compile(r"^\W*(?:wrong|bad|incorrect|invalid|broken|not\s+this|avoid(?:\s+this)?\W*$|"
                         r"(?:don'?t|do\s+not|never)\s+(?:do|use|run|try)\s+this|(?:this\s+)?(?:won'?t|doesn'?t)\s+work|❌|✗)", re.I)
OUTPUT_INTRO = re.compile(r"(?:\boutput|\bresult|\bresponse|you(?:'ll|\s+will|\s+should)\s+see|looks\s+like|"
                          r"\bprints|\breturns|\bshows)\s*:\s*$", re.I)
SENTENCE_END = re.compile(r"(?<![.\w/~-][a-z])[.!?](?=\s|$)|\n\s*\n|\n(?=\s*[-*•\d])")


def _clause_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    head = text[:start]
    ends = [m.end() for m in SENTENCE_END.finditer(head)]
    left = max([0, *ends])  # a single newline is paragraph wrapping, not a boundary
    m = SENTENCE_END.search(text, end)
    right = m.start() if m else len(text)
    return left, right


def rejected(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    """Whether the inline span text[start:end] (one of ``spans``, positions in ``text``) is named to be rejected."""
    left, right = _clause_bounds(text, start, end)
    prev = [s for s in spans if s[1] <= start and s[0] >= left]
    # spans joined by "or"/"and"/"," share the cue before the first of them
    first = start
    for s in reversed(prev):
        if JOINER.match(text[s[1]:first]):
            first = s[0]
        else:
            break
    pre = text[max([left] + [s[1] for s in prev if s[1] <= first]):first]
    if PRE_CUE.search(pre):
        return True
    # the clause after the span (and the spans joined to it)
    after = end
    for s in spans:
        if s[0] >= after and JOINER.match(text[after:s[0]]):
            after = s[1]
    nxt = min([s[0] for s in spans if s[0] >= after] + [right])
    post = text[after:nxt]
    if not SUBJECT_PRE.match(pre):
        return False
    if AUX.match(post) or re.match(r"^\s*\)?\s*(?:to\s+\"?\w+\"?\s+)?would\b", post, re.I) or re.match(r"^\s*\)", post):
        return bool(CLAUSE_CUE.search(post))
    return False


def comment_rejects(comment: str) -> bool:
    return bool(COMMENT_CUE.match(comment))


def output_block(before: str) -> bool:
    """A fenced block introduced as output ("Output looks like:", "You'll see:"): data, not commands."""
    last = before.rstrip().rsplit("\n", 1)[-1]
    return bool(OUTPUT_INTRO.search(last))


def block_rejected(before: str) -> bool:
    """A fenced block introduced by "Don't do this:" or "Wrong:" (the last clause before the block).

    Only the clause that ends in the colon introduces the block: in "Don't take the address from
    `X`: it can be stale. Use `Y` instead:" or "Don't `kill` it by hand; panio reaps it:" the
    negation governs its own sentence or clause, not the commands that follow.
    """
    last = before.rstrip().rsplit("\n", 1)[-1]
    plain = re.sub(r"`[^`]*`", lambda m: "`" + "x" * (len(m.group()) - 2) + "`", last)  # "." or ";" inside code
    cuts = [m.end() for m in re.finditer(r"[.!?](?=\s+[A-Z`\"'(])|;", plain)]
    return bool(BLOCK_INTRO.match(last[max([0, *cuts]):]))
