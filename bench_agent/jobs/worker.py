"""The bench worker of one control host: a Celery worker on queue ``host.<name>``.

Configured for hardware, not throughput:

* signed JSON only (``bench_agent.jobs.signing``): a payload is plain data, never pickle, and a
  message nobody trusted signed is refused before it is decoded; one that is not even a message is
  dropped, never the worker's end (``bench_agent.jobs.intake``);
* prefetch 1 and ``acks_late``: a worker reserves no more than it can start;
* one pool thread a target at most: a job whose target another job of this worker holds (waiting for its
  lease, or running) waits in that target's line without a thread, taken for this worker in the results
  database, its message acknowledged; the thread holding the target runs it next. A slow or panicking
  board's jobs never fill the pool while a healthy board of the same host has a job queued (issue 43);
* timeouts are enforced inside the task by the job runner (Celery's own time
  limits do not fire in the solo or thread pools);
* Redis redelivers an unacknowledged task after the visibility timeout, so a
  long job *will* be delivered twice: the results database (a runner *takes*
  a queued job, then claims it queued -> running) and the target's lease
  decide who runs it, never the ack. A copy of a job someone holds is dropped;
* the broker is not the record of what is queued, the results database is:
  every worker runs a reconciler (``bench_agent.jobs.reconcile``) that sends
  again a job whose worker died while it waited for its lease (it starts as
  soon as the target is free, not after the visibility timeout) or whose
  message vanished with a Redis that lost its data, and ends a job whose
  runner is proven dead. It sends again only the message the controller
  signed, kept with the job (``bench_agent.jobs.sealed``): it never signs one;
* operations (``panio.op``) come on a queue of their own, ``host.<name>.ops``, served by a thread
  apart from the job pool (``bench_agent.jobs.op_server``): never behind running jobs;
* ``--events`` (``panio worker --events``) turns on Celery's task events and
  worker heartbeats so Flower can follow the workers (docs/monitoring.md).

The task runs each step in this process (``bench_agent.jobs.runner``): the
step's compiled runtime command through the local ops layer, which checks the
job's lease and fencing token before any side effect. No lab file is written
and no child ``panio`` is started for a step; the worker imports nothing from
``controller``.

Commands never travel on the broker: the worker serves only the targets of its
host's own configuration (``HostConfig``, the lab file ``panio setup``
installed on the host), and every operation a message asks for takes its
hooks, actions and devices from that file (``bench_agent.jobs.host_config``).
Messages are signed (``bench_agent.jobs.signing``): a worker refuses one it
cannot verify before it is decoded.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_agent.jobs import OP_TASK, TASK, queue_name
from bench_agent.jobs.celery_app import DEFAULT_VISIBILITY_S, INTAKE, for_host, make_app, per_host_keys  # noqa: F401

if TYPE_CHECKING:
    from bench_agent.jobs.host_config import HostConfig

class WorkerContext:
    """What a running worker needs to run a job: passed in by ``panio worker``; the targets it serves and
    their configuration come from ``config``, the host's own lab file, never from a message."""

    def __init__(self, host: str, results_url: str | None, redis_url: str, prefix: str, state_dir: Path,
                 config: HostConfig) -> None:
        self.host, self.results_url, self.redis_url, self.prefix = host, results_url, redis_url, prefix
        from bench_agent.jobs.replay import SeenNonces
        from bench_agent.jobs.started import StartedJobs

        self.state_dir, self.config = Path(state_dir), config
        self._in_flight: set[int] = set()
        self._turns: dict[tuple, collections.deque] = {}  # a target's jobs behind the one that holds its turn
        self._resend = None  # sends a job's kept message again (``start_reconciler``): what a stopping worker uses
        self._stopping = False
        self._seen = SeenNonces(self.state_dir / "ops-seen")
        self._started = StartedJobs(self.state_dir / "jobs-started")  # on the host: the database cannot erase it
        self._stores = None
        self._heartbeat = None
        self._lock = threading.Lock()

    def run_job(self, payload: dict) -> dict[str, Any] | None:
        """Run the job of ``payload`` in this pool thread, unless another job of this worker holds its target's
        turn (waits for its lease, or runs): then it waits in that target's line, held for this worker in the
        results database, and this thread is free at once for another target's job (``_in_line``). A job that
        comes while the worker stops is sent back to the queue at once (``_back_at_once``)."""
        # A redelivered copy of a job this process is already running (or waiting to lease, or has in a target's
        # line) is dropped at once instead of tying up a second pool thread.
        key = _turn_key(payload)
        with self._lock:
            if payload["job_id"] in self._in_flight:
                return None
            self._in_flight.add(payload["job_id"])
            stopping = self._handing_back()
            behind = key in self._turns
            if not behind and not stopping:
                self._turns[key] = collections.deque()
        if stopping:
            return self._back_at_once(payload)
        if behind:
            return self._in_line(key, payload)
        try:
            return self._one(payload)
        finally:
            self._next_in_line(key)

    def stop_lines(self) -> None:
        """The worker stops (SIGTERM): the jobs waiting in a target's line go back to the queue at once, for the
        next worker, instead of keeping this one until each has run; the running jobs finish (a thread of its own:
        this comes from the signal handler). A reporting host (no ``_resend``) runs its lines to the end."""
        with self._lock:
            self._stopping = True
        if self._resend is not None:
            threading.Thread(target=self._hand_back_lines, name="panio-hand-back", daemon=True).start()

    def _handing_back(self) -> bool:
        """Whether the worker stops and gives its jobs not started back (a reporting host runs them); under
        ``_lock``."""
        return self._stopping and self._resend is not None

    def _take(self, payload: dict) -> bool:
        """Take ``payload``'s queued job for this worker in the results database; if a live runner holds it, it
        started, or it was canceled, it is not this worker's: False, and forgotten here."""
        from bench_agent.jobs.reconcile import dead_after_s

        store, _ = self.stores()
        if store.take(payload["job_id"], self.name, time.time() - dead_after_s(payload)):
            return True
        with self._lock:
            self._in_flight.discard(payload["job_id"])
        return False

    def _hand_back_lines(self) -> None:
        while True:
            with self._lock:
                line = next((line for line in self._turns.values() if line), None)
                if line is None:
                    return
                payload, _, _ = line.popleft()
            self._hand_back(payload)

    def _back_at_once(self, payload: dict) -> None:
        """The worker stops and Celery still delivers (the message in flight as the consumer stops, often one
        this worker just sent back): the job is neither started nor lined but taken for this worker, so that only
        one sends it, and sent back to the queue for the next worker."""
        if self._take(payload):
            self._hand_back(payload, "delivered after its stop began")

    def _hand_back(self, payload: dict, why: str | None = None) -> None:
        """Give a job waiting in line back: not this worker's any more in the results database, and its kept
        message (the controller's, ``sealed``) sent again. Should either fail, a reconciler sends it again once
        this worker's beats stop, as for a job a dead worker held."""
        job_id, log = payload["job_id"], logging.getLogger("panio.worker")
        try:
            store, _ = self.stores()
            if store.release(job_id, self.name, float("inf")):
                self._resend(store.job(job_id))
                log.warning("job %s: sent back to the queue: the worker stops (%s)", job_id,
                            why or f"it waited in {payload.get('target')}'s line")
        except Exception as exc:  # noqa: BLE001 - the database or broker away: the reconcilers' case
            log.warning("job %s: not sent back (%s: %s): a reconciler sends it again once this worker is gone",
                        job_id, type(exc).__name__, exc)
        finally:
            with self._lock:
                self._in_flight.discard(job_id)
            if self._heartbeat is not None:
                self._heartbeat.discard(job_id)

    def _one(self, payload: dict) -> dict[str, Any] | None:
        try:
            return self._run_job(payload)
        finally:
            with self._lock:
                self._in_flight.discard(payload["job_id"])
            if self._heartbeat is not None:
                self._heartbeat.discard(payload["job_id"])  # beaten while it waited in line

    def _in_line(self, key: tuple, payload: dict) -> dict[str, Any] | None:
        """Another job of this worker holds ``key``'s target: ``payload``'s job waits behind it without a pool
        thread (issue 43: jobs waiting for a slow or panicking board's lease held every thread, and a healthy
        board on the same host idled). It is first taken for this worker in the results database and beaten
        with the jobs it runs, so its message can be acknowledged now: the results database, not the broker, is
        the record (a worker killed meanwhile is proven dead and the reconciler sends the job again, as for a
        job waiting for its lease). The thread that holds the target's turn runs it next (``_next_in_line``)."""
        if not self._take(payload):
            return None
        self._heartbeat.add(payload["job_id"])
        with self._lock:
            line = self._turns.get(key)
            if line is None:  # the target's job ended meanwhile: this one runs here
                self._turns[key] = collections.deque()
            else:
                line.append((payload, time.monotonic(), _task_request()))
                ahead = len(line) - 1
        if line is not None:
            _task_log().info("job %s: waits in %s's line (%s ahead of it, and the job holding it), no thread held",
                             payload["job_id"], key[1], ahead)
            return None
        try:
            return self._one(payload)
        finally:
            self._next_in_line(key)

    def _next_in_line(self, key: tuple) -> None:
        """Run the jobs waiting in ``key``'s line, in the order they came, then give the target's turn back. A job
        keeps what is left of its ``lease_wait_s`` (the time in line counts, as it did waiting in a thread)."""
        log = logging.getLogger("panio.worker")
        while True:
            with self._lock:
                line = self._turns[key]
                if not line:
                    del self._turns[key]
                    return
                payload, since, request = line.popleft()
                back = self._handing_back()
            if back:
                with _as_task(request):
                    self._hand_back(payload)
                continue
            left = max(0.0, payload.get("lease_wait_s", 300) - (time.monotonic() - since))
            try:
                with _as_task(request):  # its log lines carry its own task id, not the one of the job before it
                    self._one({**payload, "lease_wait_s": left})
            except Exception:  # noqa: BLE001 - said in the job (``_run_job``) and here; the line goes on
                log.exception("job %s (it waited in line for %s) failed", payload["job_id"], key[1])

    def stores(self):
        """One database engine, one Redis client and one heartbeat per worker, shared by its threads. Without a
        results URL the store reports to the controller instead (``reporting_stores``)."""
        from bench_agent.leases.redis_store import RedisLeaseStore
        from bench_agent.jobs.reconcile import Heartbeat

        from bench_agent import outage

        with self._lock:
            if self._stores is None:
                # the database or Redis away: the runner waits with its job and its lease, said once (issue 43)
                waits = outage.Outages(logging.getLogger("panio.worker").warning, f"worker {self.host}")
                if self.results_url:
                    from bench_agent.results.store import ResultStore

                    store = outage.patiently(lambda: ResultStore(self.results_url), waits)
                    leases = RedisLeaseStore(self.redis_url, self.prefix)
                else:
                    store, leases = self.reporting_stores()
                self._stores = (outage.Patient(store, waits, meanwhile={"cancel_requested": False}), leases)
                self._heartbeat = Heartbeat(store)  # a beat missed is missed: the next one tries again
        return self._stores

    def reporting_stores(self):
        """A host without the results database (issue 38): its runner's writes are signed reports to the
        controller's recorder, and the fencing marks are kept in its own state directory (``reporting``)."""
        from bench_agent.jobs import signing
        from bench_agent.leases.fences import FenceStore
        from bench_agent.leases.redis_store import RedisLeaseStore
        from bench_agent.private import open_private, private_dir
        from bench_agent.results.reporting import ReportingStore

        keys = signing.configured()
        if keys is None:
            from bench_agent.errors import NotConfigured

            raise NotConfigured("a worker without PANIO_RESULTS_URL signs its reports, and has no signing key",
                                hint=signing.HINT)
        fences = Path(private_dir(self.state_dir)) / "fences.db"
        os.close(open_private(fences, os.O_RDWR))
        marks = FenceStore(f"sqlite:///{fences}")
        store = ReportingStore(self.host, self.redis_url, self.prefix, self.state_dir, keys.key, marks)
        return store, RedisLeaseStore(self.redis_url, self.prefix, fences=marks)

    @property
    def name(self) -> str:
        return f"worker {self.host}@{socket.gethostname()}:{os.getpid()}"

    def _run_job(self, payload: dict) -> dict[str, Any] | None:
        from bench_agent.errors import PanioError
        from bench_agent.jobs.runner import JobRunner

        store, leases = self.stores()
        once = self._once(store, payload)
        if once is None:
            return None
        try:
            payload = self._as_configured(payload)
        except PanioError as err:  # not this host's target: the job ends saying so, nothing ran
            _log_event("job_refused", {"job_id": payload.get("job_id"), "reason": err.message})
            store.finish(payload["job_id"], "incomplete", None, err.message, err.to_json(), only_if_queued=True)
            return None
        from bench_agent.daemons import starter
        from bench_agent.jobs.runner import lab_caller

        lab = payload.get("lab_key")  # the job's lab: its target's leases and captures are that lab's
        try:
            with starter.for_job(payload["job_id"]):  # a capture a step starts is this worker's to stop
                return JobRunner(store, leases.for_lab(lab), self.name, _log_event, self._heartbeat,
                                 caller=lab_caller(lab), once=once).run(payload)
        except Exception as exc:  # a bug or a dead database: say so in the job rather than leave it running
            from bench_agent.errors import InternalError

            err = InternalError(f"the runner failed: {type(exc).__name__}: {exc}")
            try:
                store.finish(payload["job_id"], "incomplete", None, err.message, err.to_json(), only_if_running=True)
            except Exception:  # noqa: BLE001 - the database itself is away: a reconciler settles it later
                pass
            raise

    def _once(self, store, payload: dict):
        """The host's record of ``payload``'s job (``started.JobRecord``), which the runner makes as it claims the
        job; None when the job is refused here, whatever the results database says: its message is past its window,
        or this host started the job before (a job that ran, set back to queued). A refused job that nobody else
        holds ends refused, so it is not sent again; nothing of it runs."""
        from bench_agent.errors import PanioError, Refused
        from bench_agent.jobs.reconcile import dead_after_s
        from bench_agent.jobs.started import too_old

        why = too_old(payload)
        once = None if why else self._started.of(payload)
        try:
            started = once is not None and once.before()
        except PanioError as err:  # its folder is not this user's alone: no record can be trusted, nothing runs
            started, why = False, err.message
        if started:
            why = (f"host {self.host} started it before, from this very message (its own record, "
                   f"{once.jobs.folder}/): a job runs at most once on its host, whatever the results database says")
        if not why:
            return once
        err = Refused(f"not run: {why}", job=payload["job_id"])
        _log_event("job_refused", {"job_id": payload["job_id"], "reason": err.message})
        if store.take(payload["job_id"], self.name, time.time() - dead_after_s(payload)):  # not a live runner's
            store.finish(payload["job_id"], "incomplete", None, err.message, err.to_json(), only_if_queued=True)
        return None

    def call_op(self, op: str, args: dict, stamp: Any) -> dict[str, Any]:
        """One operation for the Celery transport, run once and in its window (``signing.check_fresh``); errors
        travel as data, like over SSH."""
        from bench_agent import ops
        from bench_agent.errors import reply
        from bench_agent.jobs.signing import check_fresh

        def run() -> Any:
            check_fresh(stamp, self._first_time, self.host)
            return ops.call(op, args)

        return reply(run)

    def _first_time(self, nonce: str, ttl_s: int) -> bool:
        return self._seen.first_time(nonce, ttl_s)  # on the host: a broker user cannot erase it (issue 45)

    def _as_configured(self, payload: dict) -> dict:
        """``payload`` with the target's configuration and the notification channels of this host's own file
        (what the runner reads for serial logs, the lab probe and screenshots); refused if the target is not
        this host's."""
        table = self.config.target(payload.get("target"))
        return {**payload, "target_config": table, "notify": self.config.notify()}

    def start_reconciler(self, app) -> threading.Thread | None:
        """Look for dead runners and vanished messages every ``RECONCILE_S`` while the worker lives."""
        from bench_agent.jobs import sealed, signing
        from bench_agent.jobs.reconcile import RECONCILE_S, BrokerView, Reconciler
        from celery.utils.log import get_logger

        log = get_logger("panio.reconcile")
        store, leases = self.stores()
        if not self.results_url:  # a reporting host reads no job rows: the controller's side reconciles (issue 38)
            return None
        keys = signing.configured()  # what a job's kept message must be signed by: it sends again, never signs
        self._resend = lambda job: sealed.send_again(app, store, job, keys)  # a stopping worker's lines too
        from bench_agent.jobs import lost_window

        rec = Reconciler(store, leases, resend=self._resend,
                         broker=BrokerView(self.redis_url, self.prefix, self.host), log=log.warning, host=self.host,
                         on_lost=lost_window.keeper(store, lost_window.on_this_host(self.config)))

        def loop() -> None:
            while True:
                time.sleep(RECONCILE_S)
                try:
                    rec.pass_()
                except Exception as exc:  # noqa: BLE001 - the database or broker away: try again next pass
                    log.info("reconcile pass failed: %s: %s", type(exc).__name__, exc)

        thread = threading.Thread(target=loop, name="panio-reconcile", daemon=True)
        thread.start()
        return thread


