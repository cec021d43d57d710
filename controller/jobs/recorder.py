"""The recorder: the controller's side of the hosts' reports (``bench_agent.results.reports``).

A control host without a results-database URL reports what its runner does (the job it started, each step,
its artifacts, its verdict, heartbeats, the target's health) on a Redis Stream of its own,
``PREFIX reports:HOST``, each report signed with the host's key. ``panio recorder`` reads every host's stream
through the consumer group ``recorder`` and, for each report:

1. verifies its signature with a certificate of this machine's store whose name (CN) is the host the stream
   is for (``panio setup`` trusts ``HOST-SERIAL.crt``, made by ``panio keys init --name HOST``); a body that
   names another host than its stream is refused;
2. checks the job was queued for that host (its row's ``host``) and the job's target is that host's in the
   lab file; a health report's target too;
3. checks the fencing token: a ``started`` report's must be above the target's mark in the results database
   (the claim raises it, ``ResultStore.claim_fenced``); every later report of the job must carry the job's;
4. checks the sequence number is above the last one recorded for the job (``PREFIX recorded:HOST``), so a
   report delivered twice or replayed changes nothing;

then writes it with ``ResultStore`` / ``HealthStore``. A host's entries are read in batches (up to 100, in
their order); once a batch is written, its sequence numbers and the ``XACK`` (and delete) of its entries go in
one transaction (two round trips a batch to Redis, not three a report): a recorder killed at any point, or
whose database went away mid-batch, loses nothing, as the entries not acknowledged are read again (its pending
entries first, in order) and applied idempotently. A report that fails a check is refused: logged with the
host's name and why, nothing written, acknowledged (never retried forever).

Between reads the recorder publishes what reporting hosts read instead of the database: every target's
health record (``PREFIX health:TARGET``) and the cancel of every job not done (``PREFIX cancel:JOB``).
Run exactly one recorder per lab (like the scheduler).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Callable

from bench_agent.results import reports
from bench_agent.results.read import NOT_DONE

GROUP = "recorder"
CONSUMER = "recorder"  # one recorder: its own pending entries are the ones it must finish after a restart
MIRROR_S = 0.5  # how often health and cancels are published for the hosts
DISCOVER_S = 2.0  # how often new hosts' streams are looked for
CANCEL_TTL_S = 7 * 86400
CHECK_TTL_S = 600  # how long a health check's job id waits for its host (which waits ``CHECK_WAIT_S`` at most)
REPUBLISH_S = 60.0

log = logging.getLogger("panio.recorder")


class Refused(Exception):
    """A report the recorder does not record; its message says why."""


class Certificates:
    """The trusted certificates by their name (CN), re-read when the store's folder changes.

    The folder is looked at (a ``stat`` of each file) at most every ``LOOK_S``, and at once when the caller asks
    for a ``fresh`` look (a signature none of the cached certificates verifies: a host just added, a certificate
    replaced): at 1,000 hosts a look a report was a tenth of the recorder's CPU."""

    LOOK_S = 1.0

    def __init__(self, folder: Path) -> None:
        self.folder, self._stamp, self._by_name = Path(folder), None, {}
        self._looked_at = float("-inf")

    def of(self, host: str, fresh: bool = False) -> list | tuple:
        """``host``'s certificates; ``fresh``: look at the folder now. The same object again while nothing
        changed (``()`` for a name none has)."""
        if fresh or time.monotonic() - self._looked_at >= self.LOOK_S:
            self._looked_at = time.monotonic()
            stamp = self._look()
            if stamp != self._stamp:
                self._by_name, self._stamp = self._load(), stamp
        return self._by_name.get(host, ())

    def _look(self):
        try:
            return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in self.folder.iterdir()))
        except OSError:
            return None

    def _load(self) -> dict[str, list]:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        found: dict[str, list] = {}
        for path in sorted(self.folder.glob("*")):
            try:
                cert = x509.load_pem_x509_certificate(path.read_bytes())
            except (OSError, ValueError):
                continue
            for name in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME):
                found.setdefault(name.value, []).append(cert)
        return found


