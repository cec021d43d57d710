"""The dashboard's bisections (issue 42) over real HTTP, a real `panio dashboard` and real bisections run by `panio
bisect start` on a lab whose builds are deployed by lab actions (a bad build's action prints a BUG line the job
rejects): the list, a bisection's page (the range after each probe, the bad build's failure, the first bad build,
each probe's job and triage), its JSON twin under the API with the jobs' read scopes, the link back from a probe's
job page, and a bisection still running."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import PANIO, Panio
from bisecthelp import JOB, bisect, deploy_actions
from dashhelp import signed_in, tokened
from jobhelp import job_file, wait_for

OP, READ = "op-" + uuid.uuid4().hex, "rd-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Bisection 1 on pico (tag pi5), bisection 2 on qemu: eight builds, b06 the first bad one in both."""
    root = tmp_path_factory.mktemp("bisectlab")
    (root / "home").mkdir()
    panio = Panio(root)
    panio("init")
    for target, tag in (("pico", "pi5"), ("qemu", "sim")):
        panio("target", "add", target, "--tag", tag)
        deploy_actions(panio, target)
        panio("action", "add", "flash-slow", "-t", target, "--command",  # until the test ends it (its own group)
              f"/bin/sh -c 'while [ ! -e {root / 'deployed'} ]; do sleep 0.1; done'")
    for target in ("pico", "qemu"):
        bisect(panio, root, target)
    panio.root = root
    return panio


@pytest.fixture(scope="module")
def dashboard(lab, tmp_path_factory):
    d = tokened(lab.env, tmp_path_factory.mktemp("dash") / "dashboard.log", OP, READ)
    yield d
    d.stop()


def _api(url: str, path: str, token: str | None) -> tuple[int, object]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, headers=headers), timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _table(page: str, table_id: str) -> str:
    return page.split(f'id="{table_id}"')[1].split("</table>")[0]


def test_the_list_names_each_bisection_its_range_and_first_bad_build(lab, dashboard):
    c = signed_in(dashboard, READ)
    assert '<a href="/bisects" id="nav-bisects">' in c.get("/")[2]  # the nav leads there from every page
    status, _, page = c.get("/bisects")
    assert status == 200
    rows = _table(page, "bisects").split('class="bisect"')[1:]
    assert [re.search(r'href="/bisects/(\d+)"', r).group(1) for r in rows] == ["2", "1"]  # newest first
    assert all("b06</strong>" in r and "done" in r and "b05..b06" in r for r in rows)
    assert '<a href="/targets/pico">pico</a>' in rows[1] and '<a href="/targets/qemu">qemu</a>' in rows[0]


def test_a_bisections_page_shows_the_range_shrinking_the_failure_and_each_probe(lab, dashboard):
    status_json = lab("bisect", "status", "1", "--json").json()
    c = signed_in(dashboard, READ)
    status, _, page = c.get("/bisects/1")
    assert status == 200
    assert re.search(r'id="first-bad">First bad build: <strong class="bad">b06</strong> \(last good: '
                     r'<span class="good">b05</span>\)', page)
    assert 'hx-get="/bisects/1/live"' not in page  # done: nothing left to refresh
    # the bad build's failure, its job and that job's triage
    failure = page.split('id="failure"')[1].split("</div>")[0]
    bad_job = next(p["job_id"] for p in status_json["probes"] if p["build"] == "b08" and p["verdict"] == "bad")
    assert "boots clean" in failure and "BUG: oops at &lt;hex&gt;" in failure
    assert f'href="/jobs/{bad_job}/triage"' in failure and f'href="/jobs/{status_json["reference"]}"' in failure
    # the whole range now: five builds good, three bad, none left untested; a tick for each build probed
    bar = page.split('id="range-bar"')[1].split("</figure>")[0]
    assert re.search(r'class="span good"[^>]*><title>5 good', bar) and re.search(r'<title>3 bad', bar)
    assert "span untested" not in bar and bar.count('class="probed"') == len({p["build"] for p in status_json["probes"]})
    # one row a judged probe: its build, job, verdict, why, triage link, and the range after it, narrowing
    rows = _table(page, "probes").split('class="probe"')[1:]
    assert len(rows) == len(status_json["probes"]) >= 4
    for row in rows:
        job_id = re.search(r'href="/jobs/(\d+)">job', row).group(1)
        assert f'href="/jobs/{job_id}/triage"' in row
        probe = next(p for p in status_json["probes"] if str(p["job_id"]) == job_id)
        assert f'class="probe-build">{probe["build"]}<' in row and f">{probe['verdict']}</td>" in row
    lefts = [int(re.search(r", (\d+) between", r).group(1)) for r in rows]
    assert lefts[0] == 6 and lefts[-1] == 0 and lefts == sorted(lefts, reverse=True), lefts
    assert "b05..b06, 0 between" in rows[-1]
    assert c.get("/bisects/99")[0] == 404 and c.get(f"/bisects/{2**64}")[0] == 404


