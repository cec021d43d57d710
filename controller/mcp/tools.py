"""The MCP tools: each one is a panio command line, with typed, bounded arguments.

A ``ToolSpec`` names the panio command it runs and the CLI flag each argument
becomes; everything else is derived from the operation it reaches
(``bench_agent.ops.spec``): each argument's type, bounds and default
(``from_spec``), the annotations (readOnlyHint from the side-effect flag,
destructiveHint and idempotentHint from the spec's extras) and the deadline
(the operation's own, plus a margin). The server advertises
``input_schema()`` and ``annotations()``, checks a call with
``controller.mcp.args`` and runs ``argv(values)`` (``controller.mcp.runner``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from bench_agent import ops
from bench_agent.ops.spec import HUGE
from controller.lab.schema import NAME_RE_TEXT

NAME_PATTERN = f"^{NAME_RE_TEXT}$"
MARGIN_S = 30.0  # beyond a tool's own bound: start-up, SSH set-up, a dead link failing as unreachable (~15 s)
DEFAULT_DEADLINE_S = 60.0  # tools without a bound of their own: reads, a single send
_SCHEMA_KINDS = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array"}


@dataclass(frozen=True)
class Arg:
    """One tool argument and the CLI flag it becomes (``flag=None``: positional, in order)."""

    name: str
    kind: str  # "string" | "integer" | "boolean" | "array" (of strings: words, passed as positionals)
    help: str
    flag: str | None = None
    required: bool = False
    minimum: int | None = None
    maximum: int | None = None
    default: Any = None
    is_name: bool = False  # a target/interface/level/action name: the lab's name grammar
    negate: bool = False  # a boolean defaulting to true whose false value sets ``flag`` (newline -> --no-newline)
    param: str | None = None  # the operation's parameter it carries (None: routing, like target)

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "description": self.help}
        for key in ("minimum", "maximum", "default"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.is_name:
            out["pattern"] = NAME_PATTERN
        if self.kind == "string" and self.required:
            out["minLength"] = 1
        if self.kind == "array":
            out.update(items={"type": "string"}, minItems=1)
        return out


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    command: tuple[str, ...]
    args: tuple[Arg, ...] = ()
    op: str | None = None  # the operation it reaches (None: answers from the lab file alone)
    open_world: bool = True  # False: answers from the lab file alone
    needs: dict[str, str] = field(default_factory=dict)  # argument -> argument it requires, beyond the op's rules
    exclusive: tuple[str, ...] = ()  # at most one of these (default: the operation's own rule)
    op_args: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None  # (values, lab) -> the op's arguments
    # reads the lab's records (the results database), not a target: a command of the controller's, never a job
    # step's (``controller.cli.commands.RUNTIME`` lists what a step runs; every other tool is one of those)
    records: bool = False

    @property
    def changes_target(self) -> bool:
        return self.op is not None and ops.spec(self.op).side_effect

    @property
    def destructive(self) -> bool:
        return self.changes_target and ops.spec(self.op).extra.get("destructive", True)

    @property
    def idempotent(self) -> bool:
        return self.changes_target and ops.spec(self.op).extra.get("idempotent", False)
    image: bool = False  # the command prints JSON with png_b64: the result is MCP image content

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The shape of the JSON the tool's command prints, when its result is that JSON (an object): declared
        once beside the command's body (``bench_agent.commands.OUTPUTS``; a tool's operation and its command's
        body share the name). The server advertises it as ``outputSchema`` and returns the JSON as
        ``structuredContent``, beside the text. None for a tool whose result is text or an image."""
        if self.op is None or self.image:
            return None
        from bench_agent import commands

        commands.body(self.op)  # imports the command's group, which declares its shapes
        shape = commands.OUTPUTS.get(self.op)
        prints_json = "--json" in self.command or self.op in commands.ALWAYS_JSON
        return shape if shape is not None and prints_json and shape["type"] == "object" else None

    def arg(self, name: str) -> Arg | None:
        return next((a for a in self.args if a.name == name), None)

    def rules(self) -> tuple[dict[str, str], tuple[str, ...]]:
        """The cross-argument rules (needs, exclusive) in this tool's argument names: the op's spec, plus its own."""
        if self.op is None:
            return self.needs, self.exclusive
        spec = ops.spec(self.op)
        named = {a.param: a.name for a in self.args if a.param}
        needs = {named[k]: named[v] for k, v in spec.needs.items() if k in named and v in named}
        return {**needs, **self.needs}, self.exclusive or tuple(named[n] for n in spec.exclusive if n in named)

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {a.name: a.schema() for a in self.args},
            "additionalProperties": False,
        }
        required = [a.name for a in self.args if a.required]
        if required:
            schema["required"] = required
        needs, _ = self.rules()
        if needs:
            schema["dependentRequired"] = {k: [v] for k, v in needs.items()}
        return schema

    def annotations(self) -> dict[str, Any]:
        hints: dict[str, Any] = {"title": self.title, "readOnlyHint": not self.changes_target,
                                 "openWorldHint": self.open_world}
        if self.changes_target:
            hints.update(destructiveHint=self.destructive, idempotentHint=self.idempotent)
        return hints

    def argv(self, values: dict[str, Any]) -> list[str]:
        """The panio arguments (after ``--lab LAB``): flags first, then ``--`` and the positionals.

        ``--`` keeps a positional that starts with '-' (text to type) from being read as a flag;
        flag values are passed as ``--flag=value`` for the same reason.
        """
        flags: list[str] = []
        positionals: list[str] = []
        for a in self.args:
            value = values.get(a.name)
            if value is None:
                continue
            if a.flag is None:
                positionals.extend(map(str, value) if isinstance(value, list) else [str(value)])
            elif a.kind == "boolean":
                if bool(value) != a.negate:
                    flags.append(a.flag)
            else:
                flags.append(f"{a.flag}={value}")
        return [*self.command, *flags, "--", *positionals] if positionals else [*self.command, *flags]

    def deadline_s(self, values: dict[str, Any], lab: Any) -> float:
        """The operation's own deadline (from its spec) plus the margin; a call never runs unbounded."""
        if self.op is None:
            return DEFAULT_DEADLINE_S
        spec = ops.spec(self.op)
        known = {a.param: values[a.name] for a in self.args if a.param and values.get(a.name) is not None}
        args = {**known, **(self.op_args(values, lab) if self.op_args else {})}
        own_s = spec.deadline_s(args)
        return own_s + MARGIN_S if own_s is not None else DEFAULT_DEADLINE_S


