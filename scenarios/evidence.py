"""What an agent did and said, reduced to commands the checker can parse.

Sources, in trial order: shell commands it ran (from the harness event stream,
or the argv log of the panio shim), MCP tool calls, then the commands it
*stated* in its final answer (fenced code blocks, ``` or ~~~, and inline
`panio …` spans). A command named only to be rejected ("there is no `panio
flash`", "`panio serial reset dut` would pulse DTR, so it errors") is kept but
marked ``rejected`` (scenarios.stance); output lines and comments in a block
are not commands.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from scenarios.shell import PANIO_WORD, hooks, simple_commands
from scenarios import stance

FENCE_RE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$", re.S | re.M)
INLINE_RE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
PROMPT_RE = re.compile(r"^\s*(?:\$|%|❯|>>>)\s+")
DATA_LANGS = {"text", "txt", "plaintext", "output", "log", "json", "jsonl", "toml", "yaml", "yml", "ini", "diff", "csv", "xml", "html"}
PANIO_LINE = re.compile(r"^\s*panio\s+[a-z-]")  # a command even among prompted lines (output says "panio: …")
TRAILING_COMMENT = re.compile(r"\s#\s?(?P<c>.*)$")
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
    hook: bool = False  # a panio command line inside another's argument (a power hook): checked, not run
    inline: bool = False  # from an inline span in prose: without its arguments it is a mention (`panio serial watch`)
    corrected: bool = False  # ran, failed, and the next panio command ran the same command right (not graded)
    means: str = ""  # made by an equivalence of the catalog (its id) from the commands before it: graded, not run
    pos: int = -1  # where a stated command is in the answer's text
    problem: str = ""  # why panio would refuse it, known before parsing (a stated MCP call its server refuses)
    output: str = ""  # what it printed (stdout and stderr) when it ran: a claim is held to it (scenarios.meaning)

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
    programs: list[str] = field(default_factory=list)  # command lines that run, comments stripped (no output, no prose)
    text: str = ""  # the final answer
    reads: list[str] = field(default_factory=list)  # docs/skill files the agent read
    mcp_calls: list[dict] = field(default_factory=list)
    from_stream: bool = False  # True when an event stream (not just an answer) was seen
    tokens: dict = field(default_factory=dict)
    turns: int | None = None
    harness_error: str = ""  # the harness itself reported a failure (not the agent's answer)
    model: str | None = None  # the model the stream says answered
    flag_mentions: list[tuple[str, int, bool]] = field(default_factory=list)  # (`--flag` alone in prose, where, rejected)

    @property
    def acted(self) -> list[Command]:
        """The commands the agent ran or recommends (not the ones it names only to reject, nor hook lines, nor a
        failed call it corrected at once)."""
        return [c for c in self.commands if not c.rejected and not c.hook and not c.corrected and not c.problem]

    @property
    def hooks(self) -> list[Command]:
        return [c for c in self.commands if c.hook and not c.rejected]

    def add_shell(self, line: str, source: str = "run", exit: int | None = None, rejected: bool = False) -> None:
        self.shell.append(line)
        if source == "run" and DOC_READ_RE.search(line):
            self.reads.append(line)  # `cat …/SKILL.md`, `less docs/serial.md`: discovery
        if not rejected:
            m = TRAILING_COMMENT.search(line)
            self.programs.append(line[:m.start()] if m and not _in_quotes(line, m.start()) else line)
        for words in simple_commands(line):
            if PANIO_WORD.match(words[0]):
                self.commands.append(Command(words[1:], source, line, exit, rejected=rejected))
                for h in hooks(words[1:]):
                    self.commands += [Command(w[1:], source, h, rejected=rejected, hook=True)
                                      for w in simple_commands(h) if PANIO_WORD.match(w[0])]

    def add_answer(self, text: str) -> None:
        """Commands an answer states: fenced blocks (``` or ~~~) and inline `panio …` spans, in text order
        (a plan that names its first step in prose and the rest in a block is in that order)."""
        self.text = (self.text + "\n" + text).strip()
        blocks = list(FENCE_RE.finditer(text))
        blanked = text
        for m in blocks:
            blanked = blanked[:m.start()] + " " * (m.end() - m.start()) + blanked[m.end():]
        found = list(INLINE_RE.finditer(blanked))
        spans = [(m.start(), m.end()) for m in found]
        first = len(self.commands)
        for m in sorted([*blocks, *found], key=lambda m: m.start()):
            before = len(self.commands)
            if m.re is FENCE_RE:
                self._add_block(text, m)
            else:
                span = m.group(1).strip()
                if FLAG_SPAN.match(span):  # `--rust-only` alone in prose: a flag named in passing
                    self.flag_mentions.append((span.split("=")[0].split()[0], m.start(),
                                               stance.rejected(blanked, m.start(), m.end(), spans)))
                    continue
                if not simple_commands(span) or not any(PANIO_WORD.match(w[0]) for w in simple_commands(span)):
                    continue
                self.add_shell(span, source="stated", rejected=stance.rejected(blanked, m.start(), m.end(), spans))
                for c in self.commands[before:]:
                    c.inline = True
            for c in self.commands[before:]:
                c.pos = m.start()
        if len(self.commands) == first and not self.mcp_calls:
            self._add_prose(blanked, spans)
        self._add_prose_inventions(blanked, spans, self.commands[first:])

    def _add_prose(self, text: str, spans: list[tuple[int, int]]) -> None:
        """Commands written in plain prose, in an answer that has no block or inline command ("start the capture
        with panio serial watch pico, then ..."): each runs from `panio` to the end of its clause (a comma,
        semicolon, full stop, dash, "then"/"and"/"to"...), cut back to its longest prefix that parses. Only a
        real top-level command starts one (prose saying "the panio command line" names none)."""
        for m in PROSE_PANIO.finditer(text):
            words = _prose_words(text[m.end():text.find("\n", m.end()) if "\n" in text[m.end():] else len(text)])
            if not words:
                continue
            line = "panio " + shlex.join(words)
            self.add_shell(line, source="stated", rejected=stance.rejected(text, m.start(), m.end(), spans))
            for c in self.commands[-1:]:
                c.inline, c.pos = True, m.start()

    def _add_prose_inventions(self, text: str, spans: list[tuple[int, int]], stated: list[Command]) -> None:
        """A command panio lacks, recommended in plain prose beside the answer's blocks ("panio serial follow
        dut streams it live"): a real group, then a word that is none of its subcommands, then a target the
        answer's own commands name (or a flag); or a command whose first word panio checks by name, given one
        it lacks ("panio helper list"). Prose naming a real command is left to the blocks."""
        surface = _prose_surface()
        if surface is None:
            return
        targets = {t for c in stated for t in c.argv[1:] if not t.startswith("-")}
        for m in PROSE_PANIO.finditer(text):
            end = text.find("\n", m.end())
            toks = _prose_tokens(text[m.end():end if end >= 0 else len(text)])
            group = surface.root.children.get(toks[0]) if toks else None
            if group is None or len(toks) < 2 or not re.fullmatch(r"[a-z][a-z0-9-]+", toks[1]):
                continue
            if not group.children:  # a leaf whose first word panio checks by name (`helper list`: no such helper)
                from scenarios.surface import parse

                if parse(surface, toks[:2], strict=False).status != "invented_command":
                    continue
                words = toks[:2]
            elif len(toks) < 3 or toks[1] in group.children or not (toks[2] in targets or toks[2].startswith("--")):
                continue
            else:
                words = toks[:3]
            before = len(self.commands)
            self.add_shell("panio " + shlex.join(words), source="stated",
                           rejected=stance.rejected(text, m.start(), m.end(), spans))
            for c in self.commands[before:]:
                c.inline, c.pos = True, m.start()

    def _add_block(self, text: str, m) -> None:
        whole_rejected = stance.block_rejected(text[:m.start()])
        lang = "output" if stance.output_block(text[:m.start()]) else m.group("lang").lower()
        calls = _tool_calls(m.group("body"))
        if calls:  # the mcp condition: tool calls stated as JSON lines
            self.mcp_calls += [] if whole_rejected else calls
            return
        for line, rej in _command_lines(m.group("body"), lang):
            self.add_shell(line, source="stated", rejected=rej or whole_rejected)


FLAG_SPAN = re.compile(r"^--[a-z][\w-]*(?:[ =][^\s`]+)?$")
PROSE_PANIO = re.compile(r"(?<![\w/.`$-])panio\s+(?=[a-z])")
PROSE_STOP = {"then", "and", "to", "so", "which", "if", "or", "because", "until", "while", "—", "–", "->", "=>", "→",
              "first", "next", "afterwards", "after", "before", "when", "—", "still", "will", "should", "again"}


