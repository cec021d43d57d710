"""Per-user state directory, shared by both sides (the controller re-exports it), and each lab's part of it.

``PANIO_STATE_DIR`` overrides; else ``$XDG_STATE_HOME/panio``
(``~/.local/state/panio``). Results, keys and caches live there.

What belongs to a lab's targets (capture daemons' logs, epochs, discovery
files and sockets, file leases, TFTP roots) lives in ``lab_state_dir()``:
``<state>/labs/<lab key>``, so two labs (or two people whose labs reach one
control host as the same user) that both name a target ``h`` never see or stop
each other's ``h``. The lab key travels with every request (``LAB_ARG``);
``bench_agent.ops.call`` makes it the current lab for the call (``using_lab``),
and a daemon gets its lab's directory as ``--state-dir``. A caller with no lab
(an older controller, a test calling an operation directly) gets the state
directory itself, the layout before labs were keyed (``legacy``).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

LAB_ARG = "lab_key"  # the request argument that carries the caller's lab key to the host
LABS_DIR = "labs"
_KEY_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")  # a key: a ``[lab] name`` (the lab file's name
_KEY_CHARS = _KEY_FIRST | {"_", "-"}  # rule, [a-z0-9][a-z0-9_-]{0,63}) or ``p-<hash>``; no ``re`` at start-up
_PROCESS_LAB: list[str | None] = [None]  # the lab this process works for (the controller's CLI sets it)
# The current lab's ContextVar, made on first use (a reading command need not import contextvars), by
# ``dict.setdefault``: atomic, so threads entering their first lab at once all get the one variable. (A plain
# global set when None let two threads each make their own: a wrong lab and a ValueError, issue 41.)
_CALL_LAB: dict = {}  # "lab" -> contextvars.ContextVar[str | None]


def state_dir() -> Path:
    from pathlib import Path

    return Path(state_dir_name())


def state_dir_name() -> str:
    """``state_dir()`` as a string, for a start-up path that need not import pathlib (the lab cache's)."""
    override = os.environ.get("PANIO_STATE_DIR")
    if override:
        return override
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "panio")


def check_lab_key(key: object) -> str:
    """``key`` if it is a lab key (it names a directory: no '/', no '..'), else a usage error."""
    if _is_key(key):
        return key
    from bench_agent.errors import UsageError

    raise UsageError(f"bad lab key {key!r}: a lab key is lowercase letters, digits, '-' and '_'",
                     argument=LAB_ARG)


def _is_key(key: object) -> bool:
    return isinstance(key, str) and 0 < len(key) <= 64 and key[0] in _KEY_FIRST and set(key) <= _KEY_CHARS


def lab_key_of(path: str, name: str | None = None) -> str:
    """The key of the lab file at ``path``: its ``[lab] name``, else ``p-`` and a hash of its real path
    (two copies of one lab share their captures and leases only if they share a name)."""
    if name:
        return check_lab_key(name)
    return "p-" + _sha256(os.path.realpath(path).encode()).hexdigest()[:12]


def _sha256(data: bytes):
    """SHA-256 from the interpreter's own small module when it has one: ``hashlib`` loads OpenSSL's
    ``_hashlib`` and ``_blake2`` first, 4-8 ms of every command that reads the lab (its key is hashed)
    against well under 1 ms; the digest is the same."""
    if not _SHA256:  # found once: a failed import is searched for again on every call (Python 3.11 has no
        # ``_sha2``), a share of each API submission's CPU in a long-lived controller (no functools: a command
        # that reads the lab imports nothing it does not use, tests/test_light_help.py)
        try:
            from _sha2 import sha256  # Python 3.12+
        except ImportError:
            try:
                from _sha256 import sha256  # Python 3.11
            except ImportError:  # a build without them (FIPS builds may leave them out)
                from hashlib import sha256
        _SHA256.append(sha256)
    return _SHA256[0](data)


_SHA256: list = []


def set_process_lab(key: str | None) -> None:
    """Make ``key`` this process's lab (the controller, once it has read its lab file)."""
    _PROCESS_LAB[0] = None if key is None else check_lab_key(key)


def current_lab() -> str | None:
    """The lab of the operation running in this thread, else this process's lab, else None (legacy)."""
    var = _CALL_LAB.get("lab")
    return (var.get() if var is not None else None) or _PROCESS_LAB[0]


class _LabScope:
    """``with using_lab(key):`` the thread's current lab is ``key`` (a ContextVar: one per thread and task)."""

    def __init__(self, key: str | None) -> None:
        self.key, self.var, self.token = key, None, None

    def __enter__(self) -> None:
        if self.key is None:
            return
        var = _CALL_LAB.get("lab")
        if var is None:
            import contextvars

            var = _CALL_LAB.setdefault("lab", contextvars.ContextVar("panio_lab", default=None))
        self.var, self.token = var, var.set(check_lab_key(self.key))

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            self.var.reset(self.token)


def using_lab(key: str | None) -> _LabScope:
    """A context in which ``current_lab()`` is ``key`` (None: leave it as it is)."""
    return _LabScope(key)


def lab_state_dir(key: str | None = None) -> Path:
    """Where the state of the current lab's (or lab ``key``'s) targets lives; the state dir itself with no lab."""
    from pathlib import Path

    return Path(lab_state_dir_name(key))


def lab_state_dir_name(key: str | None = None) -> str:
    """``lab_state_dir()`` as a string, for a start-up path that need not import pathlib (`serial log`'s)."""
    key = check_lab_key(key) if key else current_lab()
    state = state_dir_name()
    if not key:
        return state
    path = _LAB_DIRS.get((state, key))  # asked before every side effect (the lease check, the daemon's socket)
    if path is None:
        if len(_LAB_DIRS) >= 64:
            _LAB_DIRS.clear()
        path = _LAB_DIRS[state, key] = os.path.join(state, LABS_DIR, key)
    return path


# lab_state_dir_name by (state directory, lab key); a dict, not functools.lru_cache: a reading command imports no
# functools (tests/test_light_help.py)
_LAB_DIRS: dict[tuple[str, str], str] = {}


def known_labs() -> list[str]:
    """The keys of the labs that keep state on this machine (``<state>/labs/*``)."""
    try:
        return sorted(n for n in os.listdir(os.path.join(state_dir_name(), LABS_DIR)) if _is_key(n))
    except OSError:
        return []


def legacy_state_dir() -> Path:
    """Where target state lived before it was keyed by lab (and lives for a caller with no lab)."""
    return state_dir()


# The lab-parse cache (controller.lab.store): one file per lab file, named after the lab's absolute path,
# so anyone can tell which lab a cache belongs to and drop the caches of lab files that are gone.
_CACHE_PREFIX, _CACHE_SUFFIX = "lab-", ".marshal"


def lab_cache_path(lab_path: str) -> str | None:
    """Where the parse of ``lab_path`` is cached (None for a path too long to name a file after)."""
    name = _CACHE_PREFIX + os.path.abspath(lab_path).replace(os.sep, "%") + _CACHE_SUFFIX
    return None if len(name) > 250 else os.path.join(state_dir_name(), "cache", name)


def lab_cache_source(cache_path) -> str | None:
    """The lab file a cache file was made from (None if the name is not a lab cache's)."""
    name = os.path.basename(str(cache_path))
    if not (name.startswith(_CACHE_PREFIX) and name.endswith(_CACHE_SUFFIX)):
        return None
    return name[len(_CACHE_PREFIX):-len(_CACHE_SUFFIX)].replace("%", os.sep)
