"""The dashboard's pages never wait for the worker ping (issue 27: `/` took 1.0-1.3 s every time).

A Celery ping always waits its whole timeout, since it cannot know how many workers will answer; the
dashboard pings in a background thread and pages show the last answer. Real Redis, real Celery ping, a
real `panio worker` answering it, and then none.
"""

from __future__ import annotations

import time

import pytest

import keyhelp
from jobhelp import wait_for
from peerhelp import SHARED_REDIS, Workers


@pytest.fixture
def broker(monkeypatch, prefix):
    from controller.dashboard import reads

    for name, value in {"PANIO_BROKER": SHARED_REDIS, "PANIO_REDIS_PREFIX": prefix,
                        **keyhelp.controller_env()}.items():
        monkeypatch.setenv(name, value)
    reads._PINGS.pop(SHARED_REDIS, None)
    reads._APPS.pop(SHARED_REDIS, None)  # a server's app is built for its prefix; each test has its own
    yield SHARED_REDIS
    thread = reads._PINGING.get(SHARED_REDIS)
    if thread is not None:
        thread.join(timeout=30)
    reads._PINGS.pop(SHARED_REDIS, None)


def timed(func):
    t0 = time.monotonic()
    value = func()
    return value, time.monotonic() - t0


def test_only_the_first_page_waits_for_a_ping_and_a_stale_answer_is_refreshed_behind_the_pages(broker):
    from controller.dashboard import reads

    reads.ping_soon()  # what the server does when it starts
    answer, took = timed(reads.workers)  # the first page: nothing known yet, it waits for that ping
    assert answer == {} and not isinstance(answer, reads.BrokerDown)  # the broker answers, no worker does
    fresh, took = timed(reads.workers)
    assert fresh == {} and took < reads.WORKER_PING_S / 2, f"a fresh answer took {took:.2f} s"

    when, known = reads._PINGS[broker]
    reads._PINGS[broker] = (when - reads.PING_CACHE_S - 1, known)  # as a page finds it 6 s later
    stale, took = timed(reads.workers)
    assert stale == {} and took < reads.WORKER_PING_S / 2, f"a page waited {took:.2f} s for the ping"
    pinging = reads._PINGING[broker]
    assert pinging.is_alive()  # refreshed behind the page ...
    pinging.join(timeout=30)
    assert reads._PINGS[broker][0] > when  # ... and the next page shows the new answer
    assert reads.ping_soon() is None  # fresh: no second ping while the answer is fresh


def test_a_worker_that_comes_up_shows_on_a_page_within_one_refresh(broker, tmp_path, monkeypatch):
    from controller.dashboard import reads

    workers = Workers(tmp_path, broker, PANIO_REDIS_PREFIX=reads.backends.redis_prefix())
    try:
        workers.start("bench7", concurrency=1)
        reads.ping_soon()
        assert reads.workers() is not None

        def seen():
            when, _ = reads._PINGS[broker]
            if time.monotonic() - when >= reads.PING_CACHE_S:
                reads.ping_soon()  # the next page would: keep the refresh going without a page
            answer, took = timed(reads.workers)
            assert took < reads.WORKER_PING_S / 2 or "bench7" in answer, f"a page waited {took:.2f} s"
            return "bench7" in answer and answer["bench7"][0].startswith("bench7.")

        wait_for(seen, timeout_s=4 * (reads.PING_CACHE_S + reads.WORKER_PING_S) + 30, every_s=0.2)
    finally:
        workers.stop_all()