def _prose_tokens(rest: str) -> list[str]:
    """The words from here to the end of the clause (a comma, full stop, "then", "and", ...)."""
    try:
        lex = shlex.shlex(rest, posix=True)
        lex.whitespace_split = True
        lex.commenters = ""
        toks = []
        for t in lex:
            end = t[-1:] in (",", ";", ".", ":", ")", "!", "?")
            t = t.rstrip(",;.:)!?") if end and len(t) > 1 else t
            if t.lower() in PROSE_STOP or not t:
                break
            toks.append(t)
            if end:
                break
    except ValueError:
        return []
    return toks


def _prose_words(rest: str) -> list[str]:
    """The words of a command in prose, up to the end of its clause; [] when it names no real command."""
    toks = _prose_tokens(rest)
    surface = _prose_surface()
    if surface is None or not toks or toks[0] not in surface.root.children:
        return []
    from scenarios.surface import parse

    for n in range(len(toks), 0, -1):  # the longest prefix that parses (prose goes on after the command)
        if parse(surface, toks[:n], strict=False).status == "ok":
            return toks[:n]
    return toks if parse(surface, toks, strict=False).status == "convention" else []


_SURFACE: list = []


def _prose_surface():
    """The live surface, built once (prose reading needs to know which words are panio's commands)."""
    if not _SURFACE:
        try:
            from scenarios.surface import Surface

            _SURFACE.append(Surface.live())
        except Exception:  # noqa: BLE001 - no panio to read: prose is not read for commands
            _SURFACE.append(None)
    return _SURFACE[0]


