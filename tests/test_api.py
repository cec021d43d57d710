"""The controller API (issue 38, item 3): tokens kept hashed (`panio token`), the HTTP API served by a real
`panio dashboard`, and `panio job ... --controller` from a process that holds no broker, database or key."""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import socket
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bench_agent.errors import Refused
from conftest import Panio
from dashhelp import DashboardProc
from jobhelp import drop_pg_schema, job_file, pg_schema, wait_for
from peerhelp import SHARED_REDIS, Workers, drop_keys, worker_lab

PING = "name = 'smoke'\ntarget = 'pico'\n[[steps]]\nname = 'ping it'\nrun = 'ping ${target} --count 2'\n"


def _results_db(panio: Panio) -> Path:
    return Path(panio.env["PANIO_STATE_DIR"]) / "results.db"


def test_a_token_is_shown_once_listed_without_its_secret_and_stored_as_a_hash(panio):
    made = panio("token", "add", "ci-fw", "--scope", "submitter", "--tag", "pi5", "--expires", "30d",
                 "--json").json()
    secret = made["token"]
    assert secret.startswith("panio_") and len(secret) > 40
    assert made["scope"] == "submitter" and made["tags"] == ["pi5"] and made["expires_at"] > made["created_at"]
    listed = panio("token", "list", "--json")
    assert secret not in listed.out and "hash" not in listed.out
    assert [t["name"] for t in listed.json()] == ["ci-fw"]
    assert secret not in panio("token", "list").out
    with sqlite3.connect(_results_db(panio)) as db:
        rows = db.execute("SELECT * FROM panio_api_tokens").fetchall()
    assert rows and not any(secret in str(v) for v in rows[0])
    assert hashlib.sha256(secret.encode()).hexdigest() in rows[0]

    panio.fails("token", "add", "ci-fw", "--scope", "reader", code=6)  # a live name is not taken twice
    panio.fails("token", "add", "open", "--scope", "submitter", code=2)  # a submitter needs an allow list
    panio.fails("token", "add", "Bad Name", "--scope", "reader", code=7)
    panio.fails("token", "add", "x", "--scope", "reader", "--expires", "soon", code=2)

    panio("token", "rm", "ci-fw")
    assert panio("token", "list", "--json").json() == []
    assert panio("token", "list", "--all", "--json").json()[0]["revoked_at"]
    panio.fails("token", "rm", "ci-fw", code=3)
    assert panio("token", "add", "ci-fw", "--scope", "reader", "--json").json()["token"] != secret  # rotated


FAILING = "name = 'expects-more'\ntarget = 'pico'\n[[steps]]\nname = 'wrong'\nrun = 'ping ${target}'\nexpect_output = 'seq=9'\n"
OPERATOR = "op-" + "0123456789abcdef" * 2  # the dashboard's own operator token
NO_SECRETS = ("PANIO_BROKER", "PANIO_RESULTS_URL", "PANIO_REDIS_URL", "PANIO_SIGNING_KEY", "PANIO_SIGNING_CERT",
              "PANIO_CERT_STORE", "PANIO_LAB", "PANIO_DASHBOARD_TOKEN", "PANIO_DASHBOARD_READ_TOKEN")


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    """A real `panio dashboard` over the embedded default (no broker: the controller runs jobs itself), with a
    lab of pico (tag pi5) and qemu, and a token of each kind."""
    root = tmp_path_factory.mktemp("apilab")
    (root / "home").mkdir()
    lab = Panio(root)
    for name in NO_SECRETS[:6]:
        lab.env.pop(name, None)
    lab("init")
    lab("target", "add", "pico", "--tag", "pi5")
    lab("target", "add", "qemu", "--tag", "sim")
    made = {name: lab("token", "add", name, *how, "--json").json()["token"] for name, how in {
        "ci-fw": ("--scope", "submitter", "--tag", "pi5"), "ci-qemu": ("--scope", "submitter", "--target", "qemu"),
        "reader": ("--scope", "reader",), "gone": ("--scope", "operator",)}.items()}
    lab("token", "rm", "gone")
    d = DashboardProc({**lab.env, "PANIO_DASHBOARD_TOKEN": OPERATOR}, root / "dashboard.log")
    yield d, lab, made
    d.stop()


