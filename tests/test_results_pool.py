"""Issue 38 item 4: only the controller's processes connect to the results database, each through one bounded pool.

Real parts: a PostgreSQL database of this module's own (so ``pg_stat_activity`` for it counts nothing of other
tests), the machine's Redis, four real `panio worker` processes for four hosts without PANIO_RESULTS_URL, and the
controller's `panio recorder`, `panio dashboard` and `panio schedule serve` with ``PANIO_RESULTS_POOL=1``. While
jobs run through every host (and the dashboard is read), the database's backends are sampled: each long-lived
controller process holds at most its pool (one), and no worker process ever holds a socket to PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from conftest import PANIO
from dashhelp import Client, DashboardProc
from jobhelp import PG_URL, job_file, wait_for
from peerhelp import SHARED_REDIS, drop_keys, use_lab
from reporthelp import Peers

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server not installed")

HOSTS = ("h1", "h2", "h3", "h4")
POOL = 1
SERVERS = ("panio-recorder", "panio-dashboard", "panio-schedule-serve")  # application_name of each
PG_PORT = 5432
JOB = "[[steps]]\nname = 'quick'\nrun = 'ping ${target} --count 3 --interval 0.05'\nexpect_output = 'seq=3'\n"


def admin():
    import psycopg

    try:
        return psycopg.connect(PG_URL.rsplit("/", 1)[0] + "/postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL not available: {exc}")


@pytest.fixture(scope="module")
def database():
    """A database of its own: every backend ``pg_stat_activity`` shows for it is one of this module's."""
    name = "pool_" + uuid.uuid4().hex[:10]
    with admin() as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield f"{PG_URL.rsplit('/', 1)[0]}/{name}"
    with admin() as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def backends(conn, db: str) -> list[tuple[str, int]]:
    """(application_name, client_port) of the database's client backends now."""
    return conn.execute("SELECT application_name, client_port FROM pg_stat_activity "
                        "WHERE datname = %s AND backend_type = 'client backend'", (db,)).fetchall()


def session_pids(sid: int) -> list[int]:
    """The processes of session ``sid`` (a worker and everything it started: ``start_new_session``)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[3]) == sid:
                found.append(int(entry))
    return found


def pg_sockets(pids: list[int]) -> list[str]:
    """The TCP connections to PostgreSQL's port held by ``pids`` (their socket inodes in /proc/net/tcp*)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    held = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == PG_PORT and fields[9] in inodes:
                held.append(line)
    return held


@pytest.fixture(scope="module")
def controller(tmp_path_factory, database):
    root = tmp_path_factory.mktemp("pool")
    p = Peers(root, hosts=HOSTS, PANIO_RESULTS_URL=database, PANIO_RESULTS_POOL=str(POOL))
    p.lab.write_text("")
    started: list = []
    try:
        for host in HOSTS:
            p.start(host, concurrency=1)
        p.start_recorder()
        env = {**os.environ, **p.env, "PANIO_STATE_DIR": str(root / "cstate"), "HOME": str(root),
               "PANIO_LAB": str(p.lab)}
        dash = DashboardProc(env, root / "dashboard.log")
        started.append(dash)
        sched = subprocess.Popen([PANIO, "schedule", "serve"], env=env, stdout=open(root / "schedule.log", "w"),
                                 stderr=subprocess.STDOUT, start_new_session=True)
        started.append(sched)
        p.dashboard = dash
        yield p
    finally:
        for proc in started:
            if isinstance(proc, DashboardProc):
                proc.stop()
            elif proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)
        p.stop_all()
        drop_keys(SHARED_REDIS, p.env["PANIO_REDIS_PREFIX"])
        from bench_agent.results.db import dispose

        dispose(database)