def _tool_calls(block: str) -> list[dict]:
    """`{"tool": "serial_log", "arguments": {...}}` per line (or one JSON array of them)."""
    import json

    text = block.strip()
    try:
        items = json.loads(text) if text.startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    except ValueError:
        return []
    if not isinstance(items, list) or not all(isinstance(x, dict) and isinstance(x.get("tool"), str) for x in items):
        return []
    return [{"tool": x["tool"], "arguments": x.get("arguments") or x.get("args") or {}, "stated": True} for x in items]


def _command_lines(block: str, lang: str) -> list[tuple[str, bool]]:
    """(command line, rejected) for a fenced block: prompts mark commands when present; output and data are skipped."""
    raw = block.replace("\\\n", " ").splitlines()
    prompted = any(PROMPT_RE.match(x) for x in raw)
    out: list[tuple[str, bool]] = []
    reject_next = False
    for x in raw:
        line = x.strip()
        if prompted or lang in DATA_LANGS:
            if not PROMPT_RE.match(x) and not (prompted and PANIO_LINE.match(x)):
                continue  # output (or data) lines are not commands
            line = PROMPT_RE.sub("", x).strip()
        if not line:
            continue
        if line.startswith("#"):
            reject_next = stance.comment_rejects(line.lstrip("#"))
            continue
        m = TRAILING_COMMENT.search(line)
        rej = reject_next or bool(m and stance.comment_rejects(m.group("c")) and not _in_quotes(line, m.start()))
        reject_next = False
        out.append((line, rej))
    return out


def _in_quotes(line: str, pos: int) -> bool:
    head = line[:pos]
    return head.count("'") % 2 == 1 or head.count('"') % 2 == 1


def panio_commands(line: str) -> list[list[str]]:
    """Every ``panio …`` invocation inside one shell line (command position only; see scenarios.shell)."""
    return [w[1:] for w in simple_commands(line) if PANIO_WORD.match(w[0])]
