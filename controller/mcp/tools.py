"""The MCP tools: each one is a panio command line, with typed, bounded arguments.

A ``ToolSpec`` names the panio command it runs, its arguments (type, bounds,
default, the CLI flag each becomes) and whether it changes the target. The
server advertises ``input_schema()`` and ``annotations()`` from it, checks a
call with ``controller.mcp.args`` and runs ``argv(values)`` as a child. The
arguments, bounds and defaults are the MCP seed page's (docs/mcp.md); the
defaults are the CLI's own, so a tool and its command behave the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from controller.cli.common import NAME_RE_TEXT

NAME_PATTERN = f"^{NAME_RE_TEXT}$"
MARGIN_S = 30.0  # beyond a tool's own bound: start-up, SSH set-up, a dead link failing as unreachable (~15 s)
DEFAULT_DEADLINE_S = 60.0  # tools without a bound of their own: reads, a single send
HOOK_TIMEOUT_S = 30.0  # power hooks' and actions' defaults when the lab does not say (docs/power.md)
ACTION_TIMEOUT_S = 600.0
CYCLE_OFF_S = 2.0


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
    changes_target: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = True  # False: answers from the lab file alone
    needs: dict[str, str] = field(default_factory=dict)  # argument -> argument it requires
    exclusive: tuple[str, ...] = ()  # at most one of these
    deadline: Callable[[dict[str, Any], Any], float] | None = None  # (values, lab or None) -> seconds
    image: bool = False  # the command prints JSON with png_b64: the result is MCP image content

    def arg(self, name: str) -> Arg | None:
        return next((a for a in self.args if a.name == name), None)

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {a.name: a.schema() for a in self.args},
            "additionalProperties": False,
        }
        required = [a.name for a in self.args if a.required]
        if required:
            schema["required"] = required
        if self.needs:
            schema["dependentRequired"] = {k: [v] for k, v in self.needs.items()}
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
        return self.deadline(values, lab) if self.deadline else DEFAULT_DEADLINE_S


# -- deadlines: a child never runs unbounded ---------------------------------------------------------


def _wait_deadline(values: dict[str, Any], lab: Any) -> float:
    return values.get("timeout_ms", 30000) / 1000 + _pacing_s(values) + MARGIN_S


def _pacing_s(values: dict[str, Any]) -> float:
    text = values.get("text") or ""
    return (len(text.encode()) + 2) * values.get("pace_ms", 0) / 1000


def _send_deadline(values: dict[str, Any], lab: Any) -> float:
    return DEFAULT_DEADLINE_S + _pacing_s(values)


def _target(lab: Any, values: dict[str, Any]) -> dict[str, Any]:
    return (lab.targets.get(values.get("target"), {}) if lab is not None else {}) or {}


def _power_deadline(values: dict[str, Any], lab: Any) -> float:
    """Off and on hooks at their own timeouts plus the pause between them (the slowest cycle)."""
    power = _target(lab, values).get("power") or {}
    level = (power.get("levels") or {}).get(values.get("level")) or power
    hook_s = float(level.get("timeout_s", power.get("timeout_s", HOOK_TIMEOUT_S)))
    off_s = float(level.get("cycle_off_s", power.get("cycle_off_s", CYCLE_OFF_S)))
    return 2 * hook_s + off_s + MARGIN_S


def _action_deadline(values: dict[str, Any], lab: Any) -> float:
    action = (_target(lab, values).get("actions") or {}).get(values.get("name")) or {}
    return float(action.get("timeout_s", ACTION_TIMEOUT_S)) + MARGIN_S


# -- the table ----------------------------------------------------------------------------------------

TARGET = Arg("target", "string", "the target's name (see target_list)", required=True, is_name=True)
IFACE = Arg("interface", "string", "serial interface name; needed only when the target has several (e.g. console, bmc)",
            flag="--interface", is_name=True)
LEVEL = Arg("level", "string", "a named power level (e.g. hard); never falls back to the default level",
            flag="--level", is_name=True)
MAX_BYTES = Arg("max_bytes", "integer", "examine at most this many received bytes", flag="--max-bytes",
                minimum=1, maximum=1048576, default=65536)
NEWLINE = Arg("newline", "boolean", "append the interface's line ending (CR by default); false sends a bare key",
              flag="--no-newline", default=True, negate=True)
PACE = Arg("pace_ms", "integer", "pause this many ms after each byte, for a polled UART without flow control",
           flag="--pace-ms", minimum=0, maximum=10000, default=0)
TEXT = Arg("text", "string", "what to type (passed as one argument, never through a shell)", required=True)

SERIAL_SEE = "Needs the capture running (`panio serial watch TARGET`)."

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("target_list", "List targets",
             "The lab's targets as JSON: name, description, host, hosts, tags, channels (kinds) and "
             "channel_details (kind, name, host). As `panio target list --json`.",
             ("target", "list", "--json"), open_world=False),
    ToolSpec("serial_status", "Serial capture status",
             "Read-only JSON about one serial interface: configured/active identity, process and port state, "
             "capture epoch and RX/TX progress. Missing evidence is unknown; none of it proves a command ran "
             "on the target. As `panio serial status`.",
             ("serial", "status"), (TARGET, IFACE)),
    ToolSpec("serial_wait", "Wait for serial bytes",
             "Wait for bytes received after a cursor (epoch + since, from serial_status or an earlier wait), "
             "optionally until a regex matches. Returns JSON with status matched/timeout/cap/disconnect/fault, "
             "the bytes, timing and the cursor to continue from; the bytes come back even when the wait fails. "
             "Blocks other calls until it returns (at most timeout_ms). As `panio serial wait`. " + SERIAL_SEE,
             ("serial", "wait"),
             (TARGET,
              Arg("epoch", "integer", "capture epoch the cursor belongs to", flag="--epoch", required=True,
                  minimum=0),
              Arg("since", "integer", "byte cursor to read from", flag="--since", required=True, minimum=0),
              IFACE,
              Arg("pattern", "string", "stop when this regex (Python syntax) matches", flag="--pattern"),
              Arg("timeout_ms", "integer", "give up after this many ms", flag="--timeout-ms",
                  minimum=0, maximum=3600000, default=30000),
              MAX_BYTES,
              Arg("max_output_bytes", "integer", "cap on the JSON returned", flag="--max-output-bytes",
                  minimum=4096, maximum=8388608, default=1048576),
              Arg("include_pending", "boolean", "also return bytes received after the match",
                  flag="--include-pending", default=False),
              Arg("follow", "boolean", "keep matching until the bound and return every match", flag="--follow",
                  default=False)),
             deadline=_wait_deadline),
    ToolSpec("serial_evidence", "Serial receive evidence",
             "Read-only JSON: the exact received bytes as immutable records with original RX/capture times, "
             "observation time, epoch/generation, retained cursors and cap/gap/fault diagnostics. "
             "As `panio serial evidence`.",
             ("serial", "evidence"),
             (TARGET, IFACE,
              Arg("epoch", "integer", "capture epoch of since", flag="--epoch", minimum=0),
              Arg("since", "integer", "records from this byte cursor (needs epoch)", flag="--since", minimum=0),
              MAX_BYTES),
             needs={"since": "epoch"}),
    ToolSpec("serial_log", "Read the serial log",
             "Captured console lines `[time] #<seq> <text>` from disk (works while capture is stopped); "
             "the last 200 without a window. Poll with since = the last seq you saw. As `panio serial log`.",
             ("serial", "log"),
             (TARGET, IFACE,
              Arg("tail", "integer", "the last N lines", flag="--tail", minimum=0, maximum=5000),
              Arg("since", "integer", "lines after sequence number SEQ", flag="--since", minimum=0),
              Arg("from", "integer", "first sequence number of a range (with to)", flag="--from", minimum=0),
              Arg("to", "integer", "last sequence number of a range (inclusive; needs from)", flag="--to",
                  minimum=0)),
             needs={"to": "from"}, exclusive=("tail", "since", "from")),
    ToolSpec("serial_send", "Type into a serial console",
             "Write text to the console through the running capture, as `panio serial send`. Input lands only "
             "if the board's console reads the UART; read the reply with serial_log or serial_wait, or use "
             "serial_transact. " + SERIAL_SEE,
             ("serial", "send"), (TARGET, TEXT, IFACE, NEWLINE, PACE),
             changes_target=True, destructive=True, deadline=_send_deadline),
    ToolSpec("serial_transact", "Send and wait for the reply",
             "Send text and wait until the reply matches `until`, under the interface's transaction lock: "
             "the serial_wait result JSON for the bytes received after the send, plus sent_bytes. Blocks other "
             "calls until it returns (at most timeout_ms). As `panio serial transact --json`. " + SERIAL_SEE,
             ("serial", "transact", "--json"),
             (TARGET, TEXT,
              Arg("until", "string", "stop when the reply matches this regex (Python syntax)", flag="--until",
                  required=True),
              IFACE,
              Arg("timeout_ms", "integer", "give up after this many ms", flag="--timeout-ms",
                  minimum=1, maximum=3600000, default=30000),
              MAX_BYTES, NEWLINE, PACE),
             changes_target=True, destructive=True, deadline=_wait_deadline),
    ToolSpec("action_list", "List named actions",
             "JSON array of the target's named actions (name, description, command, requires_power, host), "
             "as `panio action list TARGET --json`.",
             ("action", "list", "--json"), (TARGET,), open_world=False),
    ToolSpec("action_run", "Run a named action",
             "Run one of the target's named actions (a project command bound to it), as `panio action run`.",
             ("action", "run"),
             (TARGET, Arg("name", "string", "the action (see action_list)", required=True, is_name=True)),
             changes_target=True, destructive=True, deadline=_action_deadline),
    ToolSpec("power_state", "Read power state",
             "A line like `Power ON (pi5)`, as `panio power-state`; changes nothing. Without level, a target "
             "with power levels gets one line per level, the default first.",
             ("power-state",), (TARGET, LEVEL), deadline=_power_deadline),
    ToolSpec("power_on", "Power on",
             "Switch the target's power on through its on hook, as `panio power on` (with --level when level "
             "is given). A level without that hook fails as not_configured (3).",
             ("power", "on"), (TARGET, LEVEL), changes_target=True, idempotent=True, deadline=_power_deadline),
    ToolSpec("power_off", "Power off",
             "Switch the target's power off through its off hook, as `panio power off` (with --level when level "
             "is given). A level without that hook fails as not_configured (3).",
             ("power", "off"), (TARGET, LEVEL), changes_target=True, destructive=True, idempotent=True,
             deadline=_power_deadline),
    ToolSpec("power_cycle", "Power-cycle",
             "Power-cycle the target (its cycle hook, else off, a pause, on), as `panio power-cycle` (with "
             "--level when level is given). Blocks other calls until the hooks return.",
             ("power-cycle",), (TARGET, LEVEL), changes_target=True, destructive=True,
             deadline=_power_deadline),
)

# -- video and HID (seed 002; issue 13) ---------------------------------------------------------------
# Bounds and defaults here are the operations' own specs (bench_agent.ops.video / .hid), read, not copied.


def _op_param(op: str, name: str) -> Any:
    from bench_agent import ops

    return ops.spec(op).param(name)


def _ms_arg(op: str, name: str, flag: str, help_: str) -> Arg:
    p = _op_param(op, name)
    return Arg(name, "integer", help_, flag=flag, minimum=int(p.minimum), maximum=int(p.maximum), default=p.default)


def _video_deadline(values: dict[str, Any], lab: Any) -> float:
    stable_s = values.get("stable_ms", 1000) / 1000 if values.get("stable") else 0
    return values.get("timeout_ms", 2000) / 1000 + stable_s + MARGIN_S


def _read_deadline(values: dict[str, Any], lab: Any) -> float:
    return _video_deadline(values, lab) + 30  # tesseract on a full screen: ~1 s, far more on a busy host


def _hid_deadline(values: dict[str, Any], lab: Any) -> float:
    words = values.get("command") or []
    chars = len(" ".join(map(str, words[1:])))
    return DEFAULT_DEADLINE_S + chars * 3 * values.get("pace_ms", 20) / 1000


STABLE = Arg("stable", "boolean", "wait until the picture stops changing (after a reboot or a key press)",
             flag="--stable", default=False)
VIDEO_SEE = "Needs the target's video daemon running (`panio video watch TARGET` in a shell)."
VIDEO_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("video_shot", "Screenshot",
             "The target's screen as a PNG image, plus a text line signal=<s> hash=<h>. To wait for the screen "
             "to change after an action, pass the previous result's hash as changed_since (blocks up to "
             "timeout_ms; the kvm-puppeting skill's loop). As `panio video shot`. " + VIDEO_SEE,
             ("video", "shot", "--json", "--output=-"),
             (TARGET,
              Arg("changed_since", "string", "a hash from an earlier shot: wait until the frame differs",
                  flag="--changed-since"),
              STABLE,
              _ms_arg("video.shot", "timeout_ms", "--timeout", "how long to wait for the frame asked for (ms)")),
             deadline=_video_deadline, image=True),
    ToolSpec("video_read", "Read the screen (OCR)",
             "The text on the target's screen (tesseract OCR), as `panio video read`; weak on tiny fonts: never "
             "change the target's console font to help it. " + VIDEO_SEE,
             ("video", "read"),
             (TARGET, STABLE,
              _ms_arg("video.read", "timeout_ms", "--timeout", "how long to wait for the frame asked for (ms)"),
              Arg("region", "string", "X,Y,W,H in frame pixels: read only this part", flag="--region")),
             deadline=_read_deadline),
    ToolSpec("hid_send", "Keyboard/mouse input",
             "Inject keyboard or mouse input through the target's HID rig, as `panio hid send`: one command as "
             "an array of words, e.g. [\"key\", \"ENTER\"], [\"key\", \"ctrl+alt+del\"], [\"type\", \"root\"], "
             "[\"moveabs\", \"16384\", \"8192\"] (0..32767 logical units, not pixels), [\"click\", \"left\"], "
             "[\"scroll\", \"-3\"]. Look again (video_shot with changed_since) before the next action.",
             ("hid", "send"),
             (TARGET,
              Arg("command", "array", "one HID command as an array of words, e.g. [\"key\", \"ENTER\"]",
                  required=True),
              _ms_arg("hid.send", "pace_ms", "--pace-ms", "pause between a key's press and release (ms)")),
             changes_target=True, destructive=True, deadline=_hid_deadline),
)
TOOLS = TOOLS + VIDEO_TOOLS

BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}