def _task_request() -> tuple | None:
    """(task, its request's id) of the Celery task this thread runs, if any."""
    from celery import current_task

    task = current_task._get_current_object() if current_task else None
    return (task, task.request.id) if task is not None else None


@contextlib.contextmanager
def _as_task(request: tuple | None):
    """This thread's Celery task seen as the request ``request`` (``_task_request``) while inside: Celery's task
    log lines name the task id of the request on top of the task's stack."""
    if request is None:
        yield
        return
    task, task_id = request
    task.push_request(id=task_id)
    try:
        yield
    finally:
        task.pop_request()


def _turn_key(payload: dict) -> tuple:
    """Whose turn a job waits for: its target's, in its lab (a lab's leases are its own)."""
    return payload.get("lab_key"), payload.get("target")


@functools.cache  # once per process: Celery's lookup re-parents the logger each time (four lines a job)
def _task_log():
    from celery.utils.log import get_task_logger

    return get_task_logger("panio.worker")


def _log_event(event: str, data: dict[str, Any]) -> None:
    """The worker's log: one line when a job starts, per step started and finished, and at its end."""
    log = _task_log()
    if event == "job_start":
        log.info("job %s: leased %s, running", data["job_id"], data["target"])
    elif event == "step_start":
        log.info("job step start: %s/%s %s", data["idx"] + 1, data["count"], data["command"])
    elif event == "step_end":
        log.info("job step end: %s %s %s", data["idx"] + 1, data["status"], data["command"])
    elif event == "job_refused":
        log.warning("job %s refused: %s", data["job_id"], data["reason"])
    elif event == "lease_retaken":
        log.warning("job %s: the lease on %s vanished (Redis lost it) and nobody took it since: retaken, token %s",
                    data["job_id"], data["target"], data["token"])
    elif event == "job_end":
        log.info("job %s: %s %s: %s", data["job_id"], data["health"], data["result"] or "", data["reason"])


