"""Who is alive: runners beat in the results database; a reconciler acts only on proven death.

Only a job's runner writes the verdict of a live job. Anyone may *reconcile*
(a worker's background thread, the controller following a suite, a reader
such as ``panio job status``), but only what is proven:

* a **running** job whose runner is dead: its lease no longer holds the job's
  fencing token *and* its process is provably gone (same machine, pid not
  running) or, on another machine, it has not beaten for ``dead_after_s``
  (on this machine, for three times that: a pid can be reused).
  The job ends ``incomplete`` ("worker lost"), the step it was running becomes
  an error with an unknown outcome, the steps after it are skipped;
* a **queued** job held by a dead worker (it was waiting for its lease): it is
  released and sent again, so another worker starts it as soon as the target
  is free, instead of after the broker's visibility timeout;
* a **queued** job whose broker message vanished (Redis restarted without
  persistence): not in its queue, not reserved by a worker, on two looks at
  least ``VANISH_GRACE_S`` apart: it is sent again;
* a **queued** job nobody took whose only message was delivered to a worker
  ``dead_after_s`` ago or more: the worker dropped it unstarted (its broker
  connection was lost while the message waited to start: Celery discards its
  reserved messages and cannot restore them to a Redis that is away; or it was
  killed with -9 between delivery and taking the job). The message stays in
  the broker's unacked set until the visibility timeout (300 s): it is sent
  again now instead;
* a **queued** job nobody holds whose run's deadline (``--deadline-s``) has
  passed: it ends ``timed_out`` and will never start.

Each action is a compare-and-set in the results database, so when several
reconcilers see the same death only one acts. A copy sent twice is harmless:
the results database's claim lets exactly one copy run a job.

"Sent again" is always the message the controller signed when it queued the
job, kept with it (``bench_agent.jobs.sealed``), published as it is: a
reconciler never signs a job. A queued row without such a message (one that
someone wrote into the results database), or whose message is not the
controller's for this very job, is refused: logged, ended ``incomplete``
(refused, exit 13), never sent.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from typing import Callable

from bench_agent.errors import Refused, Unreachable

BEAT_S = 1.0  # a runner's heartbeat period
SKEW_S = 1.0  # tolerated clock difference between machines
RECONCILE_S = 0.5  # how often a worker looks for dead runners and vanished messages
VANISH_GRACE_S = 2.0
LOST = {"error": "unreachable", "exit": 4, "message": "worker lost"}
DEADLINE_ERROR = {"error": "timeout", "exit": 22, "message": "deadline reached"}


def expire_unstarted(store, job_id: int) -> bool:
    """The run's deadline (``--deadline-s``) passed before the job started: it never will. The one place this is
    decided and worded, for the runner its message reached late, a reconciler and a follower (``job run``):
    the job ends ``timed_out`` if it is still queued, and a copy still in the broker is dropped when it arrives
    (cancel requested). True if this caller ended it."""
    if not store.finish(job_id, "timed_out", None, "the run's deadline passed before the job started",
                        DEADLINE_ERROR, only_if_queued=True):
        return False
    store.request_cancel(job_id)
    return True


def dead_after_s(spec: dict) -> float:
    """How long a runner on another machine may stay silent before it counts as dead."""
    return max(float(spec.get("lease_ttl_s") or 30), 3 * BEAT_S) + SKEW_S


class Heartbeat:
    """One thread per process beating every job that process holds (one UPDATE per beat)."""

    def __init__(self, store, every_s: float = BEAT_S) -> None:
        self.store, self.every_s = store, every_s
        self._ids: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, job_id: int) -> None:
        with self._lock:
            self._ids.add(job_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="panio-heartbeat", daemon=True)
                self._thread.start()

    def discard(self, job_id: int) -> None:
        with self._lock:
            self._ids.discard(job_id)

    def _loop(self) -> None:
        while True:
            time.sleep(self.every_s)
            with self._lock:
                ids = sorted(self._ids)
            if ids:
                try:
                    self.store.beat(ids)
                except Exception:  # noqa: BLE001 - a database hiccup: the next beat tries again
                    pass


_HOLDER_RE = re.compile(r"@([^@:\s]+):(\d+)$")


def process_state(worker: str | None) -> str:
    """'alive' or 'gone' for a runner on this machine (its pid), 'unknown' for one elsewhere."""
    m = _HOLDER_RE.search(worker or "")
    if not m or m.group(1) != socket.gethostname():
        return "unknown"
    try:
        stat = open(f"/proc/{m.group(2)}/stat", encoding="ascii").read()
    except OSError:
        try:
            os.kill(int(m.group(2)), 0)
        except ProcessLookupError:
            return "gone"
        except PermissionError:
            return "alive"
        return "alive"
    return "gone" if stat.rsplit(")", 1)[1].split()[0] == "Z" else "alive"  # a zombie is dead


def _of_lab(leases, job: dict):
    """The leases of the job's lab (its payload's ``lab_key``): a lab's leases are its own."""
    key = (job.get("spec") or {}).get("lab_key")
    return leases.for_lab(key) if key and hasattr(leases, "for_lab") else leases


