"""The current lab is one context variable for every thread (issue 41): made lazily by several threads at once, each
thread got its own variable and a thread read another's lab, or failed to leave its scope (``ValueError``)."""

from __future__ import annotations

import importlib.util
import sys
import threading

import bench_agent.paths

THREADS, ROUNDS = 8, 60


def _fresh_paths():
    """A new copy of ``bench_agent.paths``, as a process that has not yet used a lab has it."""
    spec = importlib.util.spec_from_file_location("panio_paths_copy", bench_agent.paths.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _round(paths) -> list[str]:
    start, problems = threading.Barrier(THREADS), []

    def work(i: int) -> None:
        key = f"lab{i}"
        start.wait()
        try:
            with paths.using_lab(key):
                for _ in range(50):
                    seen = paths.current_lab()
                    if seen != key:
                        problems.append(f"thread {i} saw {seen!r}")
                        return
        except ValueError as exc:
            problems.append(f"thread {i}: {exc}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return problems


def test_threads_entering_their_first_lab_at_once_each_see_their_own():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        problems = [p for _ in range(ROUNDS) for p in _round(_fresh_paths())]
    finally:
        sys.setswitchinterval(old)
    assert problems == []