def test_the_json_twin_is_bisect_status_plus_the_range_after_each_probe(lab, dashboard):
    for n in ("1", "2"):
        status, answer = _api(dashboard.url, f"/api/v1/bisects/{n}", READ)
        assert status == 200
        steps = answer.pop("steps")
        assert answer == lab("bisect", "status", n, "--json").json()  # the same fields, the same values
        assert (steps[-1]["good"], steps[-1]["bad"], steps[-1]["left"]) == ("b05", "b06", 0)
        assert sorted(s["job_id"] for s in steps) == sorted(p["job_id"] for p in answer["probes"])
    status, listed = _api(dashboard.url, "/api/v1/bisects", READ)
    assert status == 200 and [(b["id"], b["first_bad"], b["left"]) for b in listed] == [(2, "b06", 0), (1, "b06", 0)]
    status, missing = _api(dashboard.url, "/api/v1/bisects/99", READ)
    assert status == 404 and missing["error"] == "not_configured" and missing["bisect"] == 99
    assert _api(dashboard.url, "/api/v1/bisects?limit=0", READ)[0] == 400
    assert _api(dashboard.url, "/api/v1/bisects", None)[0] == 401


def test_a_token_with_an_allow_list_reads_only_its_boards_bisections(lab, dashboard):
    pi5 = lab("token", "add", "ci-pi5-" + uuid.uuid4().hex[:6], "--scope", "reader", "--tag", "pi5",
              "--json").json()["token"]
    status, listed = _api(dashboard.url, "/api/v1/bisects", pi5)
    assert status == 200 and [b["id"] for b in listed] == [1]  # pico's; qemu's is not on its list
    assert _api(dashboard.url, "/api/v1/bisects/1", pi5)[0] == 200
    status, refused = _api(dashboard.url, "/api/v1/bisects/2", pi5)
    assert status == 403 and refused["error"] == "refused" and "qemu" in refused["message"]


def test_a_probes_job_page_links_back_to_its_bisection(lab, dashboard):
    probe = lab("bisect", "status", "2", "--json").json()["probes"][2]
    c = signed_in(dashboard, READ)
    page = c.get(f"/jobs/{probe['job_id']}")[2]
    link = re.search(r'id="bisect-link">A probe of <a href="/bisects/(\d+)">bisection #\d+</a>: build (\w+)', page)
    assert link and link.groups() == ("2", probe["build"])
    other = job_file(lab.root, "name = 'alone'\n[[steps]]\nname = 'p'\nrun = 'ping ${target}'\n", "alone.toml")
    job_id = lab("job", "run", other, "--target", "pico", "--json").json()["id"]
    assert 'id="bisect-link"' not in c.get(f"/jobs/{job_id}")[2]


