"""Every error panio reports, in one tree.

    PanioError                      exit 1   error
    ├── UsageError                  exit 2   usage
    ├── NotConfigured               exit 3   not_configured
    ├── Unreachable                 exit 4   unreachable
    ├── ConfigInvalid               exit 5   config_invalid
    ├── AlreadyExists               exit 6   exists
    ├── InvalidName                 exit 7   invalid_name
    ├── Busy                        exit 8   busy
    ├── HookFailed                  exit 9   hook_failed
    ├── NotRunning                  exit 10  not_running
    ├── AuthFailed                  exit 11  auth_failed
    ├── DeviceError                 exit 12  device_error
    ├── Refused                     exit 13  refused
    ├── TestFailed                  exit 14  test_failed
    ├── Canceled                    exit 15  canceled
    ├── SetupFailed                 exit 16  setup_failed
    ├── Timeout                     exit 22  timeout
    └── InternalError               exit 70  internal

Lower layers translate library exceptions (pyserial, paramiko, redis, HTTP)
into these at their boundary (``raise Unreachable(...) from exc``), so no caller
ever sees a third-party exception. The CLI turns an error into one human line,
one JSON line and the exit code in exactly one place
(``controller.cli.main``). ``docs/exit-status.md`` documents the codes; a test
keeps the two in step.
"""

from __future__ import annotations

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

if TYPE_CHECKING:
    from typing import Any


class PanioError(Exception):
    """Base of every error panio reports to a user.

    ``lab``: the error is the lab's (configuration, host, device, capture, lease), not the board's: a job
    step that ends with it leaves the job incomplete rather than failed. ``unknown_outcome``: a side effect
    that ended with it may or may not have happened (``outcome_unknown``; ``details["outcome"]`` overrides).
    """

    code = "error"
    exit_status = 1
    lab = False
    unknown_outcome = False

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.code, "exit": self.exit_status, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        out.update({k: v for k, v in self.details.items() if v is not None})
        return out

    @property
    def lab_fault(self) -> bool:
        return self.lab

    @property
    def outcome_unknown(self) -> bool:
        said = self.details.get("outcome")
        return said == "unknown" or (said != "none" and self.unknown_outcome)

    def human(self) -> str:
        """The line for a person: what echoes input (a TOML key, a name, a device) shows its control characters
        escaped, so a carriage return or a terminal escape in a lab file cannot rewrite the terminal's line."""
        line = f"panio: {self.message}"
        if self.hint:
            line += f" ({self.hint})"
        return line if line.isprintable() else escape_controls(line)