def register_task(app, ctx: WorkerContext) -> None:
    @app.task(name=TASK, bind=True, acks_late=True)
    def run_job(self, payload: dict) -> dict[str, Any] | None:
        return ctx.run_job(payload)

    @app.task(name=OP_TASK, ignore_result=False, acks_late=False)
    def run_op(op: str, args: dict, stamp: dict | None = None) -> dict[str, Any]:
        return ctx.call_op(op, args, stamp)

    from celery.signals import worker_shutting_down

    worker_shutting_down.connect(lambda **_: ctx.stop_lines(), weak=False)  # the lines' jobs go back at once


def op_message(op: str, args: dict, wait_s: float, host: str) -> list:
    """The arguments of a ``panio.op`` task for ``host``: the operation, its arguments and the stamp a worker
    checks."""
    from bench_agent.jobs.signing import op_stamp

    return [op, args, op_stamp(wait_s, host)]


def run(ctx: WorkerContext, broker_url: str, concurrency: int, visibility_timeout_s: float,
        events: bool = False, insecure: bool = False) -> int:
    """Serve ``host.<name>`` until stopped (SIGTERM finishes the running jobs first); Celery's exit status
    (0 when stopped, 1 after an error it cannot recover from: a unit's ``Restart=on-failure`` restarts it).

    ``events``: send Celery task events and worker heartbeats (what Flower shows); off by default,
    as every event is a message through Redis. ``insecure``: serve unsigned JSON when no keys are
    configured (``panio worker --insecure-unsigned``)."""
    from bench_agent.jobs.host_config import install

    for url in dict.fromkeys((broker_url, ctx.redis_url)):
        _has_functions(url)
    logging.getLogger("celery.worker.request").addFilter(_AckLost())
    install(ctx.config)  # from now on every operation in this process obeys the host's own configuration
    app = make_app(broker_url, ctx.prefix, visibility_timeout_s, insecure, host=ctx.host)
    if events:
        app.conf.update(worker_send_task_events=True, task_send_sent_event=True)
    register_task(app, ctx)
    ctx.start_reconciler(app)
    from bench_agent.jobs import op_server
    from celery.utils.log import get_logger

    op_server.start(app, ctx.host, ctx.call_op, get_logger("panio.ops").warning)  # never behind the jobs
    try:
        # app.start, not app.worker_main: that one drops the status of a worker that stopped on an error
        return app.start([
            "worker", "-Q", queue_name(ctx.host), "-n", f"{ctx.host}.{os.getpid()}@{socket.gethostname()}",
            "--pool", "threads", "-c", str(concurrency), "--without-gossip", "--without-mingle",
            *([] if events else ["--without-heartbeat"]), "--loglevel", "INFO",
        ]) or 0
    finally:
        _stop_captures(ctx)