def test_a_running_bisection_refreshes_in_place_and_lists_its_running_probe(lab, dashboard, tmp_path):
    """A bisection whose good build's deploy lasts until the test ends it: while it runs, its page re-fetches its
    live part and lists the probe job under way; the list says running."""
    builds = tmp_path / "slow.txt"
    builds.write_text("s1 flash=flash-slow\ns2 flash=flash-bad\ns3 flash=flash-bad\n")
    job = job_file(tmp_path, JOB, "boot.toml")
    proc = subprocess.Popen([PANIO, "bisect", "start", job, "--target", "qemu", "--good", "s1", "--bad", "s3",
                             "--builds", str(builds)], env=lab.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        c = signed_in(dashboard, READ)
        wait_for(lambda: 'class="running-probe"' in c.get("/bisects/3")[2], timeout_s=60)
        page = c.get("/bisects/3")[2]
        assert 'hx-get="/bisects/3/live"' in page and 'id="bisect-state" class="state-running' in page
        running = _table(page, "running")
        assert "s1" in running and re.search(r'href="/jobs/\d+">job \d+', running)
        assert 'id="range">Last good <span class="good">s1</span>, first bad so far <span class="bad">s3</span>: ' \
               '1 builds between' in page
        live = c.get("/bisects/3/live")[2]
        assert '<section id="live"' in live and "<header>" not in live  # the fragment alone
        row = _table(c.get("/bisects")[2], "bisects").split('class="bisect"')[1]
        assert 'href="/bisects/3"' in row and "running" in row
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        (lab.root / "deployed").write_text("")  # the deploy action (in a process group of its own) ends


def test_the_range_replay_takes_no_verdict_at_odds_with_the_range():
    """Side by side (--tag), builds are judged out of order: a build found bad above a bad one, or good below a good
    one, narrows nothing (as the bisection itself decides); a good build needs --repeat passes."""
    from controller.api.bisects import steps

    builds = [{"name": f"b{i}", "artifacts": {}} for i in range(10)]
    probes = [(0, "reference"), (9, "bad"), (3, "bad"), (6, "bad"), (1, "pass"), (2, "pass"), (1, "pass"),
              (2, "unrelated"), (2, "pass")]
    rec = {"builds": builds, "repeat": 2,
           "probes": [{"id": n, "build": b, "job_id": 100 + n, "verdict": v, "why": "", "at": float(n)}
                      for n, (b, v) in enumerate(probes)] + [
               {"id": 99, "build": 5, "job_id": 199, "verdict": "running", "why": "", "at": 0.5}]}
    ranges = [(s["build"], s["good"], s["bad"], s["left"]) for s in steps(rec)]
    assert ranges == [("b0", "b0", "b9", 8), ("b9", "b0", "b9", 8), ("b3", "b0", "b3", 2), ("b6", "b0", "b3", 2),
                      ("b1", "b0", "b3", 2), ("b2", "b0", "b3", 2), ("b1", "b1", "b3", 1), ("b2", "b1", "b3", 1),
                      ("b2", "b2", "b3", 0)]


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_the_list_and_a_jobs_bisection_read_alike_on_sqlite_and_postgresql(db, tmp_path):
    """The reads behind /bisects and a probe's link back: newest first, a page before an id, each with its probe
    count; the bisection a job was a probe of (its newest probe of that job), none for another job."""
    from bench_agent.results.bisects import BisectStore
    from jobhelp import drop_pg_schema, pg_schema

    url = f"sqlite:///{tmp_path / 'r.db'}" if db == "sqlite" else pg_schema()
    try:
        store = BisectStore(url)
        builds = [{"name": n, "artifacts": {}} for n in ("v1", "v2", "v3")]
        ids = [store.create("j.toml", "", "pico", builds, 1) for _ in range(3)]
        store.add_probe(ids[0], 0, 11, "reference", "passed")
        store.add_probe(ids[0], 2, 12, "bad", "failed")
        store.add_probe(ids[2], 1, 13, "running", "running on pico")
        store.update(ids[0], state="done", good=1, bad=2)
        rows = store.listed()
        assert [(r["id"], r["probes"], r["state"]) for r in rows] == [(ids[2], 1, "running"), (ids[1], 0, "running"),
                                                                     (ids[0], 2, "done")]
        assert rows[2]["builds"] == ["v1", "v2", "v3"] and (rows[2]["good"], rows[2]["bad"]) == (1, 2)
        assert [r["id"] for r in store.listed(limit=1, before=ids[2])] == [ids[1]]
        assert store.probe_of(12) == {"bisect_id": ids[0], "build": 2, "verdict": "bad"}
        assert store.probe_of(13)["verdict"] == "running" and store.probe_of(99) is None
    finally:
        if db == "postgresql":
            drop_pg_schema(url)
