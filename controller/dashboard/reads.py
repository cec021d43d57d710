"""What the dashboard shows, read from the lab file, the results database, the lease store and the broker.

Each function returns plain data for one page section. Job queries are the
results store's own (``bench_agent.results.store``); jobs whose runner died are
shown settled, as ``panio job list`` shows them (``controller.jobs.control``).
"""

from __future__ import annotations

import threading
import time

from bench_agent.errors import PanioError
from controller import backends
from controller.jobs import control

WORKER_PING_S = 1.0
_PINGS: dict[str, tuple[float, dict[str, list[str]]]] = {}  # broker -> (when, host -> worker names)
PING_CACHE_S = 5.0
_PING_LOCK = threading.Lock()
_PINGING: dict[str, threading.Thread] = {}  # broker -> the thread pinging it now (one at a time)


def hosts(lab) -> list[dict]:
    """Each control host of the lab (and ``local``) with the workers that answered the last ping (seconds old)."""
    answering = workers()
    down = answering.why if isinstance(answering, BrokerDown) else None
    names = ["local", *lab.hosts]
    out = []
    for name in names:
        config = lab.hosts.get(name, {})
        out.append({"name": name, "ssh": config.get("ssh", ""), "transport": config.get("transport", "ssh"),
                    "targets": sorted(t for t, c in lab.targets.items() if (c.get("host") or "local") == name),
                    "workers": answering.get(name, []) if answering is not None else None, "broker_down": down})
    return out


def workers() -> dict[str, list[str]] | None:
    """Host name -> names of its `panio worker` processes that answered a Celery ping; None without a broker.

    A Celery ping always waits its whole timeout (it cannot know how many workers will answer), so no page
    waits for one: a page shows the last answer (at most ``PING_CACHE_S`` old, or the ping's timeout more)
    and a stale answer is refreshed in a background thread. Only the first page of a server, before any answer,
    waits for the ping that ``ping_soon`` started when the server did (issue 27: `/` took 1-1.3 s every time)."""
    url = backends.broker_url()
    if not url:
        return None
    cached = _PINGS.get(url)
    thread = ping_soon(url)
    if cached is None and thread is not None:
        thread.join()
        cached = _PINGS.get(url)
    return cached[1] if cached else BrokerDown("no answer to the worker ping yet")


def ping_soon(url: str | None = None) -> threading.Thread | None:
    """Start a background ping of the workers of ``url`` (default the configured broker) unless the last answer
    is fresh or one is under way; the thread that is pinging, if any."""
    url = url or backends.broker_url()
    if not url:
        return None
    with _PING_LOCK:
        cached, thread = _PINGS.get(url), _PINGING.get(url)
        if thread is not None and thread.is_alive():
            return thread
        if cached and time.monotonic() - cached[0] < PING_CACHE_S:
            return None
        thread = _PINGING[url] = threading.Thread(target=_ping, args=(url,), name="panio-dashboard-ping",
                                                  daemon=True)
        thread.start()
        return thread


class BrokerDown(dict):
    """No worker can answer: the broker itself does not (the page says so instead of "none")."""

    def __init__(self, why: str) -> None:
        super().__init__()
        self.why = why


def _ping(url: str) -> None:
    """Ping the workers of ``url`` and keep the answer in ``_PINGS`` (a failure is kept as ``BrokerDown``)."""
    try:
        _reachable(url)  # fast: Celery's own publish retries for seconds against a broker that is down
        replies = _celery(url).control.ping(timeout=WORKER_PING_S)
    except Exception as exc:  # noqa: BLE001 - a broker that fails shows on the page, not as a crash
        _PINGS[url] = (time.monotonic(), BrokerDown(str(exc).splitlines()[0][:200]))
        return
    by_host: dict[str, list[str]] = {}
    for reply in replies:
        for name in reply:  # "<host>.<pid>@<machine>" (bench_agent.jobs.worker.run)
            by_host.setdefault(name.split("@", 1)[0].rsplit(".", 1)[0], []).append(name)
    _PINGS[url] = (time.monotonic(), by_host)


def _reachable(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=WORKER_PING_S, socket_timeout=WORKER_PING_S)
    try:
        client.ping()
    finally:
        client.close()


_APPS: dict[str, object] = {}


def _celery(url: str):
    """One Celery app (and connection pool) per broker for the life of the server, not one per ping."""
    if url not in _APPS:
        _APPS[url] = backends.celery_app()
    return _APPS[url]


def targets(lab, store) -> list[dict]:
    """Each target with its host, lease holder, health (when recorded) and last job."""
    names = sorted(lab.targets)
    held = _leases()
    leases = {h["target"]: h for h in held} if held is not None else {t: {"unknown": True} for t in names}
    last = store.last_jobs(names) if names else {}
    health = health_by_target(store)
    return [{"name": t, "host": lab.targets[t].get("host") or "local", "tags": lab.targets[t].get("tags", []),
             "lease": leases.get(t), "health": health.get(t) if health is not None else None,
             "last_job": last.get(t)} for t in names]


