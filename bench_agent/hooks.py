"""Run a configured hook command: no shell, bounded in time, failures made clear.

A hook is a command line from the lab file (``shellyplug -d 192.0.2.41
cycle``, ``~/bin/relay.sh 3 off``). It is split into words by shlex's rules (``shellwords``) and executed
directly, so runtime input never reaches a shell. A word starting with ``~/``
is expanded as a shell would; nothing else is.

Failures, each with its own exit status:

    missing executable   NotConfigured 3  (the lab file names a program that is not there)
    non-zero exit        HookFailed 9     (its stderr is shown)
    runs past timeout_s  Timeout 22       (it and everything it started are stopped: bench_agent.process)
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from bench_agent import shellwords
from bench_agent.errors import HookFailed, NotConfigured, Timeout, UsageError

DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class HookResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


def split(command: str, name: str) -> list[str]:
    """The argv of ``command``, with ``~/`` words expanded."""
    try:
        argv = shellwords.split(command)
    except ValueError as exc:
        raise NotConfigured(f"{name} {command!r} cannot be split into words: {exc}", hook=name) from None
    if not argv:
        raise NotConfigured(f"{name} is empty", hook=name)
    return [os.path.expanduser(w) if w.startswith("~/") or w == "~" else w for w in argv]


def resolve(program: str, name: str) -> str:
    """The executable for ``program``: a path as given, else PATH, else beside this Python.

    Looking beside ``sys.executable`` finds the helpers installed with panio
    (``shellyplug``) even when a venv's bin directory is not on PATH.
    """
    if os.sep in program:
        if os.access(program, os.X_OK) and not os.path.isdir(program):
            return program
        why = "does not exist" if not os.path.exists(program) else "is not executable"
        raise NotConfigured(f"{name}: {program} {why}", hint="fix the hook with `panio power set`", hook=name,
                            program=program)
    found = shutil.which(program) or shutil.which(program, path=str(Path(sys.executable).parent))
    if found is None:
        raise NotConfigured(f"{name}: program {program!r} not found on PATH", hint="install it or give its full path",
                            hook=name, program=program)
    return found


def run(command: str, *, name: str, timeout_s: float | None = None, env: dict[str, str] | None = None,
        check: bool = True, extra_args: list[str] | None = None) -> HookResult:
    """Run hook ``command`` (described as ``name`` in errors) and return its output.

    ``extra_args`` are appended to the command's words as they are (each one
    word: never split, never expanded). With ``check`` a non-zero exit raises
    ``HookFailed``; without it the caller reads ``returncode`` itself.
    """
    timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
    if timeout_s <= 0:
        raise UsageError(f"{name}: timeout must be greater than 0, not {timeout_s}")
    argv = split(command, name)
    argv[0] = resolve(argv[0], name)
    argv += extra_args or []
    from bench_agent.process import Child

    try:
        child = Child(argv, env={**os.environ, **(env or {})})
    except OSError as exc:
        raise NotConfigured(f"{name}: cannot start {argv[0]}: {exc.strerror}", hook=name, program=argv[0]) from exc
    done = child.wait(timeout_s)  # Ctrl-C or SIGTERM while waiting stops the hook too
    if done.timed_out:
        raise Timeout(f"{name} `{command}` still running after {timeout_s:g} s; killed", hook=name,
                      command=command, timeout_s=timeout_s)
    result = HookResult(argv, done.code, done.out, done.err)
    if check and done.code != 0:
        raise failed(result, name, command)
    return result


def failed(result: HookResult, name: str, command: str) -> HookFailed:
    """The error for a hook that exited non-zero, showing the gist of its stderr."""
    lines = [ln.strip() for ln in result.stderr.splitlines() if ln.strip()]
    gist = next((ln for ln in lines if not ln.startswith("{")), lines[0] if lines else "")
    shown = f": {gist}" if gist else " (no stderr)"
    status = f"signal {-result.returncode}" if result.returncode < 0 else f"exit {result.returncode}"
    return HookFailed(f"{name} `{command}` failed ({status}){shown}", hook=name, command=command,
                      hook_exit=result.returncode, stderr=result.stderr[-4000:])
