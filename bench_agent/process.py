"""The one way panio runs a child process: own session, streamed output, a deadline, TERM then KILL, reaped.

Hooks, actions, job steps, the MCP server's commands and the eval's agents
all start children through ``Child``, with one policy:

- the child gets a session (and process group) of its own, so stopping it
  reaches everything it started;
- its output is read by threads as it comes (``on_line`` sees each line;
  ``out``/``err`` keep up to ``limit_bytes``), so a chatty child never blocks
  on a full pipe;
- ``wait(deadline_s, should_stop)`` returns when it exits, or stops it at the
  deadline or when ``should_stop()`` names a reason;
- stopping sends SIGTERM to the group and to every descendant recorded from
  /proc (a hook may start its own session), waits ``TERM_GRACE_S``, then
  SIGKILLs what is left, and reaps the child: no zombie, no orphan;
- a ``Scope`` (``with process.scope() as sc:``) records every child started
  inside it, in any thread that inherits its context, so its owner can stop
  them all at once: a job step past its deadline, or canceled, takes the
  hooks and helpers it started with it (``sc.stop_all()``);
- an exception in the waiting thread (Ctrl-C, SIGTERM turned into
  SystemExit) stops the child before it propagates; a signal that arrives
  while a child is being started (inside ``subprocess.Popen``, after the
  fork) is held until the child can be stopped (``defer_signal``), so it
  never outlives its starter.

``panio_argv()`` is how panio runs itself: this interpreter with ``-P``, so a
user's own ``controller/`` or ``bench_agent/`` package in the working
directory can never stand in for panio's.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from bench_agent.procinfo import pid_alive  # noqa: F401 - re-exported: the children's callers ask it here

if TYPE_CHECKING:
    from pathlib import Path

TERM_GRACE_S = 2.0
DRAIN_GRACE_S = 1.0  # after the child exits, how long a grandchild holding its pipes may delay the result
LIMIT_BYTES = 16 << 20


def panio_argv() -> list[str]:
    """``panio`` as a child: this interpreter, isolated from the caller's working directory."""
    return [sys.executable, "-P", "-m", "controller.cli.main"]


def module_argv(module: str) -> list[str]:
    """A panio module as a child (a supervisor, a simulated board), isolated like ``panio_argv``."""
    return [sys.executable, "-P", "-m", module]


class _Starting:
    """How many children the main thread is starting now, and a signal that arrived meanwhile."""
    depth = 0
    signum: int | None = None


def defer_signal(signum: int) -> bool:
    """For a signal handler: True when a child is being started, and the signal is to be raised (as
    ``_raise_deferred`` does) once that child can be stopped; False when the handler should act now."""
    if not _Starting.depth:
        return False
    _Starting.signum = _Starting.signum or signum
    return True


def _raise_deferred() -> None:
    signum, _Starting.signum = _Starting.signum, None
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


class Scope:
    """The children started inside ``scope()`` (see the module docstring)."""

    def __init__(self) -> None:
        self._children: list[Child] = []
        self._lock = threading.Lock()
        self.closed = False

    def add(self, child: "Child") -> None:
        with self._lock:
            self._children.append(child)
            closed = self.closed
        if closed:  # started by a step that was already stopped: it must not outlive it
            child.stop()

    def stop_all(self) -> None:
        """Stop every child of the scope still running (TERM, then KILL, reaped); later ones are stopped at once."""
        with self._lock:
            self.closed = True
            children = list(self._children)
        threads = [threading.Thread(target=c.stop, daemon=True) for c in children]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


_SCOPE: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("panio_process_scope", default=None)


@contextlib.contextmanager
def scope():
    """Record the children started in this context (``Scope``); the context's threads must be started with
    ``contextvars.copy_context().run`` to carry it."""
    sc = Scope()
    token = _SCOPE.set(sc)
    try:
        yield sc
    finally:
        _SCOPE.reset(token)


def stopped() -> bool:
    """Whether the ``scope`` this context runs in was stopped (a job step's timeout or cancel): a wait inside it
    (the lease store out of reach) ends there, and what it waited to do is not done."""
    sc = _SCOPE.get()
    return sc is not None and sc.closed