def ci(tmp_path: Path, url: str, token: str) -> Panio:
    """A CI job's `panio`: a fresh home and state, none of the lab's variables, only the controller and a token."""
    (tmp_path / "home").mkdir(parents=True, exist_ok=True)
    p = Panio(tmp_path)
    for name in NO_SECRETS:
        p.env.pop(name, None)
    p.env.update(PANIO_CONTROLLER=url, PANIO_TOKEN=token, PANIO_LAB=str(tmp_path / "no-lab.toml"))
    return p


def call(url: str, method: str, path: str, token: str | None = None, body: bytes | None = None):
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(url + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text.startswith(b"{") else text


def test_ci_submits_and_follows_a_job_with_nothing_but_the_controller_url_and_a_token(controller, tmp_path):
    d, lab, tokens = controller
    runner = ci(tmp_path, d.url, tokens["ci-fw"])
    path = job_file(tmp_path, PING, "smoke.toml")
    queued = runner("job", "submit", path, "--json").json()
    assert queued["target"] == "pico"
    job_id = str(queued["job_id"])
    done = wait_for(lambda: (j := runner("job", "status", job_id, "--json").json())["state"] == "done" and j)
    assert (done["health"], done["result"]) == ("complete", "passed")
    assert "passed" in runner("job", "status", job_id).out
    assert queued["job_id"] in [j["id"] for j in runner("job", "list", "--json").json()]
    assert "step-01.log" in runner("job", "artifacts", job_id).out
    assert "seq=2" in runner("job", "logs", job_id, "--step", "1").out
    # the same job, seen on the controller itself
    assert lab("job", "status", job_id, "--json").json()["result"] == "passed"

    # --wait and `job run` exit as they do without a controller: 0 passed, 14 the board failed, with JUnit
    junit = tmp_path / "junit.xml"
    runner("job", "run", path, "--controller", d.url, "--junit", str(junit))
    assert "<testcase" in junit.read_text()
    failed = runner.fails("job", "submit", job_file(tmp_path, FAILING, "fail.toml"), "--wait", code=14)
    assert "seq=9" in failed.out + failed.err
    # nothing of the lab was made or needed here: no results database, no keys
    assert not (tmp_path / "state" / "results.db").exists() and not (tmp_path / "state" / "keys").exists()


def test_a_token_is_refused_outside_its_scope_with_the_reason(controller, tmp_path):
    d, _, tokens = controller
    path = job_file(tmp_path, PING, "smoke.toml")
    r = ci(tmp_path, d.url, tokens["reader"]).fails("job", "submit", path, code=13)
    assert "reader" in r.error["message"]
    r = ci(tmp_path, d.url, tokens["ci-qemu"]).fails("job", "submit", path, code=13)
    assert "may submit only to targets qemu" in r.error["message"] and "pico" in r.error["message"]
    r = ci(tmp_path, d.url, tokens["gone"]).fails("job", "submit", path, code=13)
    assert "revoked" in r.error["message"]
    r = ci(tmp_path, d.url, "panio_" + "x" * 43).fails("job", "list", code=11)
    assert r.error["error"] == "auth_failed"
    body = json.dumps({"toml": (tmp_path / "smoke.toml").read_text()}).encode()
    assert call(d.url, "POST", "/api/v1/jobs", tokens["reader"], body)[0] == 403
    assert call(d.url, "POST", "/api/v1/jobs", tokens["gone"], body)[0] == 403
    status, answer = call(d.url, "POST", "/api/v1/jobs", None, body)
    assert status == 401 and answer["error"] == "auth_failed"
    # a submitter cancels only on its own targets; a reader never
    queued = ci(tmp_path, d.url, tokens["ci-fw"])("job", "submit", path, "--json").json()
    for who in ("ci-qemu", "reader"):
        r = ci(tmp_path, d.url, tokens[who]).fails("job", "cancel", str(queued["job_id"]), code=13)


def test_many_pipelines_sending_one_job_file_at_once_each_get_their_answer(controller):
    """Job files of one name checked at once in the API's threads (CI pipelines of one repository): each gets its
    own answer. A check budget shared by the file's name answered 500 under 16 submitters (benchmarks/api_cpu.py).
    Refused here for the token's allow list, after the file is checked, so nothing is queued."""
    import threading

    d, _, tokens = controller
    body = json.dumps({"toml": PING + "expect_output = 'seq=2'\n", "file": "smoke.toml"}).encode()
    statuses: list[int] = []

    def submit() -> None:
        for _ in range(25):
            statuses.append(call(d.url, "POST", "/api/v1/jobs", tokens["ci-qemu"], body)[0])

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [403] * 200, sorted(set(statuses))


def test_bad_input_gets_the_message_job_check_gives_and_a_status(controller, tmp_path):
    d, lab, tokens = controller
    bad = job_file(tmp_path, "name = 'x'\ntarget = 'pico'\n[[steps]]\nrun = 'panio target add other'\n", "bad.toml")
    here = lab.fails("job", "check", bad, code=5)
    there = ci(tmp_path, d.url, tokens["ci-fw"]).fails("job", "submit", bad, code=5)
    assert there.err == here.err
    typo = job_file(tmp_path, "name = 'x'\ntarget = 'pico'\n[[steps]]\nrun = 'ping ${target}'\ntimeout = 3\n", "t.toml")
    assert (ci(tmp_path, d.url, tokens["ci-fw"]).fails("job", "submit", typo, code=5).err
            == lab.fails("job", "check", typo, code=5).err)
    status, answer = call(d.url, "POST", "/api/v1/jobs", tokens["ci-fw"], b"{not json")
    assert status == 400 and "not JSON" in answer["message"]
    # 10 MB announced: refused on its length alone, before a byte of it is read
    conn = http.client.HTTPConnection(d.url.removeprefix("http://"), timeout=30)
    conn.putrequest("POST", "/api/v1/jobs")
    for name, value in (("Authorization", f"Bearer {tokens['ci-fw']}"), ("Content-Length", str(10 << 20))):
        conn.putheader(name, value)
    conn.endheaders()
    assert conn.getresponse().status == 413
    conn.close()
    # a stranger's body that keeps coming: refused for its token, without waiting for the rest
    conn = http.client.HTTPConnection(d.url.removeprefix("http://"), timeout=30)
    conn.putrequest("POST", "/api/v1/jobs")
    for name, value in (("Authorization", "Bearer panio_" + "y" * 43), ("Transfer-Encoding", "chunked")):
        conn.putheader(name, value)
    conn.endheaders()
    conn.send(b"10\r\n" + b"{" * 16 + b"\r\n")  # one chunk of an endless body
    assert conn.getresponse().status == 401
    conn.close()
    huge = job_file(tmp_path, PING + "#" * (2 << 20) + "\n", "huge.toml")
    assert "more than the controller takes" in ci(tmp_path, d.url, tokens["ci-fw"]).fails(
        "job", "submit", huge, code=2).error["message"]
    assert call(d.url, "GET", "/api/v1/jobs/999999", tokens["reader"])[0] == 404
    ci(tmp_path, d.url, tokens["reader"]).fails("job", "status", "999999", code=3)
    # a client that sends half a request and waits ties up nothing: the controller keeps serving others
    slow = socket.create_connection(("127.0.0.1", int(d.url.rsplit(":", 1)[1])), timeout=30)
    try:
        slow.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 900\r\n\r\n{\"toml\": ")
        assert call(d.url, "GET", "/api/v1/jobs?limit=1", tokens["reader"])[0] == 200
        assert call(d.url, "GET", "/api/v1/jobs?limit=%C2%B2", tokens["reader"])[0] == 400  # "²" is no number
    finally:
        slow.close()


def test_a_target_the_controllers_lab_lacks_is_said_as_the_controllers_to_the_ci_side(controller, tmp_path):
    """A CI runner naming a target or tag the controller's lab has not: the error says it is the controller's lab,
    lists only the targets the token may use, and neither names the lab file's path on the controller nor tells
    the runner to add a target or set PANIO_LAB (the operator's, not CI's)."""
    d, _, tokens = controller
    runner = ci(tmp_path, d.url, tokens["ci-qemu"])
    path = job_file(tmp_path, PING, "smoke.toml")
    for argv, said in ((["job", "submit", path, "--target", "ghost"], "has no target 'ghost'"),
                       (["job", "submit", job_file(tmp_path, "name = 'x'\ntags = ['nope']\n[[steps]]\n"
                                                   "run = 'ping ${target} --count 1'\n", "tagged.toml")],
                        "carries tags nope")):
        r = runner.fails(*argv, code=3)
        assert said in r.error["message"] and "controller's lab" in r.error["message"], r.error
        assert r.error["known"] == ["qemu"]  # pico is the lab's too, but not this token's
        assert "lab.toml" not in r.out + r.err and "PANIO_LAB" not in r.err and "target add" not in r.err


def test_the_dashboards_tokens_work_on_the_api_and_an_api_token_opens_no_page(controller):
    d, _, tokens = controller
    assert call(d.url, "GET", "/api/v1/jobs?limit=1", OPERATOR)[0] == 200
    page = urllib.request.Request(d.url + "/jobs", headers={"Authorization": f"Bearer {tokens['reader']}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(page, timeout=30)
    assert refused.value.code == 401
    # breaking a lease is an operator's: a submitter is refused, an unknown target is 404
    status, answer = call(d.url, "POST", "/api/v1/targets/pico/break-lease", tokens["ci-fw"])
    assert status == 403 and "only an operator" in answer["message"]
    assert call(d.url, "POST", "/api/v1/targets/nope/break-lease", OPERATOR)[0] == 404
    status, answer = call(d.url, "POST", "/api/v1/targets/pico/break-lease", OPERATOR)
    assert status == 200 and answer["message"] == "pico is not leased"


def test_the_openapi_description_is_the_routes_served(controller):
    from controller.dashboard.api import routes

    d, _, _ = controller
    with urllib.request.urlopen(d.url + "/api/v1/openapi.json", timeout=30) as r:
        described = json.loads(r.read())
    assert described["openapi"].startswith("3.1")
    served = {(re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path), method.lower())
              for route in routes(None) for method in route.methods if method != "HEAD"}
    assert served == {(path, method) for path, ops in described["paths"].items() for method in ops}


def test_ci_runs_a_suite_through_the_controller(controller, tmp_path):
    d, lab, tokens = controller
    runner = ci(tmp_path, d.url, tokens["ci-fw"])
    job_file(tmp_path, PING.replace("target = 'pico'\n", ""), "smoke.toml")
    mine = job_file(tmp_path, "name = 'night'\njobs = ['smoke.toml']\ntags = ['pi5']\n", "mine.toml")
    junit = tmp_path / "suite.xml"
    out = runner("suite", "run", mine, "--junit", str(junit)).out
    assert "suite night: 1 job" in out and "complete, passed" in out
    assert junit.read_text().count("<testcase") == 1
    # a suite that reaches outside the token's allow list queues nothing
    before = len(lab("job", "list", "--json", "--limit", "500").json())
    wide = job_file(tmp_path, "name = 'wide'\njobs = ['smoke.toml']\ntargets = ['pico', 'qemu']\n", "wide.toml")
    assert "qemu" in runner.fails("suite", "run", wide, code=13).error["message"]
    assert len(lab("job", "list", "--json", "--limit", "500").json()) == before
    # a job file it names that is missing: the suite file's error, as `suite check` says it
    gone = job_file(tmp_path, "name = 'gone'\njobs = ['nope.toml']\ntags = ['pi5']\n", "gone.toml")
    assert runner.fails("suite", "run", gone, code=5).err == lab.fails("suite", "check", gone, code=5).err


def test_with_a_broker_the_controller_queues_to_the_hosts_worker(panio, tmp_path):
    workers = Workers(tmp_path / "lab", SHARED_REDIS)
    (tmp_path / "lab").mkdir()
    worker_lab(panio, workers, host="h1", targets=("t1",))
    panio("target", "set", "t1", "--tag", "pi5")
    token = panio("token", "add", "ci-fw", "--scope", "submitter", "--tag", "pi5", "--json").json()["token"]
    workers.start("h1")
    d = DashboardProc(panio.env, tmp_path / "dashboard.log")
    try:
        runner = ci(tmp_path / "ci", d.url, token)
        junit = tmp_path / "ci" / "junit.xml"
        out = runner("job", "run", job_file(tmp_path, PING.replace("'pico'", "'t1'")), "--junit", str(junit)).out
        assert "on host.h1" in out  # exit 0: passed
        job = workers.store().job(int(out.split("queued job ")[1].split()[0]))
        assert job["worker"].startswith("worker h1@") and (job["health"], job["result"]) == ("complete", "passed")
        assert "<testcase" in junit.read_text()
    finally:
        d.stop()
        workers.stop_all()
        drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])


