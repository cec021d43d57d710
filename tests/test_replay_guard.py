"""Issue 45, hole 3: the host's own replay guard (``bench_agent.jobs.replay``), on the real filesystem.

The end-to-end proof (a captured operation pushed again after Redis forgot everything, and after a restart)
is ``tests/test_peer_worker_intake.py``; here: what the guard keeps, for how long, and where it refuses to
keep it.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from bench_agent.errors import NotConfigured
from bench_agent.jobs.replay import PURGE_S, SeenNonces


def nonce() -> str:
    return uuid.uuid4().hex


def test_a_nonce_is_new_once_among_every_guard_on_the_folder_and_kept_for_its_window(tmp_path):
    folder = tmp_path / "ops-seen"
    first, n = SeenNonces(folder), nonce()
    assert first.first_time(n, 600)
    assert not first.first_time(n, 600)
    assert not SeenNonces(folder).first_time(n, 600)  # another worker of the host, or the same one restarted
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / n).stat().st_mtime == pytest.approx(time.time() + 600, abs=30)


def test_nonces_past_their_window_are_removed_and_the_others_kept(tmp_path):
    folder = tmp_path / "ops-seen"
    seen, kept, gone = SeenNonces(folder), nonce(), nonce()
    assert seen.first_time(kept, 600) and seen.first_time(gone, 600)
    past = time.time() - PURGE_S - 1
    os.utime(folder / gone, (past, past))  # its window ended more than a purge ago
    seen._next_purge = 0.0  # the next record purges (at most once a minute otherwise)
    assert seen.first_time(nonce(), 600)
    assert (folder / kept).exists() and not (folder / gone).exists()


def test_the_guard_keeps_nothing_outside_its_folder_or_in_one_others_may_write(tmp_path):
    seen = SeenNonces(tmp_path / "ops-seen")
    for bad in ("../../etc/" + "x" * 16, "a/b" * 8, "é" * 16, "x" * 15 + "."):
        with pytest.raises(ValueError):
            seen.first_time(bad, 60)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(NotConfigured, match="not this user's alone"):
        SeenNonces(shared).first_time(nonce(), 60)
    assert list(shared.iterdir()) == []


def test_the_folders_made_above_the_guard_are_this_users_alone_whatever_the_umask(tmp_path):
    """`worker-HOST/` made for `ops-seen/` took the umask (0777 under umask 000), and then every private folder
    below it (the host's record of the jobs it started) was refused: a worker whose first message was an
    operation ran no job after it."""
    from bench_agent.jobs.started import StartedJobs

    old = os.umask(0)
    try:
        assert SeenNonces(tmp_path / "worker-h" / "ops-seen").first_time(nonce(), 60)
    finally:
        os.umask(old)
    for folder in (tmp_path / "worker-h", tmp_path / "worker-h" / "ops-seen"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    assert StartedJobs(tmp_path / "worker-h" / "jobs-started").mark(1, "taken")  # its neighbour is not refused
