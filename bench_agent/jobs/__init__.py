"""Running bench jobs on the host that owns the target (in-process or in a Celery worker).

``runner.JobRunner`` runs a job *payload*: plain data built and validated by
the controller (``controller.jobs.spec``), so the same payload runs in the
embedded in-process worker and in ``panio worker`` on a control host.

The names below cross process boundaries (environment variables, request arguments, task and queue names).
They are said here, in a package module that imports nothing, so a
reading command (`panio serial log`) can look for them without importing the
lease or step machinery; ``leases.base``, ``leases.guard`` and ``steps`` re-export them.
"""

TOKEN_ENV = "PANIO_LEASE_TOKEN"  # a job step's lease token, in the environment of a `panio` it runs
TOKEN_ARG = "lease_token"  # the request argument that carries a job step's lease token to the host
ORIGIN_ARG = "lease_store"  # ... and the store that issued it (``store_key``)
OVERRIDE_ENV = "PANIO_LEASE_OVERRIDE"  # an operator's override grant (``lease_override``), in the CLI's environment
OVERRIDE_ARG = "lease_override"  # ... and the request argument that carries it to the host
JOB_STARTED_ENV, PREVIOUS_STEP_ENV = "PANIO_JOB_STARTED_AT", "PANIO_PREVIOUS_STEP_STARTED_AT"
TASK, OP_TASK = "panio.run_job", "panio.op"  # the Celery task names of a job and of an operation
# "1": each host's Celery keys and channels live under a prefix of its own (``celery_keyprefix``), so a Redis ACL
# user per host can be limited to them (docs/security.md, "One identity per host"); the controller and every worker
# of the lab must say the same
PER_HOST_ENV = "PANIO_BROKER_PER_HOST"


def queue_name(host: str) -> str:
    """The broker queue of control host ``host``'s worker."""
    return f"host.{host}"


def celery_keyprefix(prefix: str, host: str | None, per_host: bool) -> str:
    """Where Celery (kombu's queues, its unacknowledged-message hash, bindings, control and event channels, the
    result backend) keeps its keys for host ``host``: ``PREFIX h.HOST:celery:`` with ``per_host``, else the lab's
    one ``PREFIX celery:``. kombu keeps every consumer's unacknowledged messages in one hash and every worker's
    control bindings in one set: only a prefix per host lets a Redis user be limited to one host's part."""
    return f"{prefix}h.{host}:celery:" if per_host and host else f"{prefix}celery:"
