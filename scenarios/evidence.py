"""What an agent did and said, reduced to commands the checker can parse.

Sources, in trial order: shell commands it ran (from the harness event stream,
or the argv log of the panio shim), MCP tool calls, then the commands it
*stated* in its final answer (fenced code blocks, and inline `panio …` spans
that are not in a negated sentence such as "there is no `panio flash`").
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

PANIO_RE = re.compile(r"(?:^|(?<=[\s;&|(`$]))(?:[\w./~-]*/)?panio(?=\s|$)")
SEPARATORS = re.compile(r"\s*(?:;|&&|\|\||\||\)|`|\n)")
FENCE_RE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
INLINE_RE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
NEGATION_RE = re.compile(r"\b(no|not|never|isn't|doesn't|don't|cannot|can't|instead of|rather than|avoid|without)\b", re.I)
HELP_FLAGS = {"-h", "--help"}
DOC_READ_RE = re.compile(r"\b(cat|less|more|head|sed|grep|rg|bat)\b.*(SKILL\.md|\bdocs/)")


@dataclass
class Command:
    argv: list[str]  # tokens after `panio`
    source: str  # run | stated
    line: str = ""
    exit: int | None = None  # exit status when it ran
    refused: bool = False  # the shim refused it (outside the T1-safe set)
    rejected: bool = False  # named only to say not to use it ("there is no `panio flash`")

    @property
    def is_help(self) -> bool:
        """`panio`, `panio X --help`: reads help, runs nothing."""
        return not self.argv or bool(HELP_FLAGS & set(self.argv))

    @property
    def is_learning(self) -> bool:
        """Help or a skill read: what counts as discovery (D1)."""
        return self.is_help or self.argv[:1] == ["skill"]

    @property
    def text(self) -> str:
        return "panio " + shlex.join(self.argv) if self.argv else "panio"


@dataclass
class Evidence:
    """Everything the graders look at for one trial."""

    commands: list[Command] = field(default_factory=list)  # panio commands, in order
    shell: list[str] = field(default_factory=list)  # every shell line, panio or not
    text: str = ""  # the final answer
    reads: list[str] = field(default_factory=list)  # docs/skill files the agent read
    mcp_calls: list[dict] = field(default_factory=list)
    from_stream: bool = False  # True when an event stream (not just an answer) was seen
    tokens: dict = field(default_factory=dict)
    turns: int | None = None

    def add_shell(self, line: str, source: str = "run", exit: int | None = None) -> None:
        self.shell.append(line)
        if source == "run" and DOC_READ_RE.search(line):
            self.reads.append(line)  # `cat …/SKILL.md`, `less docs/serial.md`: discovery
        for argv in panio_commands(line):
            self.commands.append(Command(argv, source, line, exit))

    def add_answer(self, text: str) -> None:
        self.text = (self.text + "\n" + text).strip()
        for block in FENCE_RE.findall(text):
            for line in _logical_lines(block):
                self.add_shell(line, source="stated")
        outside = FENCE_RE.sub(" ", text)
        for m in INLINE_RE.finditer(outside):
            span = m.group(1).strip()
            if not PANIO_RE.match(span) or _negated(outside, m.start()):
                continue
            self.add_shell(span, source="stated")


def _logical_lines(block: str) -> list[str]:
    out: list[str] = []
    for raw in block.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _negated(text: str, pos: int) -> bool:
    start = max(text.rfind(".", 0, pos), text.rfind("\n", 0, pos), 0)
    return bool(NEGATION_RE.search(text[start:pos]))


def panio_commands(line: str) -> list[list[str]]:
    """Every ``panio …`` invocation inside one shell line (pipes, ``$(…)``, loops)."""
    found: list[list[str]] = []
    for m in PANIO_RE.finditer(line):
        rest = line[m.end():]
        argv = _split_until_separator(rest)
        if argv is not None:
            found.append(argv)
    return found


PLACEHOLDER_RE = re.compile(r"<([\w.-]+)>")


def _split_until_separator(rest: str) -> list[str] | None:
    rest = PLACEHOLDER_RE.sub("\x02\\1\x03", rest)
    toks = _split(rest)
    return None if toks is None else [t.replace("\x02", "<").replace("\x03", ">") for t in toks]


def _split(rest: str) -> list[str] | None:
    try:
        lex = shlex.shlex(rest, posix=True, punctuation_chars=";&|()`<>")
        lex.whitespace_split = True
        toks: list[str] = []
        for tok in lex:
            if tok and set(tok) <= set(";&|()`<>"):
                break
            toks.append(tok)
        return [t for t in toks if t]
    except ValueError:
        try:
            return shlex.split(SEPARATORS.split(rest, 1)[0])
        except ValueError:
            return None