def runner_dead(job: dict, leases, now: float) -> bool:
    """Proven dead: lease gone (for a running job) and the process gone or silent past ``dead_after_s``."""
    state = process_state(job.get("worker"))
    silent_s = now - (job.get("beat_at") or job.get("started_at") or job["created_at"])
    if state == "alive" and silent_s <= 3 * dead_after_s(job["spec"]):
        return False  # (a pid can be reused: a long silence outweighs a running process of that number)
    if state == "unknown" and silent_s <= dead_after_s(job["spec"]):
        return False
    if job["state"] == "running" and job.get("fence") is not None:
        held = _of_lab(leases, job).current(job["target"])  # Unreachable: cannot prove anything now
        if held and held.get("token") == job["fence"]:
            return False
    return True


class BrokerView:
    """Which jobs have a message in the broker: waiting in a ``host.*`` queue or reserved by a worker. ``host``
    (a worker's view, with keys per host: ``PANIO_BROKER_PER_HOST``): that host's own queue and unacknowledged
    messages only, the keys its broker user may read, by name (no SCAN)."""

    def __init__(self, redis_url: str, prefix: str, host: str | None = None) -> None:
        import redis

        from bench_agent.jobs import celery_keyprefix
        from bench_agent.jobs.celery_app import per_host_keys

        self.r = redis.Redis.from_url(redis_url, socket_timeout=3, socket_connect_timeout=3)
        self.per_host = per_host_keys()
        self.base = celery_keyprefix(prefix, host, self.per_host)
        self.host, self.prefix = (host if self.per_host else None), prefix
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

    def _read(self) -> tuple[list[bytes], dict, dict]:
        """The queued messages, the delivered ones (tag -> message) and when each was delivered (tag -> time)."""
        if self.host is not None:  # kombu's queue and its priority lists (sep \x06\x16, steps 3, 6, 9)
            queue = f"{self.base}host.{self.host}"
            queues = [queue, *(f"{queue}\x06\x16{step}" for step in (3, 6, 9))]
            hashes = [f"{self.base}unacked"]
        elif self.per_host:  # the controller: every host's part
            queues = list(self.r.scan_iter(match=f"{self.prefix}h.*:celery:host.*", count=500))
            hashes = list(self.r.scan_iter(match=f"{self.prefix}h.*:celery:unacked", count=500))
        else:
            queues = list(self.r.scan_iter(match=f"{self.base}host.*", count=500))
            hashes = [f"{self.base}unacked"]
        raw = [m for key in queues for m in self.r.lrange(key, 0, -1)]
        delivered, at = {}, {}
        for key in hashes:
            found = self.r.hgetall(key)
            if found:
                delivered.update(found)
                index = key.decode() if isinstance(key, bytes) else key
                at.update(self.r.zrange(f"{index}_index", 0, -1, withscores=True))
        return raw, delivered, at

    def pending(self) -> dict[int, float | None]:
        """Job id -> None for a message waiting in a queue, else when its newest copy was delivered to a
        worker (kombu's unacked set: the delivering worker's clock); a queued copy outweighs a delivered one."""
        try:
            raw, delivered, at = self._read()
        except self._errors as exc:
            raise Unreachable(f"broker unreachable: {exc}") from None
        out: dict[int, float | None] = {}
        for tag, m in delivered.items():
            job_id = _job_of(m)
            if job_id is not None:
                when = at.get(tag, 0.0)  # no index entry: kombu wrote the pair together, so it is old
                out[job_id] = max(when, out.get(job_id) or 0.0)
        for m in raw:
            job_id = _job_of(m)
            if job_id is not None:
                out[job_id] = None
        return out