def _refused(store, secret: str) -> str | None:
    try:
        store.check(secret)
    except Refused as err:
        return "revoked" if "revoked" in err.message else err.message
    return None


def test_tokens_live_in_postgresql_too(panio):
    url = pg_schema()
    try:
        panio.env["PANIO_RESULTS_URL"] = url
        secret = panio("token", "add", "ci-pg", "--scope", "reader", "--json").json()["token"]
        from controller.api.tokens import TokenStore, digest

        store = TokenStore(url)
        assert store.check(secret)["name"] == "ci-pg"
        with store.engine.connect() as c:
            assert [tuple(r) for r in c.exec_driver_sql("SELECT hash FROM panio_api_tokens")] == [(digest(secret),)]
        panio("token", "rm", "ci-pg")  # another process: this one's kept check is trusted for at most CHECKED_FOR_S
        assert wait_for(lambda: _refused(store, secret), timeout_s=1.0, every_s=0.05) == "revoked"
        # revoked in this process: at once, whatever this process checked just before
        other = store.add("ci-pg-2", "reader")[0]
        assert store.check(other)["name"] == "ci-pg-2"
        store.revoke("ci-pg-2")
        with pytest.raises(Refused, match="revoked"):
            store.check(other)
    finally:
        from bench_agent.results.db import dispose

        dispose(url)
        drop_pg_schema(url)


