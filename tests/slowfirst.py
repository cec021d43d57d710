"""Longest test files first, so `make test`'s xdist workers do not end with one of them running alone.

`make test` runs ``pytest -n 4 --dist loadfile``: each worker takes whole files, in the order they were
collected, and asks for the next when it is nearly done. A 8-minute file handed out last keeps the run going
8 minutes after the other three workers went idle; handed out first, it runs beside everything else
(longest-first is the classic greedy schedule for this). So the collection is reordered, file by file, each
file's tests kept together and in their order:

- by each file's duration in the last run that ran it (setup + call + teardown of each of its tests, kept in
  pytest's cache, ``.pytest_cache``, key ``panio/test_seconds``, written by the run's controller process);
- for a file no run has timed yet (a fresh clone has no cache), by ``LONG_FILES`` below: the files over
  half a minute in a fresh clone's ``make test``, with their seconds then.
  Any other untimed file counts 0 s and keeps its collection place behind the long ones.

xdist's ``loadfile`` scheduler would by default re-sort the files by their number of tests
(``--loadscope-reorder``), which put the longest files, a few long tests each, at the end;
``pytest_configure`` turns that off so this order is the one handed out.
"""

from __future__ import annotations

import pytest

KEY = "panio/test_seconds"

# seconds, measured in a fresh-clone `make test` (2026-12-02, load 4: 8.7 min); a cache from any run supersedes them
LONG_FILES = {
    "tests/test_night_harness.py": 220,
    "tests/test_setup_provision.py": 108,
    "tests/test_peer_openssh.py": 101,
    "tests/test_triage.py": 90,
    "tests/test_scale_harness.py": 87,
    "tests/test_pytest_plugin.py": 77,
    "tests/test_peer_broker_lockdown.py": 75,
    "tests/eval/test_hardware.py": 73,
    "tests/test_qemu_board.py": 52,
    "tests/test_qemu_variant.py": 45,
    "tests/eval/test_runner.py": 39,
    "tests/test_contract.py": 32,
    "tests/test_peer_redis.py": 32,
}

_seconds: dict[str, float] = {}


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order(items: list, recorded: dict[str, float]) -> None:
    """Sort ``items`` in place: files longest first, each file's tests together and in their order."""
    timed: dict[str, float] = {}
    for item in items:
        if item.nodeid in recorded:
            timed[file_of(item.nodeid)] = timed.get(file_of(item.nodeid), 0.0) + recorded[item.nodeid]
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(file_of(item.nodeid), i)

    def key(item) -> tuple[float, int]:
        name = file_of(item.nodeid)
        return -timed.get(name, LONG_FILES.get(name, 0.0)), first_seen[name]

    items.sort(key=key)  # stable: a file's tests keep their order


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: hand files out in collection order
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    order(items, cache.get(KEY, {}) if cache is not None else {})


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _seconds:  # an xdist worker: its controller writes
        return
    recorded = cache.get(KEY, {})
    recorded.update({nodeid: round(s, 2) for nodeid, s in _seconds.items()})
    cache.set(KEY, recorded)