@dataclass
class Finished:
    argv: list[str]
    code: int | None  # None: stopped (see ``stopped``)
    out: str
    err: str
    elapsed_s: float
    stopped: str | None = None  # "timeout", or the reason ``should_stop`` gave
    truncated: bool = False

    @property
    def timed_out(self) -> bool:
        return self.stopped == "timeout"


@dataclass
class _Stream:
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False


class Child:
    """One started child (see the module docstring). ``merge_stderr`` interleaves stderr into ``out``."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                 input: bytes | None = None, merge_stderr: bool = False,
                 on_line: Callable[[str], None] | None = None, limit_bytes: int = LIMIT_BYTES,
                 die_with_parent: bool = False) -> None:
        self.argv, self.started = argv, time.monotonic()
        self._on_line, self._limit = on_line, limit_bytes
        self._out, self._err = _Stream(), _Stream()
        self._readers: list[threading.Thread] = []
        self.proc: subprocess.Popen | None = None
        main = int(threading.current_thread() is threading.main_thread())  # where signal handlers run
        _Starting.depth += main
        try:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=cwd, start_new_session=True,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                preexec_fn=_death_signal_hook() if die_with_parent else None)
            if _SCOPE.get() is not None:
                _SCOPE.get().add(self)
            self._readers.append(self._reader(self.proc.stdout, self._out, on_line))
            if not merge_stderr:
                self._readers.append(self._reader(self.proc.stderr, self._err, None))
            if input is not None:
                threading.Thread(target=self._feed, args=(input,), daemon=True).start()
        except BaseException:
            self.stop()
            raise
        finally:
            _Starting.depth -= main
            if main and not _Starting.depth and _Starting.signum:
                self.stop()
                _raise_deferred()  # the signal, not a failure it may have interrupted, ends the command

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _feed(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except OSError:  # the child exited without reading it all
            pass

    def _reader(self, pipe, into: _Stream, on_line) -> threading.Thread:
        def read() -> None:
            for raw in iter(pipe.readline, b""):
                if len(into.data) < self._limit:
                    into.data += raw[: self._limit - len(into.data)]
                else:
                    into.truncated = True
                if on_line is not None:
                    on_line(raw.decode("utf-8", "replace").rstrip("\n"))
            pipe.close()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, deadline_s: float | None = None,
             should_stop: Callable[[], str | None] | None = None) -> Finished:
        """The child's end: its exit, or stopped at ``deadline_s`` / when ``should_stop`` names a reason."""
        end = None if deadline_s is None else time.monotonic() + deadline_s
        why = None
        try:
            while why is None:
                try:
                    self.proc.wait(timeout=0.05)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if end is not None and time.monotonic() >= end:
                    why = "timeout"
                elif should_stop is not None:
                    why = should_stop()
            if why is not None:
                self.stop()
        except BaseException:
            self.stop()  # Ctrl-C or a dying caller: never leave a child running
            raise
        return self.finished(why)

    def finished(self, why: str | None = None) -> Finished:
        for thread in self._readers:
            thread.join(timeout=DRAIN_GRACE_S)
        text = lambda s: bytes(s.data).decode("utf-8", "replace")  # noqa: E731
        return Finished(self.argv, None if why else self.proc.returncode, text(self._out), text(self._err),
                        time.monotonic() - self.started, why, self._out.truncated or self._err.truncated)

    def stop(self, grace_s: float = TERM_GRACE_S) -> None:
        """SIGTERM the group and the descendants, SIGKILL what is left after ``grace_s``, reap the child."""
        if self.proc is None or self.proc.returncode is not None:
            return
        family = descendants(self.proc.pid)
        _signal(self.proc.pid, family, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace_s)
            _signal(None, family, signal.SIGKILL)  # reaped: its pid and group id may be reused now
        except subprocess.TimeoutExpired:
            _signal(self.proc.pid, family + descendants(self.proc.pid), signal.SIGKILL)
            self.proc.wait()


