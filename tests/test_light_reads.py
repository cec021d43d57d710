"""`panio job list` and `panio job status` read finished jobs without SQLAlchemy, and show exactly what the
store shows (SQLite and PostgreSQL).

The light read (``bench_agent.results.read.Reader``: sqlite3, or libpq itself for PostgreSQL) sends the
store's own statements; these tests compare what it returns with ``ResultStore``'s answers value for value
(types included), the commands' output with what the store's rows render to, prove the commands import
neither SQLAlchemy nor psycopg, and that anything the reader cannot answer (a job still running, a database
an older panio made) goes the store's way and still answers.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from jobhelp import drop_pg_schema, pg_schema

STEP = {"name": "boot", "command": "panio serial wait pico login:", "status": "passed", "exit_status": 0,
        "duration_s": 1.25, "checks": [{"check": "exit_status", "ok": True}], "captured": {"rtt": "0.3"},
        "output": "login:\n", "started_at": 1700000000.125}


@pytest.fixture(params=["sqlite", "postgresql"])
def results(request, panio):
    if request.param == "postgresql":
        url = pg_schema()
    else:
        url = f"sqlite:///{panio.lab.parent / 'results.db'}"
    panio.env["PANIO_RESULTS_URL"] = url
    panio.env.pop("PANIO_BROKER", None)
    panio.env.pop("PANIO_REDIS_URL", None)
    yield url
    if request.param == "postgresql":
        drop_pg_schema(url)


def history(url: str) -> dict[str, int]:
    """Finished jobs of every shape a row can take (passed with steps, failed, incomplete with an error,
    canceled, overridden) on two boards."""
    from bench_agent.results.store import ResultStore
    from controller.jobs.overrides import OverrideStore

    store = ResultStore(url)
    ids = {}
    ids["passed"] = store.create_job("smoke", "pico", "host-1", {"name": "smoke", "steps": [{"run": "ping"}]})
    store.claim(ids["passed"], "w1@ctl", fence=7)
    store.record_step(ids["passed"], 0, STEP)
    store.record_step(ids["passed"], 1, {**STEP, "name": "skip", "status": "skipped", "exit_status": None,
                                          "duration_s": None, "checks": [], "captured": {}, "output": ""})
    store.finish(ids["passed"], "complete", "passed")
    ids["failed"] = store.create_job("smoke", "zero", None, {"steps": []})
    store.finish(ids["failed"], "complete", "failed", "failed: boots to a shell")
    ids["incomplete"] = store.create_job("soak", "pico", "host-1", {"steps": []})
    store.finish(ids["incomplete"], "incomplete", None, "lab: serial device went away",
                 {"error": "unreachable", "exit": 4, "message": "gone", "hint": "check the cable"})
    ids["canceled"] = store.create_job("soak", "zero", None, {"steps": []})
    store.request_cancel(ids["canceled"])
    store.finish(ids["canceled"], "canceled", None, "canceled before it started")
    overrides = OverrideStore(url)
    oid = overrides.add({"at": 1700000001.5, "target": "pico", "job_id": ids["passed"], "holder": "w1@ctl",
                         "token": 7, "command": "serial stop", "by": "ops@ctl", "reason": "capture wedged"})
    overrides.outcome(oid, {"ok": True})
    return ids


def strict(value) -> str:
    """A value as JSON, keys in order: 1 and 1.0, True and 1 differ."""
    return json.dumps(value)


def test_the_reader_returns_what_the_store_returns(results):
    from bench_agent.results.store import ResultStore
    from bench_agent.results.read import Reader
    from controller.jobs import overrides

    ids = history(results)
    store = ResultStore(results)
    pages = [{}, {"limit": 2}, {"target": "pico"}, {"health": "incomplete"}, {"result": "failed"},
             {"name": "soak", "host": None}, {"state": "done", "limit": 3}, {"before": ids["canceled"]}]
    with Reader.open(results) as reader:
        for filters in pages:
            assert strict(reader.list_jobs(**filters)) == strict(store.list_jobs(**filters)), filters
        for job_id in ids.values():
            assert strict(reader.job(job_id)) == strict(store.job(job_id))
            assert strict(overrides.for_job(job_id, reader)) == strict(overrides.OverrideStore(results).for_job(job_id))
        assert reader.job(ids["passed"])["steps"][0]["captured"] == {"rtt": "0.3"}
        assert overrides.for_job(ids["passed"], reader)[0]["outcome"] == {"ok": True}


def test_job_list_and_status_print_what_the_stores_rows_render_to(panio, results):
    from bench_agent.results.store import ResultStore
    from controller.jobs.report import brief as _brief
    from controller.jobs import overrides, report

    ids = history(results)
    store = ResultStore(results)
    listed = panio("job", "list", "--json").json()
    assert listed == [{k: v for k, v in j.items() if k != "spec"} for j in store.list_jobs()]
    lines = panio("job", "list", "--target", "pico").out.splitlines()
    assert lines == [f"{ids['incomplete']:>5}  soak                 pico         incomplete",
                     f"{ids['passed']:>5}  smoke                pico         complete, passed"]
    for job_id in ids.values():
        job = {**store.job(job_id), "overrides": overrides.OverrideStore(results).for_job(job_id)}
        assert panio("job", "status", str(job_id), "--json").json() == json.loads(json.dumps(_brief(job)))
        text = panio("job", "status", str(job_id)).out
        assert text == "\n".join(report.summary_lines(job) + [overrides.line(o) for o in job["overrides"]]) + "\n"
    assert "override " in panio("job", "status", str(ids["passed"])).out
    err = panio.fails("job", "status", "999999", code=3).error
    assert err["message"] == f"no job 999999 in the results database ({results})"


def loaded(panio, *argv: str) -> dict:
    """Run `panio ARGV` in a new process; which database libraries it imported, and its output."""
    code = ("import atexit, json, sys\n"
            "atexit.register(lambda: print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'sqlalchemy', 'psycopg'})), file=sys.stderr))\n"
            f"sys.argv = ['panio', *{list(argv)!r}]\n"
            "from controller.cli.main import main\n"
            "main()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=panio.env, timeout=120)
    assert p.returncode == 0, p.stderr
    return {"modules": json.loads(p.stderr.strip().splitlines()[-1]), "out": p.stdout}


def test_reading_finished_jobs_imports_neither_sqlalchemy_nor_psycopg(panio, results):
    ids = history(results)
    for argv in (["job", "list"], ["job", "list", "--json", "--target", "pico"],
                 ["job", "status", str(ids["passed"])], ["job", "status", str(ids["incomplete"]), "--json"]):
        assert loaded(panio, *argv)["modules"] == [], argv


def test_a_job_not_done_goes_the_stores_way_and_is_shown_settled(panio, results):
    """A page with a job whose runner may have died needs the reconciler: the store answers (and without a
    broker, a queued job nobody runs is settled as the store's way settles it)."""
    from bench_agent.results.store import ResultStore

    ids = history(results)
    queued = ResultStore(results).create_job("late", "pico", None, {"steps": []})
    run = loaded(panio, "job", "list", "--json")
    assert "sqlalchemy" in run["modules"]
    shown = {j["id"]: j for j in json.loads(run["out"])}
    assert set(shown) == {queued, *ids.values()}
    assert shown[queued]["state"] == ResultStore(results).job(queued)["state"]
    assert "sqlalchemy" in loaded(panio, "job", "status", str(queued))["modules"]
    assert "sqlalchemy" in loaded(panio, "job", "list", "--state", "queued")["modules"]  # settled, whatever it shows


def test_a_database_an_older_panio_made_goes_the_stores_way_which_migrates_it(panio, results):
    """No panio_overrides table and a job column missing: the reader cannot answer as written, the store adds
    what is missing, and the next read needs it no more."""
    import sqlalchemy as sa

    from bench_agent.results import db as store_module

    ids = history(results)
    engine = store_module.engine_for(results)
    with engine.begin() as c:
        c.execute(sa.text("DROP TABLE panio_overrides"))
        c.execute(sa.text("ALTER TABLE panio_jobs DROP COLUMN sent_at"))
    first = loaded(panio, "job", "status", str(ids["failed"]), "--json")
    assert "sqlalchemy" in first["modules"] and json.loads(first["out"])["sent_at"] is None  # the column is back
    again = loaded(panio, "job", "status", str(ids["failed"]), "--json")
    assert again["modules"] == [] and json.loads(again["out"]) == json.loads(first["out"])


@pytest.mark.parametrize("argv", [("job", "list"), ("job", "status", "1")])
def test_a_results_url_with_an_option_libpq_does_not_know_is_a_config_error(panio, results, argv):
    """`?foo=bar` on a PostgreSQL URL: refused before any connection is made. One human line, one JSON line,
    exit 5 (the configuration), no traceback; the same URL without the option works."""
    if not results.startswith("postgresql"):
        pytest.skip("libpq's connection options")
    panio.env["PANIO_RESULTS_URL"] = results + "&foo=bar"
    r = panio(*argv, check=False)
    assert r.code == 5, r.err
    human, machine = r.err.strip().splitlines()
    assert 'invalid connection option "foo"' in human and "Traceback" not in r.err
    assert json.loads(machine)["error"] == "config_invalid"
    panio.env["PANIO_RESULTS_URL"] = results
    assert panio("job", "list", "--json").json() == []
