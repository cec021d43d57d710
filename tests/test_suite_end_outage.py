"""Issue 43: a suite whose end comes while the results database is away waits for it and sends its verdict once it
is back; nothing is lost.

The real suite runner (``controller.jobs.suite.run``, as `panio suite run` and `panio schedule serve` call it,
its jobs run in this process), a real PostgreSQL database made unreachable (``ALLOW_CONNECTIONS false``, its
backends terminated: ``outagehelp.AwayDatabase``) the instant the suite's last job has its verdict, before the
suite reads its jobs back and sends ``suite_finished``; a real webhook receiver on loopback.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from jobhelp import fixture_lab, job_file
from outagehelp import AwayDatabase

QUICK = "name = 'quick'\n[[steps]]\nrun = 'ping ${target}'\nexpect_output = '${target} \\(local\\)'\n"
SAID = "results database unreachable since"


class _Heard(logging.Handler):
    """Sets ``said`` once a log line says the results database is away."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said, self.lines = threading.Event(), []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        if SAID in record.getMessage():
            self.said.set()


def _away_as_the_suite_ends(db, heard: _Heard, jobs: int):
    """A suite's ``progress_for`` that makes the database unreachable as the last of its ``jobs`` ends (its
    verdict recorded, the suite's end to come), and brings it back once the suite has said it waits for it; the
    list that says it went away, and the ended jobs' ids."""
    ended, lock, away_at = [], threading.Lock(), []

    def back() -> None:
        heard.said.wait(60)
        db.back()

    def progress_for(target: str):
        def progress(event: str, data: dict) -> None:
            if event != "job_end":
                return
            with lock:
                ended.append(data["job_id"])
                if len(ended) == jobs:
                    db.away()
                    away_at.append(True)
                    threading.Thread(target=back, daemon=True).start()
        return progress

    return progress_for, away_at, ended


def test_a_suites_verdict_waits_for_the_results_database_away_as_it_ends(panio, tmp_path, receiver, monkeypatch):
    from bench_agent.jobs import notify
    from bench_agent.results.store import ResultStore
    from controller.jobs import suite
    from controller.lab import store as labs

    db = AwayDatabase()
    fixture_lab(panio)
    with panio.lab.open("a") as f:
        f.write(f'\n[[notify]]\nwebhook = "{receiver.url}/suite"\non = ["suite_finished"]\n')
    for name, value in panio.env.items():  # this process is the suite's runner: it reads the environment
        if name.startswith("PANIO_") or name == "HOME":
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("PANIO_RESULTS_URL", db.url)
    monkeypatch.delenv("PANIO_BROKER", raising=False)
    job_file(tmp_path, QUICK, "quick.toml")
    path = Path(job_file(tmp_path, "name = 'night'\ntargets = ['pico', 'qemu']\njobs = ['quick.toml']\n",
                         "night.toml"))
    heard = _Heard()
    logging.getLogger("panio").addHandler(heard)
    progress_for, away_at, ended = _away_as_the_suite_ends(db, heard, jobs=2)
    try:
        data, jobs = suite.run(path, labs.load(panio.lab), progress_for)
        assert away_at and heard.said.is_set(), heard.lines  # the suite did end with the database away
        assert [(j["health"], j["result"]) for j in jobs] == [("complete", "passed")] * 2, jobs
        assert notify.drain(20)
        sent = receiver.bodies("/suite")
        assert len(sent) == 1 and sent[0]["verdict"] == "passed" and sent[0]["total"] == 2, sent
        assert sorted(j["id"] for j in sent[0]["jobs"]) == sorted(ended)
        assert any("results database back after" in line for line in heard.lines), heard.lines
        # nothing lost or run twice: the database holds the two jobs, done once each
        store = ResultStore(db.url)
        assert sorted((j["id"], j["state"], j["result"]) for j in store.list_jobs(limit=100)) == \
            sorted((i, "done", "passed") for i in ended)
    finally:
        logging.getLogger("panio").removeHandler(heard)
        db.drop()


def test_a_queued_suites_verdict_waits_for_the_results_database_away_as_it_ends(panio, tmp_path, receiver,
                                                                                 monkeypatch):
    """The broker's road: the suite's jobs queued to a real `panio worker` (the machine's Redis as broker), the
    suite followed from this process. Its last job ends, failed by the board: the verdict's triage of it reads the
    results database, away at that instant. The suite waits for it (said once), then sends the verdict with the
    failed job's triage; before, triage made do and the verdict said "no triage: OperationalError ..."."""
    from bench_agent.jobs import notify
    from bench_agent.results.store import ResultStore
    from controller.jobs import suite
    from controller.lab import store as labs
    from peerhelp import SHARED_REDIS, Workers, drop_keys, worker_lab

    db = AwayDatabase()
    (tmp_path / "w").mkdir()
    workers = Workers(tmp_path / "w", SHARED_REDIS, PANIO_RESULTS_URL=db.url)
    heard = _Heard()
    try:
        worker_lab(panio, workers)
        with workers.lab.open("a") as f:
            f.write(f'\n[[notify]]\nwebhook = "{receiver.url}/suite"\non = ["suite_finished"]\n')
        for name, value in panio.env.items():  # this process follows the suite: it reads the environment
            if name.startswith("PANIO_") or name == "HOME":
                monkeypatch.setenv(name, value)
        job_file(tmp_path, "name = 'quick'\n[[steps]]\nrun = 'ping ${target} --count 1'\nexpect_output = 'seq=1'\n",
                 "quick.toml")
        job_file(tmp_path, "name = 'bad'\n[[steps]]\nrun = 'ping ${target} --count 1'\n"
                 "expect_output = 'a line the board never prints'\n", "bad.toml")
        path = Path(job_file(tmp_path, "name = 'night'\ntargets = ['t1']\njobs = ['quick.toml', 'bad.toml']\n",
                             "night.toml"))
        workers.start("h1")
        logging.getLogger("panio").addHandler(heard)
        progress_for, away_at, ended = _away_as_the_suite_ends(db, heard, jobs=2)
        data, jobs = suite.run(path, labs.load(panio.lab), progress_for)
        assert away_at and heard.said.is_set(), heard.lines  # the suite did end with the database away, and waited
        assert [(j["name"], j["health"], j["result"]) for j in jobs] == \
            [("quick", "complete", "passed"), ("bad", "complete", "failed")], [j["reason"] for j in jobs]
        assert notify.drain(20)
        sent = receiver.bodies("/suite")
        assert len(sent) == 1 and sent[0]["verdict"] == "the board failed on t1" and sent[0]["total"] == 2, sent
        assert sorted(j["id"] for j in sent[0]["jobs"]) == sorted(ended)
        (bad,) = [j for j in sent[0]["jobs"] if j["name"] == "bad"]
        assert bad["fault"] == "board" and bad["triage"] and not bad["triage"].startswith("no triage"), bad
        assert any("results database back after" in line for line in heard.lines), heard.lines
        # nothing lost or run twice: the database holds the two jobs, done once each
        assert sorted((j["id"], j["state"]) for j in ResultStore(db.url).list_jobs(limit=100)) == \
            sorted((i, "done") for i in ended)
    finally:
        logging.getLogger("panio").removeHandler(heard)
        workers.stop_all()
        drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])
        db.drop()