def from_spec(op: str, param: str, flag: str | None = None, name: str | None = None, **kw: Any) -> Arg:
    """A tool argument whose type, bounds, default and help come from parameter ``param`` of ``op``."""
    p = ops.spec(op).param(param)
    assert p is not None, f"{op} has no parameter {param}"
    maximum = p.maximum if p.maximum is not None and p.maximum < HUGE else None
    default = p.default if not p.required else None
    help = p.help + (f" ({p.unit})" if p.unit and p.unit != "bytes" else "")
    return Arg(name or param, _SCHEMA_KINDS[p.kind], kw.pop("help", help), flag=flag,
               required=kw.pop("required", p.required), minimum=p.minimum, maximum=maximum, default=default,
               param=param, **kw)


# -- what the lab adds to a call's arguments (the deadline of a hook lives in the lab) -------------------


def _target(lab: Any, values: dict[str, Any]) -> dict[str, Any]:
    return (lab.targets.get(values.get("target"), {}) if lab is not None else {}) or {}


def _power_args(values: dict[str, Any], lab: Any) -> dict[str, Any]:
    return {"target": values.get("target"), "power": _target(lab, values).get("power")}


def _action_args(values: dict[str, Any], lab: Any) -> dict[str, Any]:
    action = (_target(lab, values).get("actions") or {}).get(values.get("name")) or {}
    return {"timeout_s": action.get("timeout_s")}


# -- the table ----------------------------------------------------------------------------------------

TARGET = Arg("target", "string", "the target's name (see target_list)", required=True, is_name=True)
IFACE = Arg("interface", "string", "serial interface name; needed only when the target has several (e.g. console, bmc)",
            flag="--interface", is_name=True)
LEVEL = from_spec("power.on", "level", "--level", help="a named power level (e.g. hard); never falls back to the "
                  "default level", is_name=True)
SERIAL_SEE = "Needs the capture running (`panio serial watch TARGET`)."


def _text(op: str) -> Arg:
    return from_spec(op, "text", required=True)