# What a terminal acts on or a line breaks at: C0 and C1 controls, DEL, lone surrogates (bytes that were not UTF-8),
# the Unicode line and paragraph separators and the bidirectional overrides (text shown in another order than read).
_ESCAPED_FORMATS = frozenset("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def escape_controls(text: str) -> str:
    """``text`` with each control character written as Python writes it in a string literal (``\\r``, ``\\x1b``,
    ``\\udcff``); every other character as it is."""
    return "".join(c if c.isprintable() or not _control(c) else repr(c)[1:-1] for c in text)


def _control(c: str) -> bool:
    n = ord(c)
    return n < 0x20 or 0x7F <= n <= 0x9F or 0xD800 <= n <= 0xDFFF or c in _ESCAPED_FORMATS


NO_SPACE_ERRNOS = (28, 122, 27)  # ENOSPC, EDQUOT, EFBIG (RLIMIT_FSIZE): what a full filesystem or quota says


def no_space(exc: BaseException | None, path: object = None, what: str | None = None) -> PanioError | None:
    """``DeviceError`` for a write that failed because a filesystem (or quota) is full, else None.

    Looks through the chain (``__cause__``, ``__context__``, a database driver's ``orig``): SQLite says
    "database or disk is full" in an exception of its own. ``path`` is the file being written, ``what`` names it."""
    seen = 0
    while exc is not None and seen < 8:
        errno_ = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
        if errno_ in NO_SPACE_ERRNOS or "database or disk is full" in str(exc):
            path = path or getattr(exc, "filename", None)
            where = what or (str(path) if path else "panio's state (a database or a file)")
            reason = getattr(exc, "strerror", None) or "the database or disk is full"
            return DeviceError(f"cannot write {where}: {reason}", hint="free space on that filesystem and run the "
                               "command again; a lab file panio was editing is as it was", reason="no_space",
                               file=str(path) if path else None)
        exc, seen = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__, seen + 1
    return None


class UsageError(PanioError):
    """The command line itself is wrong: unknown flag, bad value, bad range."""

    code, exit_status = "usage", 2


class NotConfigured(PanioError):
    """The lab file lacks what the command needs: target, interface, channel, hook."""

    code, exit_status = "not_configured", 3
    lab = True


class Unreachable(PanioError):
    """A host, plug, daemon or device could not be reached."""

    code, exit_status = "unreachable", 4
    lab = True
    unknown_outcome = True


class ConfigInvalid(PanioError):
    """The lab (or job) file does not parse or does not validate."""

    code, exit_status = "config_invalid", 5
    lab = True


class AlreadyExists(PanioError):
    """Adding something whose name is taken."""

    code, exit_status = "exists", 6


class InvalidName(PanioError):
    """A target, interface, host or action name outside the grammar."""

    code, exit_status = "invalid_name", 7


class Busy(PanioError):
    """Someone else holds the port, the lock or the lease."""

    code, exit_status = "busy", 8
    lab = True


class HookFailed(PanioError):
    """A configured hook command exited non-zero or could not start."""

    code, exit_status = "hook_failed", 9
    lab = True


class NotRunning(PanioError):
    """The command needs a daemon that is not running."""

    code, exit_status = "not_running", 10
    lab = True


class AuthFailed(PanioError):
    """A device or host rejected the credentials."""

    code, exit_status = "auth_failed", 11
    lab = True


class DeviceError(PanioError):
    """A device answered, but with a fault (I/O error, protocol error)."""

    code, exit_status = "device_error", 12
    lab = True


class Refused(PanioError):
    """The request is well formed but not allowed (e.g. DTR on an interface that did not opt in)."""

    code, exit_status = "refused", 13
    lab = True


class TestFailed(PanioError):
    """The lab worked and the board failed: a job step or expectation did not pass (CI: a real failure)."""

    __test__ = False  # not a pytest test class
    code, exit_status = "test_failed", 14


class Canceled(PanioError):
    """A job was canceled before it finished."""

    code, exit_status = "canceled", 15


class SetupFailed(PanioError):
    """Provisioning a host (`panio setup`) failed at a named task."""

    code, exit_status = "setup_failed", 16


class Timeout(PanioError):
    """A bounded wait ran out."""

    code, exit_status = "timeout", 22


class InternalError(PanioError):
    """A bug in panio. Reported without a traceback unless PANIO_DEBUG=1."""

    code, exit_status = "internal", 70
    lab = True
    unknown_outcome = True


ALL_ERRORS: tuple[type[PanioError], ...] = (
    PanioError,
    UsageError,
    NotConfigured,
    Unreachable,
    ConfigInvalid,
    AlreadyExists,
    InvalidName,
    Busy,
    HookFailed,
    NotRunning,
    AuthFailed,
    DeviceError,
    Refused,
    TestFailed,
    Canceled,
    SetupFailed,
    Timeout,
    InternalError,
)

BY_CODE: dict[str, type[PanioError]] = {cls.code: cls for cls in ALL_ERRORS}


def from_json(obj: dict[str, Any]) -> PanioError:
    """Rebuild an error that crossed a transport (SSH, Celery) as JSON."""
    cls = BY_CODE.get(obj.get("error", ""), PanioError)
    details = {k: v for k, v in obj.items() if k not in {"error", "exit", "message", "hint"}}
    return cls(obj.get("message", "unknown error"), hint=obj.get("hint"), **details)


def reply(func: Any, *args: Any) -> dict[str, Any]:
    """The one reply envelope of every request/response road (SSH agent, Celery task, serial supervisor):
    ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {...}}``; a stray exception is an internal error."""
    try:
        return {"ok": True, "result": func(*args)}
    except PanioError as err:
        return {"ok": False, "error": err.to_json()}
    except Exception as exc:  # noqa: BLE001 - a bug on the far side must come back as an answer, not kill the road
        return {"ok": False, "error": InternalError(f"{type(exc).__name__}: {exc}").to_json()}


def unwrap(envelope: dict[str, Any]) -> Any:
    """The result of a ``reply`` envelope, or its error raised again on this side."""
    if envelope.get("ok"):
        return envelope.get("result")
    raise from_json(envelope.get("error") or {})


LAB_EXITS = frozenset(cls.exit_status for cls in ALL_ERRORS if cls.lab)  # exit statuses that mean the lab failed


def mark_outcome_unknown(err: PanioError, op: str, target: str | None, args: dict[str, Any]) -> None:
    """Say once that a side effect ``op`` may or may not have happened (unless ``err`` knows it did not)."""
    if err.details.get("outcome") == "none":  # e.g. the device could not be opened: nothing was sent
        return
    err.details["outcome"] = "unknown"
    if "outcome is unknown" in err.message or (err.hint and "outcome is unknown" in err.hint):
        return
    if op.startswith("power.") and target:
        level = f" --level {args['level']}" if args.get("level") else ""
        check = f"check with `panio power-state {target}{level}`"
    else:
        check = f"check the target's state before retrying `panio {op.replace('.', ' ').replace('_', '-')}`"
    err.hint = (err.hint + "; " if err.hint else "") + f"the outcome is unknown: {check}"