def test_without_a_broker_a_targets_jobs_run_on_one_thread_in_the_order_they_came(controller, tmp_path):
    d, lab, tokens = controller
    runner = ci(tmp_path, d.url, tokens["ci-qemu"])
    slow = job_file(tmp_path, "target = 'qemu'\n[[steps]]\nrun = 'ping ${target} --count 10 --interval 0.1'\n")

    def threads() -> int:
        status = Path(f"/proc/{d.proc.pid}/status").read_text()
        return int(status.split("Threads:")[1].split()[0])

    runner("job", "list", "--limit", "1")  # the server's request threads are up
    before = threads()
    ids = [runner("job", "submit", slow, "--json").json()["job_id"] for _ in range(10)]
    # qemu's runner, its lease's keeper, the heartbeat, a request thread or two: not a runner (and more) a job
    assert threads() - before <= 5
    jobs = wait_for(lambda: all((j := [lab("job", "status", str(i), "--json").json() for i in ids])[k]["state"]
                                == "done" for k in range(len(ids))) and j, timeout_s=120, every_s=0.5)
    assert [(j["health"], j["result"]) for j in jobs] == [("complete", "passed")] * 10
    starts = [j["started_at"] for j in jobs]
    assert starts == sorted(starts)  # in the order they came


def test_reads_honour_the_tokens_allow_list(controller, tmp_path):
    """Issue 38: every token read every job. A token with an allow list (a submitter's, or a reader's given one) now
    reads only the jobs on its targets: 403 with the reason otherwise, and its lists hold only those."""
    d, lab, tokens = controller
    fw, qemu = ci(tmp_path, d.url, tokens["ci-fw"]), ci(tmp_path, d.url, tokens["ci-qemu"])
    on_pico = str(fw("job", "submit", job_file(tmp_path, PING, "p.toml"), "--json").json()["job_id"])
    on_qemu = str(qemu("job", "submit", job_file(tmp_path, PING.replace("'pico'", "'qemu'"), "q.toml"),
                       "--json").json()["job_id"])
    for job_id in (on_pico, on_qemu):
        wait_for(lambda: lab("job", "status", job_id, "--json").json()["state"] == "done", timeout_s=60)
    r = qemu.fails("job", "status", on_pico, code=13)
    assert "may read only the jobs on targets qemu" in r.error["message"] and "pico" in r.error["message"]
    for path in (f"/jobs/{on_pico}", f"/jobs/{on_pico}/artifacts", f"/jobs/{on_pico}/artifacts/step-01.log",
                 "/jobs?target=pico"):
        status, answer = call(d.url, "GET", "/api/v1" + path, tokens["ci-qemu"])
        assert status == 403 and answer["error"] == "refused", (path, status, answer)
    listed = {j["target"] for j in qemu("job", "list", "--json", "--limit", "500").json()}
    assert listed == {"qemu"}
    assert qemu("job", "status", on_qemu, "--json").json()["target"] == "qemu"
    assert fw.fails("job", "logs", on_qemu, code=13).error["error"] == "refused"
    # a reader without an allow list reads all; one given a tag reads those targets' jobs only
    reader = ci(tmp_path, d.url, tokens["reader"])
    assert {j["target"] for j in reader("job", "list", "--json", "--limit", "500").json()} >= {"pico", "qemu"}
    sim = ci(tmp_path, d.url, lab("token", "add", "sim-board", "--scope", "reader", "--tag", "sim",
                                  "--json").json()["token"])
    assert sim("job", "status", on_qemu, "--json").json()["result"] == "passed"
    assert "targets tagged sim" in sim.fails("job", "artifacts", on_pico, code=13).error["message"]
    lab.fails("token", "add", "wide-op", "--scope", "operator", "--target", "pico", code=2)


