"""What a worker takes off the broker: a signed task, or nothing and one line in its log.

Whoever holds a Redis password can push anything onto a host's queues. Nothing
they push may kill the worker (Celery ends on any exception that reaches its
consumer's loop: "Unrecoverable error", and with late acks the message is
restored on the next start and kills it again), and nothing but the signing
serializer may decode it. Three gates, each where the bytes are read:

* the transport (``bench_agent.jobs.kombu_redis``) drops an item that is not a
  kombu message at all;
* the consumers, Celery's task consumer (``GuardedConsumer``) and the
  operations' (``bench_agent.jobs.op_server``), acknowledge and drop a message
  whose content type the app does not accept before anything decodes it
  (``unwanted``). kombu's own accept list lets ``application/text`` and
  ``application/data`` through whatever it says, and would hand a text body to
  Celery unverified; the ``auth`` serializer's type is ``application/data``,
  whose only decoder is that serializer;
* a message that then fails to verify, or is not a task, is acknowledged and
  dropped the same way, and so is one with an ETA (panio sends none; its header is
  outside the signature, and Celery holds such a message unacknowledged until then); nothing a message does while it is taken in is raised
  into the loop, only a lost broker connection (which Celery recovers from).

Each drop is one ``WARNING`` line: ``refused a message that is not signed by a
trusted key (...)`` when its content type or its signature is what failed,
else ``dropped a message that is not a signed task (...)``.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.worker.consumer import Consumer
from kombu.exceptions import ContentDisallowed


def accepts(app: Any) -> frozenset[str]:
    """The content types ``app`` decodes (the signing serializer's; JSON when it runs unsigned)."""
    from kombu.serialization import prepare_accept_content

    return frozenset(prepare_accept_content(app.conf.accept_content))


def _about(message: Any) -> str:
    headers = getattr(message, "headers", None)
    headers = headers if isinstance(headers, dict) else {}
    return (f"task {str(headers.get('task'))[:80]!r}, id {str(headers.get('id'))[:80]!r}, "
            f"content type {str(message.content_type)[:80]!r}")


def dropped(message: Any, why: str) -> None:
    logging.getLogger("panio.intake").warning("dropped a message that is not a signed task (%s): %s",
                                              _about(message), why)


def refused(message: Any, exc: Exception | str) -> None:
    logging.getLogger("panio.signing").warning(
        "refused a message that is not signed by a trusted key (%s): %s", _about(message), str(exc)[:300])


def unwanted(message: Any, accepted: frozenset[str]) -> str | None:
    """Why ``message`` is not to be decoded (its content type), or None."""
    if message.content_type in accepted:
        return None
    return (f"untrusted content of type {str(message.content_type)[:80]!r}, not decoded (accepted: "
            f"{', '.join(sorted(accepted))})")


class GuardedConsumer(Consumer):
    """Celery's worker consumer, taking in only what the app accepts and surviving anything else."""

    def create_task_handler(self, *args, **kwargs):
        handle = super().create_task_handler(*args, **kwargs)
        accepted = accepts(self.app)
        errors = (*self.connection_errors, *self.channel_errors)

        def on_task_received(message):
            why = unwanted(message, accepted)
            if why:
                refused(message, why)
                return self._settle(message)
            headers = getattr(message, "headers", None)
            if isinstance(headers, dict) and headers.get("eta") is not None:
                # outside the signature: a captured job sent again with an ETA years ahead would be held by
                # Celery unacknowledged until then, by each worker it is restored to
                return self._drop(message, f"it carries an ETA ({str(headers['eta'])[:40]}); panio sends none")
            try:
                return handle(message)
            except errors:
                raise
            except Exception as exc:  # noqa: BLE001 - a malformed message: dropped, never the worker's end
                return self._drop(message, f"it is not a task this worker can take: {type(exc).__name__}: "
                                           f"{str(exc)[:200]}")

        return on_task_received

    def on_unknown_message(self, body, message):
        self._drop(message, "it is not a task message (no task header)")

    def on_unknown_task(self, body, message, exc):
        self._drop(message, "no such task on this worker")

    def on_decode_error(self, message, exc):
        refused(message, exc)
        self._settle(message)

    def on_invalid_task(self, body, message, exc):
        if isinstance(exc, ContentDisallowed):
            refused(message, exc)
            self._settle(message)
        else:  # signed, but its headers make no task (an ETA that is no date, ...)
            self._drop(message, f"not a valid task: {str(exc)[:200]}")

    def _drop(self, message, why: str) -> None:
        dropped(message, why)
        self._settle(message)

    def _settle(self, message) -> None:
        if not message.acknowledged:
            message.ack_log_error(logging.getLogger("panio.intake"), self.connection_errors)