def _job_of(message: bytes) -> int | None:
    found = re.search(rb'"id": ?"panio-job-(\d+)', message)
    return int(found.group(1)) if found else None


class Reconciler:
    """One pass settles what is proven. ``resend(job)`` publishes a job (its row) again (None: cannot): the
    message the controller sealed, kept with the job (``bench_agent.jobs.sealed.send_again``), never one it signs
    itself; it raises ``Refused`` for a row without one (the job then ends refused, and nothing is sent).
    ``broker`` (a ``BrokerView``) lets it find vanished messages. ``host``: send again only the jobs of that host
    (a worker's reconciler). ``on_lost(job_id)``: what else to keep of a job it just settled as lost (the
    controller keeps the capture's serial window: ``controller.jobs.lost_window``), so a reader never has to."""

    def __init__(self, store, leases, resend: Callable[[dict], None] | None = None,
                 broker: BrokerView | None = None, fail_unsendable: bool = False,
                 log: Callable[[str], None] = lambda msg: None, host: str | None = None,
                 on_lost: Callable[[int], None] | None = None) -> None:
        self.store, self.leases, self.resend, self.broker = store, leases, resend, broker
        self.fail_unsendable, self.log, self.host, self.on_lost = fail_unsendable, log, host, on_lost
        self._suspects: dict[int, tuple[float | None, float]] = {}
        self._looked_at = 0.0  # when the broker's queues were last read (at most once a second: they can be long)

    def pass_(self, ids: list[int] | None = None) -> None:
        now, pending, waiting = time.time(), None, set()
        for job in self.store.active_jobs(ids):
            if self._foreign(job):
                continue
            if job["state"] == "queued" and not job.get("worker") and _expired(job, now):
                expire_unstarted(self.store, job["id"])
            elif job["state"] == "running" or job.get("worker"):
                try:
                    if runner_dead(job, self.leases, now):
                        self._dead(job, now)
                except Unreachable:
                    continue  # Redis away: a lease cannot be judged right now
            elif self.broker is not None and self._sends(job) and job.get("sent_at"):
                waiting.add(job["id"])
                if pending is None:
                    pending = self._look()
                if pending is not False:
                    self._maybe_vanished(job, pending)
        self._forget(ids, waiting)

    def _forget(self, ids: list[int] | None, waiting: set[int]) -> None:
        """Drop the suspects of this pass (all, or ``ids``) that no longer wait for a worker: they started,
        ended or were withdrawn (a long-lived reconciler would otherwise keep every job it ever suspected)."""
        looked = list(self._suspects) if ids is None else [i for i in ids if i in self._suspects]
        for job_id in looked:
            if job_id not in waiting:
                del self._suspects[job_id]

    def _foreign(self, job: dict) -> bool:
        """Another host's job, for a worker whose broker user may not read that host's leases or queue (keys per
        host): that host's worker and the controller settle it."""
        own = getattr(self.broker, "host", None)
        return own is not None and (job.get("host") or "local") != own

    def _sends(self, job: dict) -> bool:
        return self.resend is not None and (self.host is None or (job.get("host") or "local") == self.host)

    def _look(self) -> dict[int, float | None] | bool:
        """The jobs with a message in the broker; False when it is away or was read less than a second ago."""
        if time.monotonic() - self._looked_at < VANISH_GRACE_S / 2:
            return False
        self._looked_at = time.monotonic()
        try:
            return self.broker.pending()
        except Unreachable:
            return False  # the broker is away: no message can be called vanished now

    def job(self, job: dict) -> dict:
        """Settle one job (readers); returns it as it now stands."""
        if job["state"] == "done":
            return job
        self.pass_([job["id"]])
        return self.store.job(job["id"])

    def _dead(self, job: dict, now: float) -> None:
        if job["state"] == "running":
            self._lost(job, now)
        elif self._sends(job) and job["spec"].get("via") == "broker":
            stale_before = float("inf") if _gone(job) else now - dead_after_s(job["spec"])
            if self.store.release(job["id"], job["worker"], stale_before):
                self._send(job, f"{_who(job)} died before it started")
        elif self.fail_unsendable:
            self.store.finish(job["id"], "incomplete", None, f"{_who(job)} died before the job started",
                              LOST, only_if_queued=True)

    def _lost(self, job: dict, now: float) -> None:
        reason = (f"{_who(job)} lost: it died while the job ran and its lease is gone; "
                  "the step it was running has an unknown outcome")
        from bench_agent.jobs.steps import command_line, known_variables

        check = {"check": "finished", "ok": False, "got": "worker lost", "outcome": "unknown"}
        known = known_variables(job["id"], job["target"])
        planned = [{"name": step["name"], "command": command_line(step, known)}
                   for step in job["spec"].get("steps", [])]
        if not self.store.finish_lost(job["id"], reason, LOST, [check], planned):
            return
        self.log(f"job {job['id']}: {_who(job)} lost")
        if self.on_lost is not None:
            self.on_lost(job["id"])
        self._tell(job, reason)

    def _tell(self, job: dict, reason: str) -> None:
        """Like the runner would have: the target's health becomes unknown (its health check runs before the
        next job) and the lab's notify channels hear of it. Settling the job never fails for these."""
        from bench_agent.health.gate import after_incomplete, changed
        from bench_agent.health.state import HealthStore
        from bench_agent.jobs import notify

        spec = job["spec"]
        try:  # nothing may come after it: `panio schedule serve` re-checks the target (check_runs_now=False)
            written = after_incomplete(HealthStore(self.store.url), self.store, job, reason, "reconciler",
                                       spec.get("health_check"), check_runs_now=False)
        except Exception as exc:  # noqa: BLE001 - the verdict is written; health is best effort here (logged)
            self.log(f"job {job['id']}: could not record its target's health: {exc}")
            written = False
        if written is None:  # settled late: a job started on the target since holds it
            self.log(f"job {job['id']}: its target's health is left as it is: a later job has run on it")
        elif written and written[0] != "unknown":
            changed(spec.get("notify"), *written)
        notify.send(spec.get("notify"), "job_incomplete", {  # a health check's too: the lab failed under it
            "job_id": job["id"], "name": job["name"], "target": job["target"], "health": "incomplete",
            "result": None, "reason": reason, "kind": spec.get("kind") or "job"})

    def _maybe_vanished(self, job: dict, pending: dict[int, float | None]) -> None:
        if job["id"] in pending:
            self._suspects.pop(job["id"], None)
            delivered_at, now, grace_s = pending[job["id"]], time.time(), dead_after_s(job["spec"])
            if delivered_at is not None and now - max(delivered_at, job["sent_at"]) > grace_s:
                self._send_again(job, f"delivered to a worker {now - delivered_at:.0f} s ago that never started "
                                      "it (its broker connection was lost, or it died)")
            return
        seen = self._suspects.get(job["id"])
        if seen is None or seen[0] != job["sent_at"]:
            self._suspects[job["id"]] = (job["sent_at"], time.monotonic())
            return
        if time.monotonic() - seen[1] < VANISH_GRACE_S:
            return
        del self._suspects[job["id"]]
        self._send_again(job, "its broker message vanished (Redis lost its data?)")

    def _send_again(self, job: dict, why: str) -> None:
        if self.store.mark_sent(job["id"], job["sent_at"]):
            self._send(job, why)

    def _send(self, job: dict, why: str) -> None:
        """Publish the job's kept message again; one that is not the controller's for this job is refused: the
        job ends incomplete (refused) and nothing is sent (whoever wrote the row cannot make a host run it)."""
        try:
            self.resend(job)
        except Refused as err:
            self.log(f"job {job['id']}: refused to send it again: {err.message} (due: {why})")
            self._note(job, "not_resent", f"{why}; not sent again: {err.message}")
            self.store.finish(job["id"], "incomplete", None, f"not sent again: {err.message}", err.to_json(),
                              only_if_queued=True)
            return
        self.log(f"job {job['id']}: {why}; sent again")
        self._note(job, "resent", f"{why}; sent again to {job.get('host') or 'local'}'s queue")

    def _note(self, job: dict, event: str, text: str) -> None:
        """Keep it with the job (its page and `panio job status` show it); a reconciler's log may be nowhere."""
        try:
            self.store.add_event(job["id"], event, text)
        except Exception as exc:  # noqa: BLE001 - the job was sent (or refused) whatever its record says
            self.log(f"job {job['id']}: could not record {event}: {exc}")


def _expired(job: dict, now: float) -> bool:
    at = job["spec"].get("deadline_at")
    return at is not None and now > at + SKEW_S


def _who(job: dict) -> str:
    """The runner as its holder name says it ("worker bench1@host:12", "panio job run@host:34")."""
    return job.get("worker") or "its worker"


def _gone(job: dict) -> bool:
    return process_state(job.get("worker")) == "gone"