def _newline(op: str) -> Arg:
    return from_spec(op, "newline", "--no-newline", negate=True)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("target_list", "List targets",
             "The lab's targets as JSON: name, description, host, hosts, tags, channels (kinds) and "
             "channel_details (kind, name, host). As `panio target list --json`.",
             ("target", "list", "--json"), open_world=False),
    ToolSpec("serial_status", "Serial capture status",
             "Read-only JSON about one serial interface: configured/active identity, process and port state, "
             "capture epoch and RX/TX progress. Missing evidence is unknown; none of it proves a command ran "
             "on the target. As `panio serial status`.",
             ("serial", "status"), (TARGET, IFACE), op="serial.status"),
    ToolSpec("serial_wait", "Wait for serial bytes",
             "Wait for bytes received after a cursor (epoch + since, from serial_status or an earlier wait), "
             "optionally until a regex matches. Returns JSON with status matched/timeout/cap/disconnect/fault, "
             "the bytes, timing and the cursor to continue from; the bytes come back even when the wait fails. "
             "Blocks other calls until it returns (at most timeout_ms). As `panio serial wait`. " + SERIAL_SEE,
             ("serial", "wait"),
             # the CLI may start from a moment (--since-step, in jobs); an MCP call names its cursor (seed 002)
             (TARGET, from_spec("serial.wait", "epoch", "--epoch", required=True),
              from_spec("serial.wait", "since", "--since", required=True),
              IFACE, from_spec("serial.wait", "pattern", "--pattern"),
              from_spec("serial.wait", "timeout_ms", "--timeout-ms"),
              from_spec("serial.wait", "max_bytes", "--max-bytes"),
              from_spec("serial.wait", "max_output_bytes", "--max-output-bytes"),
              from_spec("serial.wait", "include_pending", "--include-pending"),
              from_spec("serial.wait", "follow", "--follow")),
             op="serial.wait"),
    ToolSpec("serial_evidence", "Serial receive evidence",
             "Read-only JSON: the exact received bytes as immutable records with original RX/capture times, "
             "observation time, epoch/generation, retained cursors and cap/gap/fault diagnostics. "
             "As `panio serial evidence`.",
             ("serial", "evidence"),
             (TARGET, IFACE, from_spec("serial.evidence", "epoch", "--epoch"),
              from_spec("serial.evidence", "since", "--since"),
              from_spec("serial.evidence", "max_bytes", "--max-bytes")),
             op="serial.evidence"),
    ToolSpec("serial_log", "Read the serial log",
             "Captured console lines `[time] #<seq> <text>` from disk (works while capture is stopped); "
             "the last 200 without a window. Poll with since = the last seq you saw. As `panio serial log`.",
             ("serial", "log"),
             (TARGET, IFACE, from_spec("serial.log", "tail", "--tail"), from_spec("serial.log", "since", "--since"),
              from_spec("serial.log", "first", "--from", name="from"),
              from_spec("serial.log", "last", "--to", name="to",
                        help="last sequence number of a range (inclusive; needs from)")),
             op="serial.log"),
    ToolSpec("serial_send", "Type into a serial console",
             "Write text to the console through the running capture, as `panio serial send`. Input lands only "
             "if the board's console reads the UART; read the reply with serial_log or serial_wait, or use "
             "serial_transact. " + SERIAL_SEE,
             ("serial", "send"),
             (TARGET, _text("serial.send"), IFACE, _newline("serial.send"),
              from_spec("serial.send", "pace_ms", "--pace-ms")),
             op="serial.send"),
    ToolSpec("serial_transact", "Send and wait for the reply",
             "Send text and wait until the reply matches `until`, under the interface's transaction lock: "
             "the serial_wait result JSON for the bytes received after the send, plus sent_bytes. Blocks other "
             "calls until it returns (at most timeout_ms). As `panio serial transact --json`. " + SERIAL_SEE,
             ("serial", "transact", "--json"),
             (TARGET, _text("serial.transact"), from_spec("serial.transact", "until", "--until"), IFACE,
              from_spec("serial.transact", "timeout_ms", "--timeout-ms"),
              from_spec("serial.transact", "max_bytes", "--max-bytes"), _newline("serial.transact"),
              from_spec("serial.transact", "pace_ms", "--pace-ms")),
             op="serial.transact"),
    ToolSpec("action_list", "List named actions",
             "JSON array of the target's named actions (name, description, command, requires_power, host), "
             "as `panio action list TARGET --json`.",
             ("action", "list", "--json"), (TARGET,), open_world=False),
    ToolSpec("action_run", "Run a named action",
             "Run one of the target's named actions (a project command bound to it), as `panio action run`.",
             ("action", "run"),
             (TARGET, Arg("name", "string", "the action (see action_list)", required=True, is_name=True),
              from_spec("action.run", "args")),
             op="action.run", op_args=_action_args),
    ToolSpec("power_state", "Read power state",
             "A line like `Power ON (pi5)`, as `panio power-state`; changes nothing. Without level, a target "
             "with power levels gets one line per level, the default first.",
             ("power-state",), (TARGET, LEVEL), op="power.state", op_args=_power_args),
    ToolSpec("power_on", "Power on",
             "Switch the target's power on through its on hook, as `panio power on` (with --level when level "
             "is given). A level without that hook fails as not_configured (3).",
             ("power", "on"), (TARGET, LEVEL), op="power.on", op_args=_power_args),
    ToolSpec("power_off", "Power off",
             "Switch the target's power off through its off hook, as `panio power off` (with --level when level "
             "is given). A level without that hook fails as not_configured (3).",
             ("power", "off"), (TARGET, LEVEL), op="power.off", op_args=_power_args),
    ToolSpec("power_cycle", "Power-cycle",
             "Power-cycle the target (its cycle hook, else off, a pause, on), as `panio power-cycle` (with "
             "--level when level is given). Blocks other calls until the hooks return.",
             ("power-cycle",), (TARGET, LEVEL), op="power.cycle", op_args=_power_args),
)

