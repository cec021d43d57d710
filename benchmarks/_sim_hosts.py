"""Protocol-level control hosts for controller_load.py: a thread a host, each speaking what a reporting
``panio worker`` speaks to the controller, through panio's own code, without the boards.

A host's thread, for each message on its queue:

* takes it off its queue as kombu's Redis transport does with late acks (``BRPOP`` on the queue's four
  priority lists, one second at a time; the message kept in kombu's unacked hash and its index until the ack);
* drops what is not a kombu message (``kombu_redis.fault``) or not signed (content type), and verifies the
  body's signature with Celery's ``auth`` serializer against the host's store (the controller's certificate);
* runs the job's one step as a no-op, in the order the runner (``JobRunner``) makes its writes on a reporting
  host, through the real ``ReportingStore`` (the reports: ``taken``, ``started`` with the lease's fencing token,
  ``step_start``, ``finish``, each signed with the host's key) and the real ``RedisLeaseStore`` (the lease taken
  with its fencing token, released at the end); the health gate's read (``PREFIX health:TARGET``) too;
* acknowledges the message, and writes one line to its run log: ``job host leased_at finished_at``.

What a real host does and this does not: its boards (the step's operation), the lease keeper (a no-op job ends
in milliseconds, the keeper's first renewal is at a third of the TTL), the heartbeat (a beat a second per job
held: none in a job this short), the operations' queue, the host's jobs-started record (``ReportingStore``'s
``O_EXCL`` claim still makes a job run at most once a host). The host's fencing marks are kept in memory, not
in its ``fences.db``. All hosts share one RSA key, each with a certificate of its own name (the recorder checks
a report against the certificates named as its host): the same checks and the same cost as a key a host.

Run by controller_load.py: ``python _sim_hosts.py CONFIG.json`` (hosts, Redis, prefix, keys, folders); stops
when the file ``CONFIG.json.stop`` appears. The leading underscore keeps `make bench` from running it.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PRIORITY_STEPS = (0, 3, 6, 9)  # kombu's, for a queue's lists: NAME, NAME\x06\x163, ...
SEP = "\x06\x16"


class MemFences:
    """The host's fencing marks (``FenceStore``'s interface), in memory."""

    def __init__(self) -> None:
        self.marks: dict[str, int] = {}
        self.lock = threading.Lock()

    def known(self, target: str) -> bool:
        return target in self.marks

    def high(self, target: str) -> int:
        return self.marks.get(target, 0)

    def claim(self, target: str, token: int, durable: bool = True) -> bool:
        with self.lock:
            if token <= self.marks.get(target, 0):
                return False
            self.marks[target] = int(token)
            return True

    def claimed(self, target: str, token: int, claim) -> tuple[bool, bool]:
        return claim(target, int(token))

    def advance(self, target: str, held: int, token: int) -> bool:
        with self.lock:
            if self.marks.get(target, 0) != held:
                return False
            self.marks[target] = int(token)
            return True


class Host(threading.Thread):
    def __init__(self, name: str, targets: set[str], cfg: dict, verifier, log) -> None:
        super().__init__(name=name, daemon=True)
        import redis

        from bench_agent.leases.redis_store import RedisLeaseStore
        from bench_agent.results.reporting import ReportingStore

        self.host, self.targets, self.cfg, self.verifier, self.log = name, targets, cfg, verifier, log
        self.r = redis.Redis.from_url(cfg["redis"], socket_timeout=30, socket_connect_timeout=10)
        fences = MemFences()
        self.store = ReportingStore(name, cfg["redis"], cfg["prefix"], Path(cfg["state"]) / name, Path(cfg["key"]),
                                    fences)
        self.leases = RedisLeaseStore(cfg["redis"], cfg["prefix"], fences=fences)
        base = f"{cfg['prefix']}celery:"
        queue = f"{base}host.{name}"
        self.queues = [queue if p == 0 else f"{queue}{SEP}{p}" for p in PRIORITY_STEPS]
        self.unacked, self.unacked_index = f"{base}unacked", f"{base}unacked_index"
        self.worker = f"worker {name}@loadgen:{threading.get_native_id()}"
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                got = self.r.brpop(self.queues, timeout=1)
            except Exception as exc:  # noqa: BLE001 - Redis away for a moment: the log says so, try again
                self.log(f"# {self.host}: brpop: {type(exc).__name__}: {exc}")
                time.sleep(0.5)
                continue
            if got is not None:
                self.take(got[1])

    def take(self, item: bytes) -> None:
        from bench_agent.jobs.kombu_redis import fault

        try:
            raw = json.loads(item)
        except ValueError:
            return self.log(f"# {self.host}: dropped: not JSON")
        why = fault(raw)
        if why:
            return self.log(f"# {self.host}: dropped: {why}")
        props = raw["properties"]
        tag, info = props["delivery_tag"], props["delivery_info"]
        self.r.pipeline().zadd(self.unacked_index, {tag: time.time()}).hset(
            self.unacked, tag, json.dumps([raw, info["exchange"], info["routing_key"]])).execute()
        try:
            payload = self.verified(raw)
            if payload is not None:
                self.run_job(payload)
        except Exception as exc:  # noqa: BLE001 - said in the run log; the harness counts the job as lost
            self.log(f"# {self.host}: job failed: {type(exc).__name__}: {exc}")
        self.r.pipeline().zrem(self.unacked_index, tag).hdel(self.unacked, tag).execute()

    def verified(self, raw: dict) -> dict | None:
        if raw.get("content-type") != "application/data":
            self.log(f"# {self.host}: refused: content type {raw.get('content-type')!r}")
            return None
        body = raw["body"]
        if raw["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        try:
            args, _kwargs, _embed = self.verifier.deserialize(body)
        except Exception as exc:  # noqa: BLE001 - celery's SecurityError: not signed by a trusted key
            self.log(f"# {self.host}: refused: {str(exc)[:200]}")
            return None
        return args[0]

    def run_job(self, payload: dict) -> None:
        from bench_agent.jobs.reconcile import dead_after_s

        job_id, target, store = payload["job_id"], payload["target"], self.store
        if target not in self.targets:  # ``WorkerContext._as_configured``: not this host's target
            store.finish(job_id, "incomplete", None, f"target {target} is not {self.host}'s", None,
                         only_if_queued=True)
            return
        if not store.take(job_id, self.worker, time.time() - dead_after_s(payload)):
            return
        store.health.get(target)  # the health gate's read
        lease, until = None, time.monotonic() + float(payload.get("lease_wait_s", 300))
        while lease is None:
            lease = self.leases.try_acquire(
                target, {"holder": self.worker, "job": job_id, "name": payload["name"]},
                payload.get("lease_ttl_s", 30), durable_fence=False,
                claim=lambda t, token: store.claim_fenced(job_id, self.worker, t, token))
            if lease is None:
                if time.monotonic() > until:
                    store.finish(job_id, "incomplete", None, "lease not obtained", None)
                    return
                time.sleep(0.05)
        leased_at = time.time()
        try:
            claimed = lease.claimed
            if claimed is None:
                claimed = store.claim(job_id, self.worker, fence=lease.token)
            if not claimed:
                return
            step = payload["steps"][0]
            started = time.time()
            store.start_step(job_id, 0, {"name": step["name"], "command": step["command"], "status": "running",
                                         "started_at": started}, [])
            record = {"name": step["name"], "command": step["command"], "exit_status": 0, "duration_s": 0.0,
                      "output": "", "checks": [], "captured": {}, "status": "pass", "started_at": started}
            store.finish(job_id, "complete", "passed", "all steps passed", None, steps=[(0, record)])
            self.log(f"{job_id} {self.host} {leased_at:.6f} {time.time():.6f}")
        finally:
            lease.release()


def main() -> None:
    from celery.security.certificate import FSCertStore
    from celery.security.serialization import SecureSerializer

    from bench_agent.jobs.signing import DIGEST

    config = Path(sys.argv[1])
    cfg = json.loads(config.read_text())
    verifier = SecureSerializer(cert_store=FSCertStore(cfg["store"]), digest=DIGEST)
    out = open(cfg["log"], "a", buffering=1)
    lock = threading.Lock()

    def log(line: str) -> None:
        with lock:
            out.write(line + "\n")

    hosts = [Host(name, set(targets), cfg, verifier, log) for name, targets in cfg["hosts"].items()]
    for h in hosts:
        h.start()
    log(f"# ready {len(hosts)}")
    stop = Path(f"{config}.stop")
    while not stop.exists():
        time.sleep(0.2)
    for h in hosts:
        h.stopping.set()
    for h in hosts:
        h.join(timeout=5)
    log("# stopped")


if __name__ == "__main__":
    main()
