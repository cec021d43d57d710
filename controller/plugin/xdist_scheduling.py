"""Under pytest-xdist, one worker per target: a scheduler that sends all of a target's tests to one worker.

Each xdist worker is a pytest session of its own and leases a target at its
first test on it, until the worker ends; a second worker given a test on the
same target would wait for that lease and fail. So every test that uses
``panio_target`` belongs to its target's group, and a group runs on one worker.

xdist's ``--dist loadgroup`` reads the group from a ``@name`` suffix that its
worker appends to each node id; pytest 9.2 made node ids structured, and the
suffix no longer takes (pytest-xdist issue 1386: the tests are spread as if
unmarked). This scheduler finds the target in the node id's parameter id
instead (the plugin gives ``panio_target`` the target's name as its id), and
leaves every other test to xdist's own grouping.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling


def target_of(nodeid: str, names: list[str]) -> str | None:
    """The target among ``names`` whose parameter id is in ``nodeid`` (``test_x[board0-3]``), else None."""
    start, end = nodeid.find("["), nodeid.rfind("]")
    if start < 0 or end < start:
        return None
    ids = nodeid[start + 1:end]
    for name in sorted(names, key=len, reverse=True):  # "pi5-a" before "pi5"
        if ids == name or ids.startswith(name + "-") or ids.endswith("-" + name) or f"-{name}-" in ids:
            return name
    return None


class TargetGroupScheduling(LoadGroupScheduling):
    """``--dist loadgroup`` whose groups are the targets first, then the ``xdist_group`` marks."""

    def __init__(self, config, log, names: list[str]) -> None:
        super().__init__(config, log)
        self.names = names

    def _split_scope(self, nodeid: str) -> str:
        target = target_of(nodeid, self.names)
        return f"panio target {target}" if target is not None else super()._split_scope(nodeid)
