"""kombu's Redis transport, made to survive a Redis restart while a job runs.

With ``acks_late`` a running job's message is unacknowledged. When Redis goes
away, Celery closes the connection: kombu then closes the channel, which first
drops its connection pool and then tries to restore the unacknowledged message,
re-creating the pool from ``self.connection.client`` -- already ``None`` by then.
The ``AttributeError ... 'hostname'`` that results is not a connection error, so
nothing catches it and the worker dies ("Unrecoverable error"; kombu issue #582,
reproduced with kombu 5.7 on every Redis restart during a job). The same happens
when the job ends and acknowledges on the dead channel.

Here a channel whose connection is gone raises ``ConnectionError`` instead,
which kombu and Celery already handle: the channel closes, the late ack is
logged and dropped, and the message stays in Redis's unacked set (restored after
the visibility timeout; the results database decides whether it runs again).

And one client object per connection pool: kombu builds a new ``redis.Redis`` for
every acknowledgement and every delivery's unacked bookkeeping (``conn_or_acquire``),
about 0.9 ms of the consumer thread's CPU a job on the shared 2-core machine
(docs/performance.md). A client over a pool is stateless and safe to share; the
pool is the same one kombu would have used, and a new pool (kombu drops it when
the connection goes) gets a new client.

And what a broker user writes is read as data, never as a fault of the worker's
(issue 45): kombu parses each list item as it comes off the queue, inside the
consumer's event loop, where any exception is Celery's "Unrecoverable error".
An item that is not JSON, or JSON that is not a kombu message (its properties,
delivery tag and info, headers, body and body encoding: what kombu and its
unacknowledged-message bookkeeping read), is dropped and logged here, before
kombu makes a message of it: BRPOP has taken it off the list and nothing
records it as unacknowledged, so nothing restores it on the next start. An
entry of the unacknowledged hash that is none is dropped when it is restored.
A message is decoded only if its content type is one its consumer accepts:
kombu lets ``application/text`` through whatever the consumer said. Whether a
message is one the worker takes (its signature, its task) is the consumer's to
say (``bench_agent.jobs.intake``).

And no Lua of its own: kombu refreshes and sweeps the binding tables of expiring queues (Celery's remote-control
queues) with two scripts (EVALSHA, SCRIPT LOAD), and releases the mutex around its restore of unacknowledged
messages with redis-py's (a ``Lock``), which would let every broker user run any Lua. Here they are FCALLs of the
same code in panio's Redis function library (``bench_agent.redis_functions``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
from queue import Empty

from kombu.exceptions import ContentDisallowed
from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
import redis.client
import redis.lock
from kombu.utils.objects import cached_property
from redis.exceptions import ConnectionError as RedisConnectionError

PATH = "bench_agent.jobs.kombu_redis:Transport"
_STR = (str, type(None))


def fault(raw) -> str | None:
    """Why ``raw`` (a list item, parsed) is not a message kombu can take, or None."""
    props = raw.get("properties") if isinstance(raw, dict) else None
    if not isinstance(props, dict):
        return "not a message (no properties)"
    info = props.get("delivery_info")
    if not (isinstance(props.get("delivery_tag"), str) and props["delivery_tag"] and isinstance(info, dict)
            and isinstance(info.get("exchange"), str) and isinstance(info.get("routing_key"), str)):
        return "not a message (no delivery tag or delivery info)"
    if not (isinstance(raw.get("headers"), (dict, type(None))) and isinstance(raw.get("body"), _STR)
            and all(isinstance(raw.get(k), _STR) for k in ("content-type", "content-encoding"))):
        return "not a message (headers, body or content type of the wrong kind)"
    if "compression" in (raw.get("headers") or {}):  # unsigned, and inflated before any signature is checked
        return "a compressed body (panio never compresses one)"
    encoding = props.get("body_encoding")
    if encoding == "base64":
        try:
            base64.b64decode(raw.get("body") or "", validate=True)
        except (binascii.Error, ValueError):
            return "its base64 body does not decode"
    elif encoding not in (None, "utf-8"):
        return f"unknown body encoding {str(encoding)[:40]!r}"
    return None


def dropped(where: str, why: str, raw: object = None) -> None:
    """One line in the worker's log for a broker item dropped unread."""
    logging.getLogger("panio.intake").warning("dropped a message that is not a signed task (%s): %s%s", where, why,
                                              "" if raw is None else f": {repr(raw)[:200]}")


