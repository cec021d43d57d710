"""The recorder settles a host's reports in batches (issue 38, the 10,000-board bend): what batching must not
change. Real parts: the machine's Redis (a prefix of its own), a PostgreSQL database of the test's own that is
made unreachable for real (``outagehelp``), reports signed with a host's own key; the recorder is panio's
``Recorder`` driven a pass at a time, as ``panio recorder``'s loop drives it.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from jobhelp import wait_for
from outagehelp import AwayDatabase
from peerhelp import SHARED_REDIS, drop_keys
from reporthelp import make_keys

STEP = {"name": "s", "command": "panio ping b1", "status": "running", "started_at": 1.0}
DONE = {**STEP, "status": "pass", "exit_status": 0, "duration_s": 0.1, "output": "", "checks": [], "captured": {}}
VERDICT = {"health": "complete", "result": "passed", "reason": "all steps passed", "error": None,
           "steps": [[0, DONE]], "artifacts": []}


@pytest.fixture
def bench(tmp_path):
    db = AwayDatabase()
    prefix = f"rb{uuid.uuid4().hex[:6]}:"
    b = Bench(tmp_path, db, prefix)
    yield b
    b.close()
    drop_keys(SHARED_REDIS, prefix)
    db.drop()


class Bench:
    def __init__(self, root: Path, db: AwayDatabase, prefix: str) -> None:
        from bench_agent.results.store import ResultStore
        from controller.jobs.recorder import Certificates, Recorder

        self.root, self.db, self.prefix = root, db, prefix
        self.trusted = root / "trusted"
        self.signers = {}
        for host in ("bench1",):
            self.add_host(host)
        self.store = ResultStore(db.url)
        self.certs = Certificates(self.trusted)
        self.rec = Recorder(self.store, SHARED_REDIS, prefix, self.certs,
                            lambda target: {"b1": "bench1", "b9": "bench9"}.get(target))
        self.seq = 0

    def add_host(self, host: str) -> None:
        from bench_agent.results.reports import Signer

        keys = make_keys(self.root / "keys", host, self.trusted)
        self.signers[host] = Signer(Path(keys["PANIO_SIGNING_KEY"]))

    def close(self) -> None:
        if self.rec._pool is not None:
            self.rec._pool.shutdown(wait=True)
        self.rec.r.close()

    def report(self, job: int | None, kind: str, data: dict, fence: int | None = None, host: str = "bench1",
               seq: int | None = None) -> None:
        import redis

        from bench_agent.results import reports

        if seq is None:
            self.seq += 1
            seq = self.seq
        body = reports.body(host, job, seq, kind, fence, data)
        redis.Redis.from_url(SHARED_REDIS).xadd(reports.stream(self.prefix, host),
                                                {"body": body, "sig": self.signers[host].sign(body)})

    def job_reports(self, job: int, fence: int, host: str = "bench1") -> None:
        worker = f"worker {host}@test:1"
        self.report(job, "taken", {"worker": worker}, host=host)
        self.report(job, "started", {"worker": worker}, fence=fence, host=host)
        self.report(job, "step_start", {"idx": 0, "step": STEP, "done": []}, fence=fence, host=host)
        self.report(job, "finish", VERDICT, fence=fence, host=host)

    def settle(self, until, timeout_s: float = 30):
        """Passes of the recorder until ``until()`` is true (a pass that fails is tried again, as its loop does)."""
        def one():
            try:
                self.rec.step(block_ms=100)
            except Exception:  # noqa: BLE001 - the database away: the loop tries again
                time.sleep(0.1)
            return until()
        return wait_for(one, timeout_s=timeout_s, every_s=0)


def test_a_batch_cut_by_the_database_going_away_is_settled_in_order_once_it_is_back(bench):
    """The database goes away while a host's batch is being written: the batch's entries stay pending, and once
    the database is back they are settled in their order, before any newer one: the job is recorded complete
    with its step, as the host ran it (before, they stayed pending until the recorder restarted, while the
    host's later reports were recorded past them)."""
    first, cut, later = (bench.store.create_job(n, "b1", "bench1", {"steps": []}) for n in "abc")
    bench.job_reports(first, fence=5)
    bench.settle(lambda: bench.store.job(first, steps=False)["state"] == "done")  # the stream is known and read
    bench.job_reports(cut, fence=6)
    bench.rec._next_mirror = bench.rec._next_discover = float("inf")  # this pass reads the batch, nothing else
    bench.db.away()
    with pytest.raises(Exception):
        bench.rec.step(block_ms=1000)  # the batch is read; the database refuses its first write
    bench.job_reports(later, fence=7)  # newer entries behind the cut batch
    bench.db.back()
    bench.settle(lambda: bench.store.job(later, steps=False)["state"] == "done")
    for job_id, fence in ((first, 5), (cut, 6), (later, 7)):
        job = bench.store.job(job_id)
        assert (job["state"], job["health"], job["result"], job["fence"]) == ("done", "complete", "passed", fence)
        assert [(s["name"], s["status"]) for s in job["steps"]] == [("s", "pass")]
    import redis

    from bench_agent.results import reports

    r = redis.Redis.from_url(SHARED_REDIS)
    name = reports.stream(bench.prefix, "bench1")
    assert r.xlen(name) == 0 and r.xpending(name, "recorder")["pending"] == 0
    assert r.hget(f"{bench.prefix}recorded:bench1", str(later)) == str(bench.seq).encode()


def test_a_replay_inside_one_batch_is_refused_and_the_marks_hold_across_batches(bench, caplog):
    """Two entries of one batch with the same sequence number: the second is a replay, refused; the batch's
    marks are written with its acknowledgement, so the same report sent again in a later batch is refused too,
    and the job's record is what the first said."""
    job = bench.store.create_job("a", "b1", "bench1", {"steps": []})
    bench.report(job, "taken", {"worker": "worker bench1@test:1"}, seq=10)
    bench.report(job, "started", {"worker": "worker bench1@test:1"}, fence=7, seq=11)
    bench.report(job, "started", {"worker": "worker bench1@test:2"}, fence=8, seq=11)  # replayed number
    with caplog.at_level("WARNING", logger="panio.recorder"):
        bench.settle(lambda: "sequence 11 was recorded before" in caplog.text)
        assert bench.store.job(job, steps=False)["fence"] == 7
        bench.report(job, "finish", {**VERDICT, "result": "failed"}, fence=7, seq=11)  # a later batch
        bench.settle(lambda: caplog.text.count("was recorded before") == 2)
    row = bench.store.job(job, steps=False)
    assert (row["state"], row["worker"], row["fence"]) == ("running", "worker bench1@test:1", 7)


def test_a_host_trusted_after_the_recorder_looked_is_recorded_at_once(bench):
    """The certificates are looked at once a second, not a report: a host whose certificate is added between two
    looks has its first report recorded (a signature no cached certificate verifies makes a fresh look)."""
    bench.certs.LOOK_S = 3600.0  # no scheduled look during the test: only a fresh one can find bench9
    assert bench.certs.of("bench9") == ()
    bench.add_host("bench9")
    job = bench.store.create_job("a", "b9", "bench9", {"steps": []})
    bench.job_reports(job, fence=3, host="bench9")
    bench.settle(lambda: bench.store.job(job, steps=False)["state"] == "done")
    assert bench.store.job(job, steps=False)["result"] == "passed"


def test_a_report_that_trips_a_bug_is_refused_and_the_hosts_later_reports_are_recorded(bench, caplog, monkeypatch):
    """An entry the recorder fails on for a reason that is not a service away (a bug of ours, here made by a
    patched write) is refused and acknowledged, logged with its traceback: read again it would stop the host's
    stream for good. The host's next job is recorded."""
    from controller.jobs.recorder import Recorder

    bad, good = (bench.store.create_job(n, "b1", "bench1", {"steps": []}) for n in "ab")
    real = Recorder._started

    def started(self, host, job, fence, data):
        if job["id"] == bad:
            raise AttributeError("a bug")
        return real(self, host, job, fence, data)

    monkeypatch.setattr(Recorder, "_started", started)
    bench.job_reports(bad, fence=4)
    bench.job_reports(good, fence=5)
    with caplog.at_level("WARNING", logger="panio.recorder"):
        bench.settle(lambda: bench.store.job(good, steps=False)["state"] == "done")
    assert "could not be recorded (AttributeError: a bug" in caplog.text
    assert bench.store.job(good, steps=False)["result"] == "passed"
    assert bench.store.job(bad, steps=False)["state"] == "queued"