def test_schedules_through_the_controller(controller, tmp_path):
    """`panio schedule add|list|rm --controller`: the suite and its job files travel to the controller, which keeps
    them (checked) for `panio schedule serve`; a submitter only for a suite on its allow list, a reader never."""
    d, lab, tokens = controller
    runner = ci(tmp_path, d.url, tokens["ci-fw"])
    job_file(tmp_path, PING.replace("target = 'pico'\n", ""), "smoke.toml")
    mine = job_file(tmp_path, "name = 'night'\njobs = ['smoke.toml']\ntags = ['pi5']\n", "mine.toml")
    out = runner("schedule", "add", "fw-nightly", "--suite", mine, "--at", "02:00").out
    assert "scheduled fw-nightly on the controller: suite night (1 job) daily at 02:00" in out
    row = next(r for r in lab("schedule", "list", "--json").json() if r["name"] == "fw-nightly")
    kept = Path(row["suite"])
    assert kept.is_relative_to(Path(lab.env["PANIO_STATE_DIR"])) and (kept.parent / "smoke.toml").exists()
    assert oct(kept.parent.stat().st_mode & 0o777) == "0o700" and row["problem"] is None
    lab("suite", "check", str(kept))  # what the scheduler will fire
    assert "fw-nightly" in [r["name"] for r in runner("schedule", "list", "--json").json()]
    assert "every 6h" not in runner("schedule", "list").out and "fw-nightly" in runner("schedule", "list").out

    runner.fails("schedule", "add", "fw-nightly", "--suite", mine, "--every", "6h", code=6)  # its name is taken
    assert "reader" in ci(tmp_path, d.url, tokens["reader"]).fails(
        "schedule", "add", "r", "--suite", mine, "--at", "03:00", code=13).error["message"]
    qemu = ci(tmp_path, d.url, tokens["ci-qemu"])
    assert "pico" in qemu.fails("schedule", "add", "q", "--suite", mine, "--at", "03:00", code=13).error["message"]
    assert "pico" in qemu.fails("schedule", "rm", "fw-nightly", code=13).error["message"]
    qemu.fails("schedule", "rm", "nope", code=3)
    assert runner("schedule", "rm", "fw-nightly").out.strip() == "removed schedule fw-nightly"
    assert "fw-nightly" not in [r["name"] for r in lab("schedule", "list", "--json").json()]
    assert not kept.parent.exists()


