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
"""

from __future__ import annotations

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

PATH = "bench_agent.jobs.kombu_redis:Transport"


class Channel(kombu_redis.Channel):
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