def test_the_database_sees_at_most_the_controllers_pools_and_no_worker(panio, controller, database, tmp_path):
    use_lab(panio, controller)
    for host in HOSTS:
        panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
        panio("target", "add", f"t{host}", "--host", host)
    db = database.rsplit("/", 1)[1]
    worker_sids = [w.pid for w in controller.procs]
    seen: dict[str, int] = {}  # application_name -> most backends at once
    servers_at_once = [0]
    worker_sockets: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        with admin() as conn:
            while not stop.is_set():
                now: dict[str, int] = {}
                for name, _port in backends(conn, db):
                    now[name] = now.get(name, 0) + 1
                for name, count in now.items():
                    seen[name] = max(seen.get(name, 0), count)
                servers_at_once[0] = max(servers_at_once[0], sum(now.get(name, 0) for name in SERVERS))
                for sid in worker_sids:
                    worker_sockets.extend(pg_sockets(session_pids(sid)))
                stop.wait(0.05)

    token = panio("token", "add", "pool-reader", "--scope", "reader", "--json").json()["token"]
    reads: list[int] = []

    def read_api() -> None:  # the dashboard's threads, each asking for a connection of its pool
        client = Client(controller.dashboard.url)
        while not stop.is_set():
            status, _headers, _body = client.get("/api/v1/jobs", Authorization=f"Bearer {token}")
            reads.append(status)

    threads = [threading.Thread(target=sample), *(threading.Thread(target=read_api) for _ in range(3))]
    for t in threads:
        t.start()
    try:
        ids = [panio("job", "submit", job_file(tmp_path, JOB, f"j{n}.toml"), "--target", f"t{host}", "--json")
               .json()["job_id"] for n in range(2) for host in HOSTS]
        for job_id in ids:
            job = wait_for(lambda: (j := panio("job", "status", str(job_id), "--json").json())["state"] == "done"
                           and j, timeout_s=120, every_s=0.3)
            assert (job["health"], job["result"]) == ("complete", "passed"), job
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert {job["worker"].split("@")[0] for job in (panio("job", "status", str(i), "--json").json() for i in ids)} \
        == {f"worker {host}" for host in HOSTS}  # every host ran jobs
    assert reads and set(reads) == {200}, set(reads)
    assert worker_sockets == [], "a worker process connected to PostgreSQL"
    servers = {name: seen.get(name, 0) for name in SERVERS}
    assert all(1 <= n <= POOL for n in servers.values()), (servers, seen)  # each used its pool, never beyond
    assert servers_at_once[0] <= POOL * len(SERVERS)
    others = {name for name in seen if name not in SERVERS}
    # besides the servers, only the operator's own commands (one connection each while they run)
    assert others <= {"panio-job-submit", "panio-job-status", "panio-token-add"}, seen


@pytest.fixture
def small_pool(monkeypatch, database):
    """The module's database through a pool of two, made fresh for the test (and closed after it)."""
    from bench_agent.results import db

    monkeypatch.setenv("PANIO_RESULTS_POOL", "2")
    url = database + "?connect_timeout=5"  # a URL of its own: a new engine, sized by the variable above
    yield url
    db.dispose(url)


def test_a_full_pool_makes_callers_wait_and_never_opens_more(small_pool, database):
    import sqlalchemy as sa

    from bench_agent.results.db import autocommit_for, engine_for
    from bench_agent.results.libpq import application_name

    me = application_name()  # this process's connections (the module's servers use the database too)
    engines = [engine_for(small_pool), engine_for(small_pool, relaxed=True), autocommit_for(small_pool),
               autocommit_for(small_pool, relaxed=True)]
    most, done, lock = [0], [], threading.Lock()

    def hold(n: int) -> None:
        with engines[n % 4].connect() as c:
            c.execute(sa.text("SELECT pg_sleep(0.2)"))
            with lock:
                done.append(n)

    def watch(stop: threading.Event) -> None:
        with admin() as conn:
            while not stop.is_set():
                mine = [r for r in backends(conn, database.rsplit("/", 1)[1]) if r[0] == me]
                most[0] = max(most[0], len(mine))
                stop.wait(0.02)

    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(stop,))
    watcher.start()
    callers = [threading.Thread(target=hold, args=(n,)) for n in range(8)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=60)
    stop.set()
    watcher.join(timeout=10)
    assert sorted(done) == list(range(8))  # everyone served, in turn
    assert most[0] == 2  # all four engines of the URL drew on one pool of two
    assert engine_for(small_pool).pool.size() == 2


def test_one_connection_commits_relaxed_for_the_relaxed_engines_and_durably_for_the_others(monkeypatch, database):
    import sqlalchemy as sa

    from bench_agent.results import db

    monkeypatch.setenv("PANIO_RESULTS_POOL", "1")
    url = database + "?connect_timeout=6"
    try:
        order = [db.autocommit_for(url, relaxed=True), db.engine_for(url), db.engine_for(url, relaxed=True),
                 db.autocommit_for(url), db.autocommit_for(url)]
        seen = []
        for engine in order:
            with engine.connect() as c:
                seen.append((c.execute(sa.text("SELECT pg_backend_pid()")).scalar(),
                             c.execute(sa.text("SHOW synchronous_commit")).scalar()))
        assert len({pid for pid, _ in seen}) == 1  # one connection throughout
        assert [mode for _, mode in seen] == ["off", "on", "off", "on", "on"]
    finally:
        db.dispose(url)