def _leases() -> list[dict] | None:
    """Every lease held now; None if the lease store cannot be read (the page must not say "free")."""
    try:
        return backends.lease_store().list(retry_s=0)  # one try: the page says "unknown" now, not in 3 s
    except PanioError:
        return None


def break_lease(target: str, by: str) -> str:
    """Break ``target``'s lease (recorded with ``by``, as `panio lease break` does); what happened, in words."""
    record = backends.lease_store().break_(target, by)
    if record is None:
        return f"{target} is not leased"
    return f"broke the lease on {target} (was {record['was'].get('holder')}, job {record['was'].get('job')}); recorded"


def set_health(load_lab, target: str, health: str, reason: str, by: str) -> str:
    """An operator sets ``target``'s health, as `panio target health --set` does; what happened, in words."""
    from bench_agent.health.state import HealthStore
    from controller.jobs import health as controller_health

    _, record, check_later = controller_health.operator_set(load_lab(), HealthStore(backends.results_url()), target,
                                                            health, reason or None, by)
    if check_later:
        return f"{target}: maintenance lifted; its health check runs before the next job (health unknown until then)"
    return f"{target}: health set to {record['health']} ({record['reason']})"


HEALTH_TABLE = "panio_health"
_HEALTH: dict[str, object] = {}  # url -> the reflected table, built once (a new Table per call grows the engine's cache)


def _health_table(store):
    import sqlalchemy as sa

    if store.url not in _HEALTH:
        if not sa.inspect(store.engine).has_table(HEALTH_TABLE):
            return None  # not recorded yet: look again on the next page, it may appear
        _HEALTH[store.url] = sa.Table(HEALTH_TABLE, sa.MetaData(), autoload_with=store.engine)
    return _HEALTH[store.url]


def health_by_target(store) -> dict[str, dict] | None:
    """Each target's current health, if this database records device health; None if it does not.

    Device health is recorded by its own module (``panio_health``: target, health, reason, set_by, set_at);
    this only reads the table, so the dashboard shows health as soon as the database has it."""
    table = _health_table(store)
    if table is None:
        return None
    order = table.c["set_at"] if "set_at" in table.c else None
    with store.engine.connect() as c:
        rows = c.execute(table.select().order_by(order)).mappings().all()
    return {r["target"]: dict(r) for r in rows}  # oldest first: were there several rows, the newest wins


from bench_agent.results.read import JOB_FILTERS  # noqa: E402 - the filters the store indexes


def jobs(store, filters: dict[str, str], limit: int = 50, before: int | None = None) -> list[dict]:
    """Jobs newest first, filtered by any of ``JOB_FILTERS``."""
    wanted = {k: v for k, v in filters.items() if k in JOB_FILTERS and v}
    return control.list_settled(store, limit=limit, before=before, **wanted)


def queue(store) -> list[dict]:
    """Jobs not done yet, oldest first, settled (a job whose runner died is not shown as running)."""
    return [j for j in control.settled(store, store.active_jobs()) if j["state"] != "done"]


def job(store, job_id: int) -> dict:
    """One job, settled, with its steps and artifacts (JUnit once it is done)."""
    from controller.jobs import report

    from bench_agent.jobs.steps import command_line, known_variables

    found = control.reconciled(store, job_id)
    artifacts = store.list_artifacts(job_id)
    if found["state"] == "done":
        artifacts["junit.xml"] = report.junit(found)
    known = known_variables(job_id, found["target"])
    planned = [command_line(s, known) for s in found["spec"].get("steps", [])]
    return {**found, "artifacts": artifacts, "planned": planned, "events": store.events(job_id)}


def serial_log(lab, job: dict) -> dict[str, str]:
    """The target's serial log over the job's window, per interface.

    A finished job saved it as the artifacts ``serial-<iface>.log``; a running job's is read live from the
    target's host, lines since the job took its lease. Reading a log changes nothing, so it goes to the
    host directly (its lease guard lets reads through), not through the lease check of a target's commands."""
    saved = {n[len("serial-"):-len(".log")]: c for n, c in job["artifacts"].items()
             if n.startswith("serial-") and n.endswith(".log")}
    if job["state"] != "running" or saved:
        return saved
    return capture_window(lab, job, tail=2000)


def runner_died(job: dict) -> bool:
    """Whether a reconciler settled ``job`` because its runner died (``reconcile.LOST``): any serial log it has
    was read from the capture (``controller.jobs.lost_window``), not saved by its runner."""
    from bench_agent.jobs.reconcile import LOST

    return isinstance(job.get("error"), dict) and job["error"].get("message") == LOST["message"]


def capture_window(lab, job: dict, tail: int | None = None) -> dict[str, str]:
    """``controller.jobs.lost_window.capture_window``: read only, as a page's GET must be."""
    from controller.jobs.lost_window import capture_window

    return capture_window(lab, job, tail)


_SCHEDULES: dict[str, object] = {}


def schedules() -> list[dict]:
    from controller.jobs.schedules import ScheduleStore

    url = backends.results_url()
    if url not in _SCHEDULES:  # built once: see Dashboard.store
        _SCHEDULES[url] = ScheduleStore(url)
    return _SCHEDULES[url].list()