# -- video and HID (seed 002; issue 13) ---------------------------------------------------------------
# Types, bounds, defaults, side effects and deadlines are the operations' own specs
# (bench_agent.ops.video / .hid), derived like every other tool's.

VIDEO_SEE = "Needs the target's video daemon running (`panio video watch TARGET` in a shell)."
VIDEO_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("video_shot", "Screenshot",
             "The target's screen as a PNG image, plus a text line signal=<s> hash=<h>. To wait for the screen "
             "to change after an action, pass the previous result's hash as changed_since (blocks up to "
             "timeout_ms; the kvm-puppeting skill's loop). As `panio video shot`. " + VIDEO_SEE,
             ("video", "shot", "--json", "--output=-"),
             (TARGET,
              from_spec("video.shot", "changed_since", "--changed-since",
                        help="a hash from an earlier shot: wait until the frame differs"),
              from_spec("video.shot", "stable", "--stable",
                        help="wait until the picture stops changing (after a reboot or a key press)"),
              from_spec("video.shot", "timeout_ms", "--timeout")),
             op="video.shot", image=True),
    ToolSpec("video_read", "Read the screen (OCR)",
             "The text on the target's screen (tesseract OCR), as `panio video read`; weak on tiny fonts: never "
             "change the target's console font to help it. " + VIDEO_SEE,
             ("video", "read"),
             (TARGET,
              from_spec("video.read", "stable", "--stable",
                        help="wait until the picture stops changing (after a reboot or a key press)"),
              from_spec("video.read", "timeout_ms", "--timeout"),
              from_spec("video.read", "region", "--region", help="X,Y,W,H in frame pixels: read only this part")),
             op="video.read"),
    ToolSpec("video_wait", "Wait for text on the screen",
             "Block until the screen's text (OCR of each new frame) matches a regular expression, as `panio video "
             "wait --text`; returns the text read. Times out with exit 22 after timeout_ms: use it instead of a loop "
             "of video_read calls. " + VIDEO_SEE,
             ("video", "wait"),
             (TARGET,
              from_spec("video.wait", "text", "--text", required=True,  # the op also takes an image; MCP does not
                        help="a regular expression the screen's text (OCR) must match"),
              from_spec("video.wait", "max_distance", "--max-distance"),
              from_spec("video.wait", "region", "--region", help="X,Y,W,H in frame pixels: look only there"),
              from_spec("video.wait", "timeout_ms", "--timeout")),
             op="video.wait"),
    ToolSpec("hid_send", "Keyboard/mouse input",
             "Inject keyboard or mouse input through the target's HID rig, as `panio hid send`: one command as "
             "an array of words, e.g. [\"key\", \"ENTER\"], [\"key\", \"ctrl+alt+del\"], [\"type\", \"root\"], "
             "[\"moveabs\", \"16384\", \"8192\"] (0..32767 logical units, not pixels), [\"click\", \"left\"], "
             "[\"scroll\", \"-3\"]. Look again (video_shot with changed_since) before the next action.",
             ("hid", "send"),
             (TARGET,
              from_spec("hid.send", "command", help="one HID command as an array of words, e.g. [\"key\", \"ENTER\"]"),
              from_spec("hid.send", "pace_ms", "--pace-ms")),
             op="hid.send"),
)

# -- the lab's records (issue 42) ---------------------------------------------------------------------
# Reads only. Starting a bisection is not a tool: it runs for as long as its probes do (hours on real boards),
# past any tool call's deadline, and holds boards meanwhile; it is `panio bisect start` in a shell (docs/mcp.md).

RECORD_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("bisect_status", "Bisection status",
             "A bisection (which build of an ordered list first breaks a board) as JSON: state, the range (last "
             "good, first bad so far, builds remaining), first_bad once done, the bad build's failure (signature: "
             "step and divergent lines), every judged probe (build, job_id, target, verdict, why; `panio job "
             "triage JOB` for each) and the probes still running. Without id, the newest. As `panio bisect status "
             "--json`; start one with `panio bisect start` in a shell (docs/bisect.md).",
             ("bisect", "status", "--json"),
             (Arg("id", "integer", "the bisection's id (default: the newest)", minimum=1, maximum=2**63 - 1),),
             records=True),
)
TOOLS = TOOLS + VIDEO_TOOLS + RECORD_TOOLS

BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}
