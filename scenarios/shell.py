"""Where panio commands are in a shell line: command position only, quoted commands handed on.

``panio`` is a command only where a shell would run it: at the start of a
simple command (after ``;``, ``&&``, ``||``, ``|``, ``(``, ``$(``, a backtick,
``--``, ``then``/``do``, variable assignments and wrappers such as ``sudo``,
``env``, ``timeout 5``, ``watch -n 1``, ``xargs``). As an *argument* of another
program (``grep -rn panio docs/``, ``pip show panio``, ``which panio``, the MCP
registration line ``claude mcp add panio -- panio mcp``) it is not. A quoted
string that is itself a panio command line (``ssh bench1 "panio serial log
pico"``, ``watch 'panio serial log pico --tail 5'``, ``sh -c …``) is read as the
command it hands on, except where the program only searches or prints text
(grep, echo, …). A panio command line inside a panio argument (a power hook,
``--cycle-cmd "panio helper shellyplug …"``) is returned by ``hooks``: it is
checked for inventions but does not run now.

``simple_commands(line)`` also yields every non-panio simple command, comments
stripped, so shell predicates (``forbid_shell``) see what runs, not prose.
"""

from __future__ import annotations

import re
import shlex

PANIO_WORD = re.compile(r"^(?:[\w./~-]*/)?panio$")
OPERATORS = {";", "&&", "||", "|", "&", "(", ")", "|&", ";;", "{", "}", "!"}
KEYWORDS = {"then", "do", "else", "elif", "if", "while", "until", "time", "exec", "command", "builtin", "nohup"}
# wrappers: program -> options that take a value; the first non-option word after them is a command
WRAPPERS = {"sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}, "env": {"-u", "-C", "-S"},
            "timeout": {"-s", "-k", "--signal", "--kill-after"}, "nice": {"-n"}, "ionice": {"-c", "-n"},
            "watch": {"-n", "--interval", "-d", "--differences"}, "xargs": {"-n", "-I", "-L", "-P", "-d", "-s", "-E"},
            "stdbuf": {"-i", "-o", "-e"}, "unbuffer": set(), "caffeinate": set(), "strace": {"-o", "-e", "-p"},
            "flock": {"-w"}, "setsid": set(), "chronic": set(), "systemd-run": {"-u", "-p"},
            "ssh": {"-p", "-i", "-l", "-o", "-J", "-F", "-E", "-b", "-c", "-D", "-L", "-R", "-W", "-S", "-m", "-O", "-w"}}
POSITIONAL_FIRST = {"timeout": 1, "flock": 1, "ssh": 1}  # wrappers whose first positional is not the command
SEARCHERS = {"grep", "egrep", "fgrep", "rg", "ag", "ack", "git", "echo", "printf", "find", "sed", "awk", "less", "more",
             "cat", "head", "tail", "man", "apropos", "which", "type", "whereis", "locate", "pip", "pip3", "pipx",
             "ls", "cd", "test", "[", "[[", "read", "export", "alias", "jq", "python", "python3", "wc", "sort", "tee"}
SHELL_C = {"sh", "bash", "zsh", "dash", "ksh", "fish"}
SUBST = re.compile(r"\$\(([^()]*(?:\([^()]*\)[^()]*)*)\)|`([^`]*)`")
PLACEHOLDER = re.compile(r"(?<![<\w])<([\w.…-][\w.…' -]{0,40})>(?!>)")  # <seq>, <seq from above>: not a redirect
FD_REDIRECT = re.compile(r"(?<=\s)\d+(?=[<>])")
REDIRECT = re.compile(r"^(?:\d*)(?:>>|>&|<&|&>|>|<|<<<|<<)$")


def _lex(line: str) -> list[str] | None:
    text = FD_REDIRECT.sub("", PLACEHOLDER.sub(lambda m: "\x02" + m.group(1).replace(" ", "\x04") + "\x03", line))
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lex.whitespace_split = True
        toks = list(lex)
    except ValueError:
        try:
            toks = shlex.split(text, comments=True)
        except ValueError:
            return None
    return [t.replace("\x02", "<").replace("\x03", ">").replace("\x04", " ") for t in toks]