class _AckLost(logging.Filter):
    """kombu logs an acknowledgement that failed because the broker connection went (Redis restarted) as CRITICAL
    with a traceback, once a message. Nothing is lost: Redis delivers the message again once the worker is back,
    and a job that started is not run again (the host's own record, ``started``). Said in one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.CRITICAL and str(record.msg).startswith(("Couldn't ack", "Couldn't reject")):
            tag, exc = (tuple(record.args) + (None, None))[:2] if isinstance(record.args, tuple) else (None, None)
            record.msg, record.args = ("message %s not acknowledged, the broker connection went: %s; Redis "
                                       "delivers it again, and a job that started is not run again", (tag, exc))
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
        return True


def _has_functions(url: str | None) -> None:
    """Redis at ``url`` has panio's function library, or this worker's user loads it: else ``NotConfigured``
    (3) naming what loads it, before Celery starts (its consumer would stop on the first FCALL with a traceback).
    A Redis that does not answer yet is Celery's to wait for, as at any start."""
    if not url or not url.startswith(("redis://", "rediss://", "unix://")):
        return
    import redis

    from bench_agent import redis_functions

    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        redis_functions.ensure(client)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        pass
    finally:
        client.close()


def _stop_captures(ctx: WorkerContext) -> None:
    """The worker stops: so do the serial captures its jobs started on its host's targets. A capture an operator
    started (``panio serial watch``, even in the worker's state directory) is left running, and said so."""
    from bench_agent.daemons import registry

    try:
        stopped, left = registry.stop_captures_of(set(ctx.config.owned()), os.getpid())
    except Exception as exc:  # noqa: BLE001 - stopping anyway: say why the captures stay
        print(f"panio worker: the captures of host {ctx.host}'s targets were not stopped: {exc}", flush=True)
        return
    for entry in stopped:
        print(f"panio worker: stopped capture {entry.get('name')} (pid {entry.get('pid')})", flush=True)
    for entry in left:
        by = entry.get("started_by") or {}
        print(f"panio worker: left capture {entry.get('name')} (pid {entry.get('pid')}) running: "
              f"started by {by.get('kind', 'an older panio')}" + (f" pid {by['pid']}" if by.get("pid") else "")
              + ", not by this worker's jobs", flush=True)


def submit(app, payload: dict, host: str, task_id: str | None = None) -> str:
    """Queue ``payload`` for ``host``'s worker; returns the task id."""
    # ignore_result: the results database says how a job ended; without it Celery would subscribe to a result
    # that never comes, one more Redis round trip per job (and a subscription kept in a long-lived controller)
    from bench_agent.jobs.sealed import stamped

    result = for_host(app, host).send_task(TASK, args=[stamped(payload)], queue=queue_name(host), ignore_result=True,
                           task_id=task_id or f"panio-job-{payload['job_id']}")
    return result.id
