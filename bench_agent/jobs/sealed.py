"""A job's broker message as the controller signed it: sealed once, kept with the job, sent again as it is.

When the controller queues a job it *seals* its ``panio.run_job`` message (``seal``: the task's body, signed
with the controller's key by Celery's ``auth`` serializer), keeps it in the results database beside the job
(``ResultStore.keep_messages``, table ``panio_job_messages``) and only then publishes it (``publish``).

A reconciler that sends a job again (its worker died before starting it, or its message vanished with Redis's
data: ``bench_agent.jobs.reconcile``) publishes that same sealed body under a new task id (``send_again``); it
never signs a job itself. First it opens the kept message (``opened``): it must be signed by a certificate this
process trusts (the controller's reconciler: by its own key), be a ``panio.run_job`` of this very job (its id,
target and host) and nothing else. A queued row without one, or whose message fails a check, is refused
(``Refused``): never sent. Whoever can write the results database therefore cannot make a host run a job the
controller did not queue (docs/security.md). A host runs a copy sent again at most once, like any copy: the job's
claim in the results database and the target's lease decide, and the host's own record of the jobs it started
(``bench_agent.jobs.started``): a job that ran, set back to queued in the database, is sent again and refused.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from bench_agent.errors import Refused

SIGNED = "application/data"  # the content type of Celery's auth serializer


def seal(app, payload: dict, sealed_at: float | None = None) -> str:
    """``payload``'s ``panio.run_job`` body as ``app`` signs it (with no keys, ``--insecure-unsigned``: plain JSON,
    which no reconciler sends again), as text to keep. The body says when it was sealed (``sealed_at``, default
    now): a host runs a job message only within ``started.WINDOW_S`` of it, the time it remembers having started
    the job (``bench_agent.jobs.started``)."""
    from kombu.serialization import dumps

    body = _message(app, stamped(payload, sealed_at), "").body
    content_type, encoding, body = dumps(body, serializer=app.conf.task_serializer)
    return json.dumps({"content_type": content_type, "content_encoding": encoding,
                       "body": body.decode(encoding) if isinstance(body, bytes) else body})


def stamped(payload: dict, sealed_at: float | None = None) -> dict:
    """``payload`` with the time its message is sealed (``sealed_at``, default now)."""
    import time

    return {**payload, "sealed_at": time.time() if sealed_at is None else float(sealed_at)}


def publish(app, payload: dict, sealed: str, task_id: str) -> str:
    """Publish the sealed body of ``payload``'s job, as it was sealed, to its host's queue under ``task_id``."""
    from bench_agent.jobs import TASK, queue_name
    from bench_agent.jobs.celery_app import for_host

    app, kept = for_host(app, _host(payload)), json.loads(sealed)
    message = _message(app, payload, task_id)._replace(body=kept["body"])  # headers made here, the body as kept
    with app.producer_or_acquire() as producer:
        app.amqp.send_task_message(producer, TASK, message, queue=queue_name(_host(payload)),
                                   content_type=kept["content_type"], content_encoding=kept["content_encoding"])
    return task_id


def _message(app, payload: dict, task_id: str):
    """The task message of ``payload``. Its headers' ``argsrepr`` (what Celery's tools show of the arguments) says
    which job it is, not Celery's repr of the whole payload: that repr was a share of each submission's CPU and
    a kilobyte of each message, read by no one."""
    from bench_agent.jobs import TASK

    what = f"[job {payload.get('job_id')} {payload.get('name')!r} on {payload.get('target')!r}]"
    # ignore_result: the results database says how a job ended; without it Celery would subscribe to a result
    # that never comes, one more Redis round trip per job (and a subscription kept in a long-lived controller)
    return app.amqp.create_task_message(task_id, TASK, [payload], {}, ignore_result=True,
                                        create_sent_event=app.conf.task_send_sent_event, argsrepr=what,
                                        kwargsrepr="{}")


def send_again(app, store, job: dict, keys, own_only: bool = False) -> str:
    """Publish job ``job``'s (a row of the results database) kept message again, under a new task id, once it
    opens (``opened``); ``Refused`` when it does not (nothing is sent). Returns the new task id."""
    sealed = store.message(job["id"])
    payload = opened(sealed, job, keys, own_only)
    return publish(app, payload, sealed, f"panio-job-{job['id']}-again-{uuid.uuid4().hex[:6]}")


def opened(sealed: str | None, job: dict, keys, own_only: bool = False) -> dict:
    """The payload of ``job``'s kept message ``sealed``, once its signature verifies against ``keys``'s store (with
    ``own_only``, against ``keys``'s own certificate alone: the controller's reconciler sends again only what its
    own key signed) and it is a ``panio.run_job`` of this job; else ``Refused``, saying why."""
    if not sealed:
        raise Refused("no message signed by the controller is kept with it: the controller did not queue it")
    try:
        kept = json.loads(sealed)
        content_type, body = kept["content_type"], kept["body"]
    except (ValueError, KeyError, TypeError):
        raise Refused("its kept message is not one panio sealed") from None
    if content_type != SIGNED:
        raise Refused(f"its kept message is not signed (content type {str(content_type)[:80]!r})")
    if keys is None:
        raise Refused("this process has no signing keys to check its kept message with")
    payload = _payload(_verified(body, keys, own_only))
    if payload.get("job_id") != job["id"]:
        raise Refused(f"its kept message is job {payload.get('job_id')}'s, not its own")
    if (payload.get("target"), _host(payload)) != (job["target"], job.get("host") or "local"):
        raise Refused(f"its kept message is for target {payload.get('target')} on host {_host(payload)}, not "
                      f"{job['target']} on {job.get('host') or 'local'}")
    return payload


def _verified(body: str, keys, own_only: bool) -> Any:
    from celery.security.certificate import Certificate, CertStore, FSCertStore
    from celery.security.serialization import SecureSerializer

    from bench_agent.jobs.signing import DIGEST

    try:
        if own_only:
            store = CertStore()
            store.add_cert(Certificate(keys.cert.read_text()))
        else:
            store = FSCertStore(str(keys.store))
        return SecureSerializer(cert_store=store, digest=DIGEST).deserialize(body)
    except Exception as exc:  # noqa: BLE001 - celery's SecurityError, or a body that is no signed message at all
        who = "this process's own key" if own_only else "a key this process trusts"
        raise Refused(f"its kept message is not signed by {who}: {str(exc)[:300]}") from None


def _payload(body: Any) -> dict:
    """The one argument of a ``panio.run_job`` body ``(args, kwargs, embed)``; ``Refused`` for anything else."""
    if isinstance(body, (list, tuple)) and len(body) == 3 and isinstance(body[0], (list, tuple)) \
            and len(body[0]) == 1 and isinstance(body[0][0], dict) and not body[1]:
        return body[0][0]
    raise Refused("its kept message is not a job's")


def _host(payload: dict) -> str:
    return (payload.get("target_config") or {}).get("host") or "local"