def _split_simple(toks: list[str]) -> list[list[str]]:
    out, cur, skip = [], [], False
    for t in toks:
        if skip:
            skip = False
            continue
        if t in OPERATORS or (t and set(t) <= set(";&|()")):
            if cur:
                out.append(cur)
            cur = []
        elif REDIRECT.match(t) or (t and set(t) <= set("<>&")):
            skip = True  # the redirection's target is not an argument
        else:
            cur.append(t)
    if cur:
        out.append(cur)
    return out


def _strip_prefix(words: list[str]) -> list[str]:
    """Drop assignments, keywords and wrappers (with their options) before the real program."""
    i = 0
    while i < len(words):
        w = words[i]
        if w in KEYWORDS or re.match(r"^[A-Za-z_]\w*=", w):
            i += 1
            continue
        base = w.rsplit("/", 1)[-1]
        if base in WRAPPERS:
            i += 1
            takes = WRAPPERS[base]
            skip_pos = POSITIONAL_FIRST.get(base, 0)
            while i < len(words):
                o = words[i]
                if o == "--":
                    i += 1
                    break
                if o.startswith("-") and len(o) > 1:
                    i += 2 if (o in takes and "=" not in o) else 1
                elif re.match(r"^[A-Za-z_]\w*=", o):
                    i += 1
                elif skip_pos:
                    skip_pos -= 1
                    i += 1
                else:
                    break
            continue
        break
    return words[i:]


def _handed_on(words: list[str]) -> list[str]:
    """Command lines a non-panio program is given: ``sh -c STR``, ``ssh HOST STR``, ``… -- CMD``, a quoted panio line."""
    prog = words[0].rsplit("/", 1)[-1]
    if prog in SEARCHERS:
        return []
    out: list[str] = []
    if prog in SHELL_C:
        for j, w in enumerate(words[1:-1], 1):
            if w.startswith("-") and "c" in w[1:]:
                out.append(words[j + 1])
        return out
    for j, w in enumerate(words[1:], 1):
        if w == "--" and j + 1 < len(words):
            out.append(shlex.join(words[j + 1:]))
            break
        if " " in w.strip() and _starts_with_panio(w):
            out.append(w)
    return out


def _starts_with_panio(s: str) -> bool:
    first = s.strip().split(None, 1)[0] if s.strip() else ""
    return bool(PANIO_WORD.match(first))


def simple_commands(line: str, depth: int = 0) -> list[list[str]]:
    """Every simple command a shell would run for ``line`` (substitutions and handed-on strings included)."""
    if depth > 4:
        return []
    found: list[list[str]] = []
    for m in SUBST.finditer(line):
        found += simple_commands(m.group(1) if m.group(1) is not None else m.group(2), depth + 1)
    toks = _lex(SUBST.sub("<subst>", line))  # a placeholder: its value is another command's output
    if toks is None:
        return found
    for words in _split_simple(toks):
        words = _strip_prefix([w for w in words if w != "<subst>"] if words[:1] == ["<subst>"] else words)
        if not words:
            continue
        if " " in words[0].strip():  # a wrapper handed a command string: `watch 'panio serial log …'`
            found += simple_commands(shlex.join(words) if len(words) > 1 else words[0], depth + 1)
            continue
        found.append(words)
        if not PANIO_WORD.match(words[0]):
            for inner in _handed_on(words):
                found += simple_commands(inner, depth + 1)
    return found


def hooks(argv: list[str]) -> list[str]:
    """Command lines inside a panio command's arguments (`--cycle-cmd "panio helper shellyplug …"`): not run now."""
    return [w for w in argv if " " in w.strip() and _starts_with_panio(w)]


def panio_commands(line: str) -> list[list[str]]:
    """The argv (after ``panio``) of every panio invocation in ``line``."""
    return [words[1:] for words in simple_commands(line) if PANIO_WORD.match(words[0])]