def run(argv: list[str], *, deadline_s: float | None, **kw) -> Finished:
    """Start ``argv`` as a ``Child`` and wait for it (``kw`` as ``Child``)."""
    return Child(argv, **kw).wait(deadline_s)


def _signal(pgid: int | None, family: list[tuple[int, int]], sig: int) -> None:
    """Signal the group, then each (pid, start time) of ``family`` that is still that same process."""
    if pgid is not None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid, started in family:
        if _stat(pid)[1] != started:  # gone, or the pid now belongs to someone else
            continue
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stat(pid: int | str) -> tuple[int, int]:
    """(parent pid, start time in clock ticks) from /proc; (-1, -1) when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return -1, -1


def descendants(root: int) -> list[tuple[int, int]]:
    """Every live descendant of ``root`` as (pid, start time) (Linux /proc; elsewhere the group has to do)."""
    children: dict[int, list[tuple[int, int]]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        ppid, started = _stat(entry)
        children.setdefault(ppid, []).append((int(entry), started))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


_PRCTL = None


def _death_signal_hook():
    """A pre-exec hook that makes the kernel kill the child if its parent dies (kill -9), so no orphan keeps
    driving a board. prctl is resolved here, in the parent: a forked child of a threaded worker must not
    dlopen anything."""
    global _PRCTL
    if not sys.platform.startswith("linux"):
        return None
    if _PRCTL is None:
        try:
            import ctypes

            _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            return None
    prctl = _PRCTL
    return lambda: prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# --- detached daemons: the start-up handshake -------------------------------------------------------


def reap_when_done(proc: subprocess.Popen) -> None:
    """Wait for ``proc`` in a daemon thread. A long-lived starter (a Celery worker's ``panio.op``, the SSH
    agent) is a detached daemon's parent: without a wait, a stopped daemon stays a zombie until it exits."""
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()


def start_daemon(module: str, what: str, *, state: Path, target: str, config: Any, log: Path,
                 timeout_s: float, options: tuple[str, ...] = ()) -> dict:
    """Spawn ``module`` detached for ``target`` (its stdout and stderr appended to ``log``) and return its ready line.

    The daemon is ``python -P -m module --state-dir STATE --target T --config JSON --ready-fd N [OPTIONS]``, in a
    session of its own, in ``/``; ``read_ready`` waits for its line, and an ``ok: false`` one is raised
    as the error it carries.
    """
    import json

    from bench_agent.errors import from_json
    from bench_agent.private import open_private

    r, w = os.pipe()
    argv = [*module_argv(module), "--state-dir", str(state), "--target", target,
            "--config", json.dumps(config), "--ready-fd", str(w), *options]
    with os.fdopen(open_private(log, os.O_WRONLY | os.O_APPEND), "ab") as err:  # a log: 0600 (bench_agent.private)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err, pass_fds=(w,),
                                start_new_session=True, close_fds=True, cwd="/")
    os.close(w)
    try:
        reply = read_ready(r, proc, what, log, timeout_s)
    finally:
        os.close(r)
    if not reply.get("ok"):
        proc.wait(5)
        raise from_json(reply["error"])
    reap_when_done(proc)
    return reply


def read_ready(fd: int, proc: subprocess.Popen, what: str, log: Path, timeout_s: float) -> dict:
    """The one JSON line a starting daemon writes on its ready pipe ``fd``: its pid, or its start-up error.

    A daemon that says nothing within ``timeout_s`` is killed (``Timeout``); one that exits first is a
    ``PanioError`` pointing at its stderr ``log``. ``what`` names it in both ("the serial supervisor").
    """
    import json
    import select
    import time

    from bench_agent.errors import PanioError, Timeout

    data, deadline = b"", time.monotonic() + timeout_s
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            proc.kill()
            reap_when_done(proc)
            raise Timeout(f"{what} did not start within {timeout_s:.0f} s; see {log}")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise PanioError(f"{what} exited ({proc.wait(5)}) during start-up; see {log}")
        data += chunk
    return json.loads(data)