@pytest.mark.parametrize("value", ["0", "many", "-3", "1001"])
def test_a_pool_size_that_is_not_a_count_is_a_config_error(panio, database, value):
    panio.env.update({"PANIO_RESULTS_URL": database, "PANIO_RESULTS_POOL": value})
    r = panio.fails("token", "list", code=5)
    assert f"PANIO_RESULTS_POOL={value!r}: want a whole number of connections from 1 to 1000" in r.err


def test_the_light_reader_names_its_connection_as_the_pool_does(database):
    from bench_agent.results.libpq import LibpqConnection, application_name

    conn = LibpqConnection.connect(database)
    try:
        assert conn.rows("SHOW application_name", []) == [{"application_name": application_name()}]
    finally:
        conn.close()
    assert application_name(["/usr/bin/panio", "schedule", "serve", "--lab", "x"]) == "panio-schedule-serve"
    assert application_name(["/usr/bin/panio", "job", "status", "12"]) == "panio-job-status"
    assert application_name(["/opt/x/celery", "-A", "y"]) == "panio-celery"


def test_a_pool_of_one_serves_a_command_that_reads_twice(panio, database):
    """`token rm` of an unknown name lists the live ones for its hint: once its transaction is over, not inside it
    (inside, with a pool of one, it waited 30 s for its own connection and failed)."""
    panio.env.update({"PANIO_RESULTS_URL": database, "PANIO_RESULTS_POOL": "1"})
    panio("token", "add", "pool-one", "--scope", "reader")
    r = panio.fails("token", "rm", "no-such-token", code=3, timeout=20)
    assert "pool-one" in r.error.get("known", []) or "pool-one" in r.err, r.err


def test_a_request_that_finds_the_pool_busy_past_its_wait_gets_503_busy_not_500(panio, database, tmp_path):
    """The dashboard's one connection is held by a request stuck on a lock (a slow statement): another request
    waits ``PANIO_RESULTS_POOL_WAIT_S`` for it, then gets 503 ``busy`` (exit 8) with ``Retry-After``, never a
    500 with SQLAlchemy's TimeoutError; once the statement ends both are served again."""
    from bench_agent.results.store import ResultStore

    ResultStore(database).create_job("one", "t1", None, {"steps": []})
    Path(panio.env["PANIO_LAB"]).write_text("")
    panio.env["PANIO_RESULTS_URL"] = database
    token = panio("token", "add", "busy-reader", "--scope", "reader", "--json").json()["token"]
    env = {**panio.env, "PANIO_RESULTS_POOL": "1", "PANIO_RESULTS_POOL_WAIT_S": "1", "HOME": str(tmp_path)}
    dash = DashboardProc(env, tmp_path / "dashboard.log")
    bearer = {"Authorization": f"Bearer {token}"}
    stuck: list[int] = []
    try:
        assert Client(dash.url).get("/api/v1/jobs", **bearer)[0] == 200
        import psycopg

        with psycopg.connect(database, autocommit=True, connect_timeout=5) as locker:
            db = database.rsplit("/", 1)[1]
            with locker.transaction():
                locker.execute("LOCK TABLE panio_jobs IN ACCESS EXCLUSIVE MODE")
                slow = threading.Thread(target=lambda: stuck.append(Client(dash.url).get("/api/v1/jobs", **bearer)[0]))
                slow.start()
                wait_for(lambda: locker.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
                    (db,)).fetchone()[0] >= 1, timeout_s=30)  # the dashboard's only connection waits on the lock
                status, headers, body = Client(dash.url).get("/api/v1/jobs", **bearer)
                assert status == 503, (status, body)
                answer = json.loads(body)
                assert (answer["error"], answer["exit"]) == ("busy", 8) and "PANIO_RESULTS_POOL" in answer["message"]
                assert {k.lower(): v for k, v in headers.items()}.get("retry-after") == "1"
        slow.join(timeout=30)
        assert stuck == [200]
        assert Client(dash.url).get("/api/v1/jobs", **bearer)[0] == 200
        assert "Traceback" not in (tmp_path / "dashboard.log").read_text()
    finally:
        dash.stop()