class Message(kombu_redis.Channel.Message):
    def _decode(self):
        # kombu decodes application/text and application/data whatever a consumer's accept list says ("trusted"
        # content): the first hands Celery a text body no signature covers. A consumer that names what it
        # accepts gets that only.
        if self.accept is not None and self.content_type not in self.accept:
            raise ContentDisallowed(f"Refusing to deserialize untrusted content of type {self.content_type!r}")
        return super()._decode()


class QoS(kombu_redis.QoS):
    def restore_by_tag(self, tag, client=None, leftmost=False):
        try:
            return super().restore_by_tag(tag, client, leftmost)
        except (ValueError, TypeError, RecursionError) as exc:  # an entry that is no [message, exchange, key]
            dropped("unacknowledged", f"its entry {bytes_to_str(tag)[:80]!r} is not one kombu wrote ({type(exc).__name__})")
            with self.channel.conn_or_acquire(client) as c, c.pipeline() as pipe:
                self._remove_from_indices(tag, pipe).execute()


class _Function:
    """A function of panio's library called as kombu calls a registered script: ``(keys=, args=, client=)``."""

    def __init__(self, channel, name: str) -> None:
        self.channel, self.name = channel, name

    def __call__(self, keys, args, client):
        from bench_agent import redis_functions

        return _functions_error(self._call, redis_functions, keys, args, client)

    def _call(self, redis_functions, keys, args, client):
        # kombu passes the first key bare (its prefixed client prefixes only EVALSHA's first key), not FCALL's
        keys = [self.channel.global_keyprefix + keys[0], *keys[1:]]
        if isinstance(client, redis.client.Pipeline):  # a missing function would only show at execute
            redis_functions.ensure(self.channel._create_client())  # the pool's client, not the event loop's
            return client.fcall(f"{redis_functions.LIBRARY_NAME}_{self.name}", len(keys), *keys, *args)
        return redis_functions.fcall(client, self.name, keys, args)


class _Lock(redis.lock.Lock):
    """redis-py's lock, released by FCALL (kombu's ``Mutex`` only acquires, by SET NX, and releases it)."""

    def do_release(self, expected_token) -> None:
        from bench_agent import redis_functions

        name = getattr(self.redis, "global_keyprefix", "") + self.name  # SET is prefixed, FCALL's keys are not
        if not _functions_error(redis_functions.fcall, self.redis, "lock_release", [name], [expected_token]):
            raise redis.exceptions.LockNotOwnedError("Cannot release a lock that's no longer owned",
                                                     lock_name=self.name)


class _FunctionLocks:
    def lock(self, name, *args, **kwargs):
        kwargs["lock_class"] = kwargs.get("lock_class") or _Lock
        return super().lock(name, *args, **kwargs)


class _Client(_FunctionLocks, redis.Redis):
    pass


class _PrefixedClient(_FunctionLocks, kombu_redis.PrefixedStrictRedis):
    pass


def _functions_error(func, *args):
    """``func(*args)``; a user that may not load panio's functions is a Redis error to kombu, logged as panio's."""
    from bench_agent.errors import PanioError

    try:
        return func(*args)
    except PanioError as exc:
        logging.getLogger("panio.broker").error("%s (%s)", exc.message, exc.hint)
        raise redis.exceptions.ResponseError(exc.message) from None


class Channel(kombu_redis.Channel):
    QoS = QoS
    Message = Message

    def _get_client(self):
        super()._get_client()  # kombu's check of redis-py's version
        if self.global_keyprefix:
            return functools.partial(_PrefixedClient, global_keyprefix=self.global_keyprefix)
        return _Client

    @cached_property
    def _refresh_binding(self):
        return _Function(self, "refresh_binding")

    @cached_property
    def _sweep_bindings(self):
        return _Function(self, "sweep_bindings")

    def _brpop_read(self, **options):
        try:
            return super()._brpop_read(**options)
        except (json.JSONDecodeError, RecursionError) as exc:  # kombu's loads of the item, before any message
            dropped("a queue of this worker's", f"not JSON ({type(exc).__name__})", getattr(exc, "doc", None))
            raise Empty() from None  # as if BRPOP had found nothing: the event loop polls again

    def _connparams(self, asynchronous: bool = False):
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection was closed (Redis restarted?)")
        return super()._connparams(asynchronous=asynchronous)

    _client_of_pool: tuple = (None, None)

    def _create_client(self, asynchronous: bool = False):
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool
        kept_pool, client = self._client_of_pool
        if kept_pool is not pool:
            client = super()._create_client()
            self._client_of_pool = (pool, client)
        return client


class Transport(kombu_redis.Transport):
    Channel = Channel

    def _deliver(self, message, queue):
        why = fault(message)
        if why:
            dropped(f"queue {queue}", why, message)
            return
        super()._deliver(message, queue)
