"""Runtime commands as plain functions: what ``panio serial transact pico ...`` does once its target is resolved.

A runtime command has two halves:

* its **plan**, on the controller: the CLI module turns the command line and
  the lab file into plain-data ``args`` (the target's channel configuration
  included), so nothing after it reads a lab file;
* its **body**, here: ``body(call, opts, out, context)`` calls operations
  through ``call(op, args)`` (whatever road reaches the target's host), and
  writes what the user sees to ``out``, in order, on stdout and stderr. It
  raises ``PanioError``s for what went wrong; what it wrote before stays.

The CLI runs a body with its dispatcher and the terminal as ``out``; the job
runner runs the *same* body on the worker with the local ops layer and an
``Output`` that records, so a step's output (what ``expect_output``,
``reject_output`` and ``capture`` match) is exactly what the CLI prints for
the same command. A job step is ``{"op": NAME, "args": {...}}`` in the
payload (``controller.cli.runtime.Step.payload``): compiled from the step's
command line when the job was created, the body named by its operation, and
run by the worker without a child ``panio``, a lab file or any stderr to parse.

Bodies live in ``bench_agent/commands/<group>.py`` and register with
``@command("serial.transact", output=SHAPE)``; a group is imported on first use.

``output`` is the JSON Schema of what the body prints with ``out.json``
(with ``--json``, or always: ``always_json=True``), declared once beside the
body with ``fields``/``items``/``keyed``: docs/commands.md shows it
(scripts/cli_reference.py), the MCP tools advertise it as their
``outputSchema`` and return the JSON as ``structuredContent``, and a test runs
every command on the simulated bench and validates its output against it.
Objects stay open for MCP clients (a field added later is no error there);
the test also fails on a field the shape does not list, unless ``extra`` says
the object carries more.
"""

from __future__ import annotations

from bench_agent.errors import PanioError, UsageError

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable

    Call = Callable[[str, dict[str, Any]], Any]
    Body = Callable[..., None]
else:
    Call = Body = "Callable"  # names for annotations only: typing stays off the start-up path
BODIES: dict[str, Body] = {}
OUTPUTS: dict[str, dict] = {}  # command -> the JSON Schema of what it prints with --json (``output=``)
ALWAYS_JSON: set[str] = set()  # commands that print their JSON without --json (serial wait, status, evidence)


class Output:
    """Where a command's body writes: ``write(stream, data)``; ``say`` and ``json`` print a line to stdout."""

    def write(self, stream: str, data: str | bytes) -> None:
        raise NotImplementedError

    def say(self, text: str) -> None:
        self.write("stdout", text + "\n")

    def note(self, text: str) -> None:
        self.write("stderr", text + "\n")

    def json(self, obj: Any) -> None:
        import json

        self.write("stdout", json.dumps(obj, indent=2, sort_keys=False) + "\n")


class Recorder(Output):
    """An ``Output`` that keeps stdout and stderr interleaved as one text, as a terminal would show them,
    up to ``limit`` characters, and hands each finished line to ``on_line``."""

    def __init__(self, on_line: Callable[[str], None] | None = None, limit: int = 1_000_000) -> None:
        self.parts: list[str] = []
        self.size, self.limit, self.truncated = 0, limit, False
        self._on_line, self._pending = on_line, ""
        self.last_error: PanioError | None = None

    def write(self, stream: str, data: str | bytes) -> None:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        room = self.limit - self.size
        if len(text) > room:
            text, self.truncated = text[:max(room, 0)], True
        self.parts.append(text)
        self.size += len(text)
        if self._on_line is not None:
            *lines, self._pending = (self._pending + text).split("\n")
            for line in lines:
                self._on_line(line)

    def error(self, err: PanioError) -> None:
        """The error as the CLI reports it: one human line and one JSON line (on stderr)."""
        self.last_error = err
        import json

        self.write("stderr", err.human() + "\n" + json.dumps(err.to_json(), sort_keys=False) + "\n")

    @property
    def text(self) -> str:
        return "".join(self.parts)


def command(name: str, output: dict | None = None, always_json: bool = False) -> Callable[[Body], Body]:
    """Register a command's body under ``name`` (``<group>.<verb>``), with the shape of its JSON output."""

    def register(body: Body) -> Body:
        if name in BODIES and BODIES[name] is not body:
            raise RuntimeError(f"command {name!r} registered twice")
        BODIES[name] = body
        if output is not None:
            OUTPUTS[name] = output
        if always_json:
            ALWAYS_JSON.add(name)
        return body

    return register


# -- JSON output shapes, short to write: fields({"pid": ("integer", "its process"), "note?": ("string", "...")})


def fields(props: dict[str, tuple], extra: str = "") -> dict:
    """A JSON object: ``{name: (kind, meaning)}``; a name ending in ``?`` may be absent. A kind is a JSON
    type (``"integer"``, ``"string|null"``) or a shape (``fields(...)``, ``items(...)``, ``keyed(...)``).
    ``extra``: the other fields it carries, in words (the lab's table of a channel): it then takes any."""
    shape = {"type": "object", "properties": {k.rstrip("?"): {**_kind(kind), "description": meaning}
                                              for k, (kind, meaning) in props.items()},
             "required": [k for k in props if not k.endswith("?")]}
    return {**shape, "description": extra, "additionalProperties": True} if extra else shape


def items(of: str | dict) -> dict:
    """A JSON array of ``of`` (a kind, as in ``fields``)."""
    return {"type": "array", "items": _kind(of)}


def keyed(of: str | dict) -> dict:
    """A JSON object keyed by name (a target's, an interface's), each value ``of``."""
    return {"type": "object", "additionalProperties": _kind(of)}


def maybe(shape: dict) -> dict:
    """``shape`` or null."""
    return {**shape, "type": [shape["type"], "null"]}


def _kind(of: str | dict) -> dict:
    if isinstance(of, dict):
        return of
    kinds = of.split("|")
    return {"type": kinds[0] if len(kinds) == 1 else kinds}


def passed(op: str, opts: dict[str, Any]) -> dict[str, Any]:
    """The request arguments of operation ``op`` in a plan's ``opts``: each parameter of its spec that the plan
    put there, by its own name (``controller.cli.runtime.spec_args``). A body passes these on as they are and
    adds only what the spec does not have (the target, its channel configuration), so no body lists an
    operation's parameters again; one the command line did not give is left to the operation's default."""
    from bench_agent import ops

    return {p.name: opts[p.name] for p in ops.spec(op).params if p.name in opts}


def body(name: str) -> Body:
    if name not in BODIES:
        group = name.split(".", 1)[0]
        if not group.isidentifier():
            raise UsageError(f"unknown command {name!r}")
        try:
            __import__(f"bench_agent.commands.{group}")  # not importlib: one more start-up import
        except ModuleNotFoundError as exc:
            if exc.name != f"bench_agent.commands.{group}":
                raise
    try:
        return BODIES[name]
    except KeyError:
        raise UsageError(f"unknown command {name!r}") from None


def run(name: str, call: Call, opts: dict[str, Any], out: Output, context: dict[str, Any] | None = None) -> None:
    """Run command ``name`` with ``opts``; its operations go through ``call``, its text to ``out``.

    ``context`` is what the caller knows about the moment: in a job, ``job_started_at`` and
    ``previous_step_started_at`` (epoch seconds), for ``serial wait --since-step``."""
    body(name)(call, opts, out, context or {})