class Recorder:
    """Reads, checks and records the hosts' reports (one pass: ``step``)."""

    def __init__(self, store, redis_url: str, prefix: str, certs: Certificates,
                 target_host: Callable[[str], str | None]) -> None:
        import redis

        self.store, self.prefix, self.certs, self.target_host = store, prefix, certs, target_host
        self.r = redis.Redis.from_url(redis_url, socket_timeout=10, socket_connect_timeout=5)
        self._streams: dict[str, str] = {}  # stream -> the id to read from ("0": this consumer's pending first)
        self._next_discover = self._next_mirror = 0.0
        self._health = None
        self._published: dict[str, str] = {}  # target -> the health record last published
        self._canceled: set[int] = set()  # the jobs whose cancel is published
        self._republish_at = 0.0
        self._pool = None  # the threads that settle hosts' streams side by side (``_threads``)
        self._rows: dict[int, dict] = {}  # job id -> its row, read for the pass (``_step``), taken by its first report

    # --- the loop ------------------------------------------------------

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        from bench_agent import outage

        outages = outage.Outages(log.warning, "recorder")  # one line when a service goes, one when it is back
        while not should_stop():
            try:
                self.step(block_ms=int(MIRROR_S * 1000))
            except Exception as exc:  # noqa: BLE001 - Redis or the database away: said once, tried again
                if not outages.failed(exc):
                    log.warning("recorder: %s: %s (trying again)", type(exc).__name__, exc)
                time.sleep(outages.delay_s() if outages.down else 1.0)
                continue
            if outages.down:
                outages.ok()

    def step(self, block_ms: int = 1000) -> int:
        """Read and settle what the streams hold (waiting up to ``block_ms``); how many entries were settled. On a
        failure (Redis or the database away) every stream is read from this consumer's pending entries again:
        the entries of a batch that was not finished are settled, in order, before any newer one."""
        try:
            return self._step(block_ms)
        except Exception:
            self._streams = dict.fromkeys(self._streams, "0")
            raise

    def _step(self, block_ms: int) -> int:
        now = time.monotonic()
        if now >= self._next_discover:
            self._discover()
            self._next_discover = now + DISCOVER_S
        if now >= self._next_mirror:
            self.mirror()
            self._next_mirror = now + MIRROR_S
        if not self._streams:
            time.sleep(block_ms / 1000)
            return 0
        pending = {s: i for s, i in self._streams.items() if i != ">"}
        got = self.r.xreadgroup(GROUP, CONSUMER, pending or dict(self._streams), count=100,
                                block=None if pending else block_ms)
        batches: list[tuple[str, list, list]] = []
        for name, entries in got or []:
            name = name.decode()
            if pending and not entries:
                self._streams[name] = ">"  # this consumer's pending entries are all settled: new ones from now on
            if entries:
                batches.append((name, entries, [_parsed(fields) for _entry_id, fields in entries]))
        # the rows of every job these reports name, in one statement: a report's own read is for its job's second
        # report of the pass (what the first wrote), or a job another host's thread holds no row of
        self._rows = self.store.jobs_by_id(sorted({p[2]["job"] for _, _, parsed in batches for p in parsed
                                                   if not isinstance(p, reports.Malformed)
                                                   and p[2].get("job") is not None}))
        if len(batches) < 2 or not str(self.store.url).startswith("postgresql"):  # SQLite: one writer at a time
            return sum(self._settle_all(*batch) for batch in batches)
        self._health_store()  # made once, before the threads share it
        return sum(self._threads().map(lambda batch: self._settle_all(*batch), batches))

    def _settle_all(self, stream: str, entries: list, parsed: list) -> int:
        """One host's entries, in their order (a job's reports all come on its host's stream), ``parsed``
        (``_parsed``): the host's last recorded sequence numbers read in one round trip, each report checked and
        written, then the new marks and the acknowledgement of every entry in one transaction. A failure (the
        database away) leaves the batch's entries pending: ``step`` reads them again, in order, and what was
        written is written again (each write is idempotent: the same verdict, step records by index, a claim
        already held)."""
        host = stream[len(reports.stream(self.prefix, "")):]
        fields = sorted({_mark_field(p[2]) for p in parsed if not isinstance(p, reports.Malformed)})
        key = f"{self.prefix}recorded:{host}"
        marks = {f: int(v) for f, v in zip(fields, self.r.hmget(key, fields) if fields else []) if v is not None}
        new: dict[str, int] = {}
        for one in parsed:
            try:
                report = self._checked(host, one, marks)
                self._apply(host, report)
            except Refused as why:
                log.warning("recorder: refused report from %s: %s", host, why)
                continue
            except Exception as exc:
                if _transient(exc):
                    raise  # the database or Redis away or busy: the batch is read again once they answer
                # a bug of ours on this one report: read again, it would stop the host's stream for good
                log.exception("recorder: refused report from %s: it could not be recorded (%s: %s; a bug of "
                              "panio's, please report it)", host, type(exc).__name__, exc)
                continue
            marks[_mark_field(report)] = new[_mark_field(report)] = report["seq"]
        ids = [entry_id for entry_id, _ in entries]
        pipe = self.r.pipeline()  # MULTI: the marks are never behind what is acknowledged
        if new:
            pipe.hset(key, mapping=new)
        pipe.xack(stream, GROUP, *ids).xdel(stream, *ids).execute()
        return len(entries)

    def _threads(self):
        """Hosts' streams are settled side by side, one thread a stream, as many as the database pool's connections:
        a report's round trips (Redis, the database's commit) are waits, and one at a time the recorder fell
        behind at 33 jobs/s with a fifth of a core busy (docs/scale.md, "The controller under load")."""
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            from bench_agent.results.db import pool_size

            self._pool = ThreadPoolExecutor(max_workers=pool_size(), thread_name_prefix="panio-recorder")
        return self._pool

    def _discover(self) -> None:
        import redis

        head = reports.stream(self.prefix, "")
        for key in self.r.scan_iter(match=f"{_glob_escape(head)}*", count=1000, _type="stream"):
            name = key.decode()
            if name in self._streams:
                continue
            try:
                self.r.xgroup_create(name, GROUP, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            self._streams[name] = "0"

    # --- one report ----------------------------------------------------

    def _checked(self, host: str, parsed: tuple | reports.Malformed, marks: dict[str, int]) -> dict[str, Any]:
        """The report of ``parsed`` (``reports.parse``'s, or why it is not one) if it passes every check that needs
        no job row; ``marks``: the host's last recorded sequence numbers by ``_mark_field``."""
        if isinstance(parsed, reports.Malformed):
            raise Refused(f"malformed: {parsed}")
        body, sig, report = parsed
        if not sig:
            raise Refused(f"unsigned {report['kind']} report (job {report.get('job')})")
        if report["host"] != host:
            raise Refused(f"its body names host {report['host'][:80]!r}, not the stream's (job {report.get('job')})")
        certs = self.certs.of(host)
        if not any(reports.verify(c, body, sig) for c in certs):
            again = self.certs.of(host, fresh=True)  # a host added or a certificate replaced since the last look
            if again is certs or not any(reports.verify(c, body, sig) for c in again):
                raise Refused(f"{report['kind']} report of job {report.get('job')}: its signature is not {host}'s"
                              + ("" if again else f" (no trusted certificate is named {host})"))
        last = marks.get(_mark_field(report))
        if last is not None and report["seq"] <= last:
            raise Refused(f"{report['kind']} report of job {report.get('job')}: sequence {report['seq']} was "
                          f"recorded before (a replay)")
        return report

    def _job(self, host: str, report: dict) -> dict:
        """The report's job, if it was given to ``host`` and its target is ``host``'s."""
        from bench_agent.errors import PanioError

        job_id = report.get("job")
        if job_id is None:
            raise Refused(f"{report['kind']} report names no job")
        job = self._rows.pop(job_id, None)  # read with the pass's others, for the job's first report of the pass
        if job is None:
            try:
                job = self.store.job(job_id, steps=False)
            except PanioError:
                raise Refused(f"{report['kind']} report of job {job_id}: no such job") from None
        if (job["host"] or "local") != host:
            raise Refused(f"{report['kind']} report of job {job_id}: the job was queued for host "
                          f"{job['host'] or 'local'}, not {host}")
        self._target(host, job["target"], f"{report['kind']} report of job {job_id}")
        return job

    def _target(self, host: str, target: Any, what: str) -> None:
        owner = self.target_host(target) if isinstance(target, str) else None
        if owner != host:
            raise Refused(f"{what}: target {str(target)[:80]!r} is "
                          + (f"host {owner}'s" if owner else "in no lab file here") + f", not {host}'s")

    def _apply(self, host: str, report: dict) -> None:
        kind, data = report["kind"], report["data"]
        if kind in ("health", "health_postpone"):
            return self._apply_health(host, report)
        job = self._job(host, report)
        job_id, fence = job["id"], report.get("fence")
        if fence is not None and fence == job["fence"] and self._reopened(host, job):
            job = self.store.job(job_id, steps=False)
        try:
            if kind in ("taken", "beat") and fence is None:  # a runner that waits for the job's lease
                return self._held(host, job, kind, data)
            if kind == "check":
                return self._check(host, job, fence, report["seq"])
            if kind == "started":
                return self._started(host, job, fence, data)
            if fence is None and kind in ("finish", "steps"):  # a job the host ends unstarted (refused, held)
                if job["state"] != "queued":
                    raise Refused(f"{kind} report of job {job_id} without a fencing token: the job is "
                                  f"{job['state']}, not queued")
                if kind == "steps":
                    self.store.record_steps(job_id, _steps(data.get("steps")))
                else:
                    self.store.finish(job_id, *_verdict(data), only_if_queued=True, steps=_steps(data.get("steps")))
                return None
            if job["fence"] is None or fence != job["fence"]:
                raise Refused(f"{kind} report of job {job_id}: fencing token {fence} is not the job's current "
                              f"one ({job['fence']})")
            if kind == "fence":  # a lease Redis lost, retaken: the job's new token, above the old
                new = data.get("token")
                if not isinstance(new, int) or new <= fence:
                    raise Refused(f"fence report of job {job_id}: token {new!r} is not above {fence}")
                self._raise_mark(job["target"], new)
                self.store.set_fence(job_id, new)
            elif kind == "beat":
                self.store.beat([job_id])
            elif kind == "step_start":
                self.store.start_step(job_id, _int(data.get("idx")), _step(data.get("step")), _steps(data.get("done")))
            elif kind == "steps":
                self.store.record_steps(job_id, _steps(data.get("steps")))
            elif kind == "artifact":
                for name, content in _artifacts(data.get("artifacts")):
                    self.store.add_artifact(job_id, name, content)
            elif kind == "notify":
                self._notify(host, job, data)
            elif kind == "finish":
                arts = [(n, c) for n, c in _artifacts(data.get("artifacts")) if isinstance(c, str)]
                self.store.finish(job_id, *_verdict(data), only_if_running=True, steps=_steps(data.get("steps")),
                                  artifacts=arts)
                for name, content in _artifacts(data.get("artifacts")):
                    if isinstance(content, bytes):
                        self.store.add_artifact(job_id, name, content)
        except (KeyError, TypeError, ValueError) as err:
            raise Refused(f"{kind} report of job {job_id}: malformed: {type(err).__name__}: {err}") from None
        return None

    def _notify(self, host: str, job: dict, data: dict) -> None:
        """A reporting host's runner asks for its failed job's notification: sent from here, with the triage made
        from the results database and to the channels the controller compiled into the job (``spec["notify"]``),
        once the job's row says it failed. (Read again after a failure mid-batch, it may be sent twice.)"""
        from bench_agent.jobs import notify
        from bench_agent.triage import compare as triage

        if data.get("event") != "job_failed":
            raise Refused(f"notify report of job {job['id']}: event {str(data.get('event'))[:40]!r} is not job_failed")
        if (job["state"], job["health"], job["result"]) != ("done", "complete", "failed"):
            raise Refused(f"notify report of job {job['id']}: the job is {job['state']} "
                          f"{job['health'] or ''} {job['result'] or ''}, not failed")
        spec = job["spec"]
        message = {"job_id": job["id"], "name": job["name"], "target": job["target"], "health": job["health"],
                   "result": job["result"], "reason": job["reason"], "kind": spec.get("kind") or "job",
                   "fault": "board"}
        notify.send(spec.get("notify"), "job_failed", {**message, **triage.notice(self.store, job["id"])})

    def _reopened(self, host: str, job: dict) -> bool:
        """A job a reconciler settled as lost (its runner silent, its lease gone) while its host's reports waited
        for this recorder: the host's own record, under the job's fencing token, says what happened. The job is
        running again, for its reports to write it as it went; True if it was."""
        from bench_agent.jobs.reconcile import LOST

        if job["state"] != "done" or job["error"] != LOST:
            return False
        j = self.store.jobs.c
        reopened = self.store._one(self.store.jobs.update().where(
            j.id == job["id"], j.state == "done", j.fence == job["fence"], j.error == json.dumps(LOST))
            .values(state="running", health=None, result=None, reason=None, error=None, finished_at=None)) == 1
        if reopened:
            log.warning("recorder: job %s was settled as lost while %s's reports waited; recording what %s reported",
                        job["id"], host, host)
        return reopened

    def _held(self, host: str, job: dict, kind: str, data: dict) -> None:
        """A host's runner holds a queued job while it waits for its lease (``taken``, then its ``beat``s): the row
        says who, so a reconciler sends it again only once that runner is dead. Late ones (the job started or
        ended since) change nothing."""
        from bench_agent.jobs.reconcile import dead_after_s

        if job["state"] != "queued":
            return
        if kind == "beat":
            return self.store.beat([job["id"]])
        worker = data.get("worker")
        if not isinstance(worker, str) or not worker.startswith(f"worker {host}@"):
            raise Refused(f"taken report of job {job['id']}: worker {str(worker)[:80]!r} is not one of {host}'s")
        self.store.take(job["id"], worker, time.time() - dead_after_s(job["spec"]))
        return None

    def _check(self, host: str, job: dict, fence: Any, seq: int) -> None:
        """A host's runner runs the target's health check under job ``job``'s lease: the check's job, made here
        from what the controller compiled into ``job`` (never from the report), claimed under the same fencing
        token, its id published for the host (``reports.check_key``). Made once per report (``check_ref``)."""
        if job["state"] != "running" or fence is None or fence != job["fence"]:
            raise Refused(f"check report of job {job['id']}: the job is {job['state']} under fencing token "
                          f"{job['fence']}, not running under {fence}")
        parent = job["spec"]
        if not isinstance(parent.get("health_check"), dict):
            raise Refused(f"check report of job {job['id']}: its target {job['target']} names no health check")
        ref = f"{host}.{seq}"
        check_id = self._made_check(job["target"], ref)
        if check_id is None:
            spec = {**parent["health_check"], "target": job["target"], "kind": "health_check", "auto": True,
                    "notify": parent.get("notify", []), "lease_ttl_s": parent.get("lease_ttl_s", 30),
                    "check_of": job["id"], "check_ref": ref,
                    **({"lab_key": parent["lab_key"]} if parent.get("lab_key") else {})}
            check_id = self.store.create_job(spec["name"], job["target"], job["host"], spec)
        if self.store.job(check_id, steps=False)["state"] == "queued":
            self.store.take(check_id, job["worker"], 0.0)
            self.store.claim(check_id, job["worker"], fence=fence)
        self.r.set(reports.check_key(self.prefix, host, seq), check_id, ex=CHECK_TTL_S)

    def _made_check(self, target: str, ref: str) -> int | None:
        """The health-check job made for report ``ref`` before (a recorder that died before its mark)."""
        import sqlalchemy as sa

        with self.store._reading() as c:
            return c.execute(sa.text("SELECT id FROM panio_jobs WHERE target = :t AND spec LIKE :p ORDER BY id "
                                     "DESC LIMIT 1"), {"t": target, "p": f'%"check_ref": "{ref}"%'}).scalar()

    def _started(self, host: str, job: dict, fence: Any, data: dict) -> None:
        worker = data.get("worker")
        if not isinstance(worker, str) or not worker.startswith(f"worker {host}@"):
            raise Refused(f"started report of job {job['id']}: worker {str(worker)[:80]!r} is not one of {host}'s")
        if not isinstance(fence, int):
            raise Refused(f"started report of job {job['id']}: no fencing token")
        if job["state"] != "queued" and job["worker"] == worker and job["fence"] == fence:
            return  # recorded already (a recorder that died, or lost its database, before its mark): nothing to do
        if job["state"] != "queued":
            raise Refused(f"started report of job {job['id']}: the job is {job['state']}, not queued")
        from bench_agent.leases.fences import FenceStore

        fences = FenceStore(self.store.url)
        raised, claimed = self.store.claim_fenced(job["id"], worker, job["target"], fence)
        if not raised and fences.high(job["target"]) == 0 and fences.claim(job["target"], fence):
            raised, claimed = True, self.store.claim(job["id"], worker, fence=fence)
        if not raised:
            raise Refused(f"started report of job {job['id']}: fencing token {fence} is not above target "
                          f"{job['target']}'s mark ({fences.high(job['target'])}): an old token")
        if not claimed:
            raise Refused(f"started report of job {job['id']}: the job was no longer queued")

    def _raise_mark(self, target: str, token: int) -> None:
        from bench_agent.leases.fences import FenceStore

        FenceStore(self.store.url).claim(target, token)

    def _apply_health(self, host: str, report: dict) -> None:
        data, kind = report["data"], report["kind"]
        target = data.get("target")
        self._target(host, target, f"{kind} report")
        health = self._health_store()
        job_id = report.get("job")
        if job_id is not None:
            job = self._job(host, report)
            if job["target"] != target:
                raise Refused(f"{kind} report of job {job_id}: the job's target is {job['target']}, not {target}")
            if data.get("health") == "unknown" and self.store.later_job_started(job):
                return  # a later job of the target started: it speaks for the board now (``JobRunner._after``)
        try:
            if kind == "health_postpone":
                health.postpone(target, str(data["reason"]), float(data["recheck_at"]))
            else:
                auto = data.get("auto") or {}
                health.set(target, data["health"], str(data["reason"]), f"worker {host}", job_id,
                           bool(data.get("checked")), recheck_at=auto.get("recheck_at"),
                           failures=int(auto.get("failures") or 0))
        except (KeyError, TypeError, ValueError) as err:
            raise Refused(f"{kind} report: malformed: {type(err).__name__}: {err}") from None
        except Exception as err:  # noqa: BLE001 - a UsageError (a health that is none) is the host's fault
            from bench_agent.errors import PanioError

            if isinstance(err, PanioError):
                raise Refused(f"{kind} report: {err.message}") from None
            raise
        self._publish_health(target, health.get(target))

    # --- what reporting hosts read ---------------------------------------

    def _health_store(self):
        if self._health is None:
            from bench_agent.health.state import HealthStore

            self._health = HealthStore(self.store.url)
        return self._health

    def _publish_health(self, target: str, record: dict) -> None:
        text = json.dumps(record, default=str)
        self.r.set(reports.health_key(self.prefix, target), text)
        self._published[target] = text

    def mirror(self) -> None:
        """Publish each target's health and the cancel of each job not done that someone asked to cancel: what
        changed since the last look (everything again every ``REPUBLISH_S``, in case Redis lost it)."""
        import sqlalchemy as sa

        if time.monotonic() >= self._republish_at:
            self._published, self._canceled = {}, set()
            self._republish_at = time.monotonic() + REPUBLISH_S
        pipe = self.r.pipeline(transaction=False)
        for target, record in self._health_store().all().items():
            text = json.dumps(record, default=str)
            if self._published.get(target) != text:
                pipe.set(reports.health_key(self.prefix, target), text)
                self._published[target] = text
        with self.store._reading() as c:  # the jobs not done (their partial index), asked to stop
            canceled = {r[0] for r in c.execute(sa.text(f"SELECT id FROM panio_jobs WHERE {NOT_DONE} "
                                                        "AND cancel_requested"))}
        for job_id in canceled - self._canceled:
            pipe.set(reports.cancel_key(self.prefix, job_id), 1, ex=CANCEL_TTL_S)
        self._canceled = canceled
        pipe.execute()


def _parsed(fields: dict) -> tuple | reports.Malformed:
    try:
        return reports.parse(fields)
    except reports.Malformed as err:
        return err


def _transient(exc: BaseException) -> bool:
    """A failure of the services rather than of the report: the database's or Redis's (away, busy, a statement
    cut), which passes; the report is recorded when they answer."""
    from bench_agent import outage

    return bool(outage.service_down(exc)) or type(exc).__module__.split(".")[0] in ("sqlalchemy", "psycopg", "redis")


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def _mark_field(report: dict) -> str:
    if report["kind"] in ("health", "health_postpone") and report.get("job") is None:
        return f"health:{report['data'].get('target')}"
    return str(report.get("job"))


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{value!r} is not a step index")
    return value


def _step(step: Any) -> dict:
    if not isinstance(step, dict) or not all(isinstance(step.get(k), str) for k in ("name", "command", "status")):
        raise ValueError("a step record needs name, command and status")
    return step


def _steps(steps: Any) -> list[tuple[int, dict]]:
    if not isinstance(steps, list):
        raise ValueError("steps is not a list")
    return [(_int(i), _step(s)) for i, s in steps]


def _artifacts(items: Any) -> list[tuple[str, str | bytes]]:
    import base64

    from bench_agent.results.history import BINARY_SUFFIXES

    if not isinstance(items, list):
        raise ValueError("artifacts is not a list")
    out: list[tuple[str, str | bytes]] = []
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"artifact name {name!r}")
        if "b64" in item and name.endswith(BINARY_SUFFIXES):
            out.append((name, base64.b64decode(item["b64"], validate=True)))
        elif isinstance(item.get("text"), str) and not name.endswith(BINARY_SUFFIXES):
            out.append((name, item["text"]))
        else:
            raise ValueError(f"artifact {name!r}: bytes go with a binary name, text with the others")
    return out


def _verdict(data: dict) -> tuple[str, str | None, str, dict | None]:
    health, result = data["health"], data.get("result")
    if health not in ("complete", "incomplete", "canceled", "timed_out") or result not in (None, "passed", "failed",
                                                                                            "skipped"):
        raise ValueError(f"verdict {health!r}/{result!r}")
    error = data.get("error")
    return health, result, str(data.get("reason") or ""), error if isinstance(error, dict) else None
