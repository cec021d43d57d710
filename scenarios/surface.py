"""panio's command surface as data, and parsing one stated command against it.

The surface is read from the live argparse tree (``build_parser(full=True)``:
the one import from ``controller`` the eval suite is allowed). A planned
surface (``catalog/_planned.toml``) names commands that other work is
bringing; the drift guard reports scenarios needing them as *pending*, and
tests may overlay it to exercise the checker on runtime scenarios.

``parse(argv)`` classifies one ``panio ...`` argv: ``ok``, ``invented_command``,
``invented_flag``, ``convention`` (-t vs positional), ``malformed``, or
``shorthand`` (prose naming sibling subcommands, ``serial watch/send/log``:
every one exists, none is a runnable command).
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

# $PANIO_EVAL_CATALOG: another catalog directory (its own _planned.toml and labs/), to try a scenario or an
# announced command without touching the shipped one
CATALOG = Path(os.environ.get("PANIO_EVAL_CATALOG") or Path(__file__).parent / "catalog")
GLOBAL_VALUE_OPTS = {"--lab"}
GLOBAL_FLAGS = {"-h", "--help", "--version"}
_PLACEHOLDER = re.compile(r"<[^<>]+>")


@dataclass
class Opt:
    dest: str
    takes_value: bool
    required: bool = False
    unit: str | None = None  # "ms", "s", "bytes": from the operation's spec (bench_agent.ops Param.unit)


@dataclass
class Node:
    """One command (group or leaf) of the tree."""

    path: tuple[str, ...]
    children: dict[str, "Node"] = field(default_factory=dict)
    options: dict[str, Opt] = field(default_factory=dict)  # every option string -> Opt
    positionals: list[tuple[str, str | int | None]] = field(default_factory=list)  # (name, nargs)
    parser: argparse.ArgumentParser | None = None
    planned: bool = False

    @property
    def name(self) -> str:
        return " ".join(self.path)

    def canonical(self, opt: str) -> str:
        """The long spelling of an option (``-t`` -> ``--target``)."""
        o = self.options[opt]
        longs = sorted(s for s, v in self.options.items() if v.dest == o.dest and s.startswith("--"))
        return longs[0] if longs else opt

    def to_spec(self) -> dict:
        return {"options": {k: [v.dest, v.takes_value, v.required] for k, v in self.options.items()},
                "positionals": [[n, a] for n, a in self.positionals],
                "children": {k: c.to_spec() for k, c in self.children.items()}}


def _node_from_parser(path: tuple[str, ...], p: argparse.ArgumentParser) -> Node:
    node = Node(path=path, parser=p)
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                node.children[name] = _node_from_parser(path + (name,), sub)
        elif action.option_strings:
            unit = _unit(action)
            for s in action.option_strings:
                node.options[s] = Opt(action.dest, action.nargs != 0, bool(action.required), unit)
        else:
            node.positionals.append((action.metavar or action.dest, action.nargs))
    return node


UNIT_SUFFIX = {"-ms": "ms", "-s": "s"}


def _unit(action: argparse.Action) -> str | None:
    """The unit of a numeric option: its operation's ``Param.unit`` (``common.add_param`` makes the option's
    type a closure over the Param), else what its name says (``--deadline-s``, ``--reply-timeout-ms``)."""
    for cell in getattr(getattr(action, "type", None), "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if type(v).__name__ == "Param" and hasattr(v, "unit"):
            return v.unit or None
    longs = [s for s in action.option_strings if s.startswith("--")]
    for suffix, unit in UNIT_SUFFIX.items():
        if any(s.endswith(suffix) for s in longs) and action.nargs != 0:
            return unit
    return None


def _node_from_spec(path: tuple[str, ...], spec: dict, planned: bool) -> Node:
    node = Node(path=path, planned=planned)
    for name, value in spec.get("options", {}).items():
        dest, takes, required = (value + [False])[:3] if isinstance(value, list) else (name.lstrip("-"), bool(value), False)
        node.options[name] = Opt(dest, takes, required)
    node.options.setdefault("-h", Opt("help", False))
    node.options.setdefault("--help", Opt("help", False))
    node.positionals = [(n, a) for n, a in spec.get("positionals", [])]
    for name, child in spec.get("children", {}).items():
        node.children[name] = _node_from_spec(path + (name,), child, planned)
    return node


class Surface:
    """The command tree; ``live`` says whether a command exists in this panio."""

    def __init__(self, root: Node, helpers: frozenset[str] | None = None) -> None:
        self.root = root
        self.helpers = helpers  # the helper programs `panio helper NAME` runs (None: not known, any name)

    @classmethod
    def live(cls) -> "Surface":
        from controller.cli.main import build_parser  # the one allowed import from controller

        from bench_agent.helpers import HELPERS

        return cls(_node_from_parser((), build_parser(full=True)), frozenset(HELPERS))

    @classmethod
    def from_spec(cls, spec: dict) -> "Surface":
        return cls(_node_from_spec((), spec, planned=False))

    def overlay(self, planned: dict) -> "Surface":
        """A copy with planned commands added where the live tree lacks them (tests, previews)."""
        import copy

        root = copy.copy(self.root)
        root.children = dict(root.children)
        _merge(root, planned)
        return Surface(root, self.helpers)

    def find(self, path: tuple[str, ...] | list[str]) -> Node | None:
        node = self.root
        for part in path:
            node = node.children.get(part)
            if node is None:
                return None
        return node

    def commands(self) -> list[str]:
        out: list[str] = []

        def walk(n: Node) -> None:
            for c in n.children.values():
                out.append(c.name)
                walk(c)

        walk(self.root)
        return out

    def parse(self, argv: list[str], strict: bool = True) -> "Parsed":
        return parse(self, argv, strict)


def _merge(node: Node, spec: dict) -> None:
    for name, child in spec.get("children", {}).items():
        have = node.children.get(name)
        if have is None:
            node.children[name] = _node_from_spec(node.path + (name,), child, planned=True)
        else:
            import copy

            have = copy.copy(have)
            have.children = dict(have.children)
            node.children[name] = have
            _merge(have, child)


def planned_spec() -> dict:
    """The planned surface: commands announced for panio that may not exist yet."""
    with open(CATALOG / "_planned.toml", "rb") as f:
        return tomllib.load(f)["surface"]


@dataclass
class Parsed:
    """One panio argv, resolved against the surface."""

    argv: list[str]
    status: str = "ok"  # ok | invented_command | invented_flag | convention | malformed | help | shorthand
    path: tuple[str, ...] = ()
    flags: dict[str, str | bool] = field(default_factory=dict)  # canonical long flag -> value/True
    positionals: list[str] = field(default_factory=list)
    problem: str = ""
    missing: str = ""  # the first path that does not exist (invented_command)

    @property
    def command(self) -> str:
        return " ".join(self.path)

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "help", "shorthand")

    @property
    def text(self) -> str:
        import shlex

        return "panio " + shlex.join(self.argv)


METAVAR = re.compile(r"^(?:[A-Z][A-Z_]*|<[^<>]+>|\.\.\.|…|\[[^\]]*\])$")  # `panio COMMAND --help`, `panio …`
SHORTHAND = re.compile(r"^\{([\w-]+(?:,[\w-]+)+)\}$|^([\w-]+(?:/[\w-]+)+)$")


def _shorthand(node: Node, tok: str) -> bool:
    """`serial watch/send/log`, `serial {reset,dtr}`: prose naming sibling subcommands, each of which exists."""
    m = SHORTHAND.match(tok)
    if not m:
        return False
    parts = (m.group(1) or "").split(",") if m.group(1) else m.group(2).split("/")
    return all(p in node.children for p in parts)


def _is_flag(tok: str) -> bool:
    return tok.startswith("-") and tok != "-" and not tok[1:2].isdigit()


def parse(surface: Surface, argv: list[str], strict: bool = True) -> Parsed:
    """Resolve ``argv``; ``strict`` also lets the real parser judge types and choices."""
    out = Parsed(argv=list(argv))
    toks = list(argv)
    # global options before the command
    while toks and _is_flag(toks[0]):
        t = toks.pop(0)
        if t in GLOBAL_VALUE_OPTS or t.split("=")[0] in GLOBAL_VALUE_OPTS:
            if "=" not in t and toks:
                toks.pop(0)
        elif t in GLOBAL_FLAGS:
            out.status = "help"
        else:
            out.status, out.problem = "invented_flag", f"panio has no global option {t}"
            return out
    node = surface.root
    while toks and node.children and not _is_flag(toks[0]):
        nxt = node.children.get(toks[0])
        if nxt is None and (_shorthand(node, toks[0]) or METAVAR.match(toks[0])):
            out.status, out.path = "shorthand", node.path + (toks[0],)
            return out
        if nxt is None:
            if node.positionals and node.path:
                break
            out.status, out.missing = "invented_command", " ".join(node.path + (toks[0],))
            out.problem = f"`panio {out.missing}` does not exist"
            out.path = node.path
            return out
        node = nxt
        toks.pop(0)
    out.path = node.path
    if not node.path:
        out.status = "help"
        return out
    _leaf(node, toks, out, strict)
    if node.path == ("helper",) and surface.helpers is not None and out.positionals and out.status == "ok":
        name = str(out.positionals[0])
        if name not in surface.helpers and not _PLACEHOLDER.fullmatch(name) and not METAVAR.match(name):
            out.status, out.missing = "invented_command", f"helper {name}"
            out.problem = f"`panio helper {name}` does not exist (panio's helpers: {', '.join(sorted(surface.helpers))})"
    return out


def _leaf(node: Node, toks: list[str], out: Parsed, strict: bool) -> None:
    rest = list(toks)
    remainder = any(a == argparse.REMAINDER for _, a in node.positionals)
    while rest:
        t = rest.pop(0)
        if remainder and out.positionals:
            out.positionals.append(t)
            continue
        if t == "--":
            out.positionals += rest
            break
        if not _is_flag(t):
            out.positionals.append(t)
            continue
        name, _, inline = t.partition("=")
        opt = _resolve_opt(node, name)
        if opt is None:
            out.status = "invented_flag"
            out.problem = f"`panio {node.name}` has no option {name}"
            if name in ("-t", "--target") and _has_target_positional(node):
                out.status = "convention"
                out.problem = f"`panio {node.name}` takes the target as a positional, not -t"
            return
        canon = node.canonical(opt)
        if canon in ("--help",):
            out.status = "help"
            return
        if node.options[opt].takes_value:
            if inline:
                out.flags[canon] = inline
            elif rest:
                out.flags[canon] = rest.pop(0)
            else:
                out.status, out.problem = "malformed", f"{name} needs a value"
                return
        else:
            out.flags[canon] = True
    _check_arity(node, out, strict)


def _resolve_opt(node: Node, name: str) -> str | None:
    if name in node.options:
        return name
    if name.startswith("--"):
        hits = [s for s in node.options if s.startswith(name) and s.startswith("--")]
        if len({node.options[h].dest for h in hits}) == 1:
            return hits[0]
    return None


def _has_target_positional(node: Node) -> bool:
    return any(n.upper() == "TARGET" for n, _ in node.positionals)


def _has_target_option(node: Node) -> bool:
    return "--target" in node.options


def _check_arity(node: Node, out: Parsed, strict: bool) -> None:
    lo = hi = 0
    for _, nargs in node.positionals:
        if nargs is None:
            lo, hi = lo + 1, hi + 1
        elif nargs == "?":
            hi += 1
        elif nargs in ("*", argparse.REMAINDER):
            hi = 10**6
        elif nargs == "+":
            lo, hi = lo + 1, 10**6
        elif isinstance(nargs, int):
            lo, hi = lo + nargs, hi + nargs
    n = len(out.positionals)
    missing_req = [s for s, o in node.options.items()
                   if o.required and s.startswith("--") and s not in out.flags]
    if missing_req and _has_target_option(node) and "--target" in missing_req and n > lo:
        out.status = "convention"
        out.problem = f"`panio {node.name}` takes -t TARGET (a channel command), not a positional target"
    elif n > hi:
        out.status, out.problem = "malformed", f"`panio {node.name}` takes at most {hi} positional argument(s), got {n}"
    elif n < lo:
        out.status, out.problem = "malformed", f"`panio {node.name}` needs {lo} positional argument(s), got {n}"
    elif missing_req:
        out.status, out.problem = "malformed", f"`panio {node.name}` requires {', '.join(missing_req)}"
    elif strict and node.parser is not None:
        _argparse_check(node, out)


STAND_IN = "1"  # a stated `<seq>` or `$SEQ` (a shell expansion) is a placeholder, not a bad value: "1" stands in


def _argparse_check(node: Node, out: Parsed) -> None:
    """Let the real parser judge types and choices (it raises, never exits). A placeholder is judged as a
    value the parser takes ("1"): an error about that stand-in is the placeholder's, not the command's, while
    one about another value (`--timeout 30s` beside `--changed-since "$HASH"`) is panio's refusal."""
    argv = [STAND_IN if (_PLACEHOLDER.search(t) or "$" in t) else t for t in out.argv]
    try:
        node.parser.parse_args(argv[len(node.path):] if argv[:len(node.path)] == list(node.path)
                               else _strip_globals(argv)[len(node.path):])
    except SystemExit:
        pass
    except Exception as err:  # noqa: BLE001 - panio's Parser raises its UsageError; scenarios never import it
        msg = str(err.args[0] if err.args else err)
        if argv != out.argv and re.search(r"(?<![\w.])1(?![\w.])", msg):
            return  # the stand-in is what the parser refused: a placeholder of another type
        out.status, out.problem = "malformed", msg


def _strip_globals(argv: list[str]) -> list[str]:
    toks = list(argv)
    while toks and _is_flag(toks[0]):
        t = toks.pop(0)
        if t in GLOBAL_VALUE_OPTS and toks:
            toks.pop(0)
    return toks


def missing_commands(surface: Surface, argv: list[str]) -> str | None:
    """The first command path of ``argv`` the surface lacks (None if the path exists)."""
    p = parse(surface, argv)
    return p.missing if p.status == "invented_command" else None