def test_leases_through_the_controller_for_operators_only(controller, tmp_path):
    d, lab, tokens = controller
    fw, op = ci(tmp_path, d.url, tokens["ci-fw"]), ci(tmp_path, d.url, OPERATOR)
    long = PING.replace("--count 2", "--count 600 --interval 0.05")
    job_id = fw("job", "submit", job_file(tmp_path, long, "long.toml"), "--json").json()["job_id"]
    held = wait_for(lambda: [le for le in op("lease", "list", "--json").json() if le["target"] == "pico"],
                    timeout_s=60)
    assert held[0]["job"] == job_id and "secret" not in json.dumps(held)
    assert "only an operator" in fw.fails("lease", "list", code=13).error["message"]
    assert "only an operator" in fw.fails("lease", "break", "pico", code=13).error["message"]
    # the operator reaches the lab's store, whose answer it gets: without Redis a lease is a lock its holder (the
    # controller's own runner here) keeps until it ends, as `panio lease break` says on the controller itself
    r = op.fails("lease", "break", "pico", code=13)
    assert "a local lease ends only with its holder" in r.error["message"] and r.error["job"] == job_id
    fw("job", "cancel", str(job_id))
    job = wait_for(lambda: (j := lab("job", "status", str(job_id), "--json").json())["state"] == "done" and j,
                   timeout_s=60)
    assert job["health"] == "canceled", job
    assert [le for le in op("lease", "list", "--json").json() if le["target"] == "pico"] == []
