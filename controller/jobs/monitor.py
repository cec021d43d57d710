"""The Celery app for monitoring tools: ``celery -A controller.jobs.monitor flower``.

Flower started with the bare broker URL sees nothing of panio: panio's Celery
keys live under ``PANIO_REDIS_PREFIX`` + ``celery:`` (so several benches can
share one Redis), and Flower only finds them with the same transport options.
This module builds the very app the controller and the workers use, from the
same environment (``PANIO_BROKER``, ``PANIO_REDIS_PREFIX``), for ``celery -A``.
Workers send the task events and heartbeats Flower shows only when started
with ``panio worker --events``. With keys per host (``PANIO_BROKER_PER_HOST=1``) each host's events and control
channels are its own: ``PANIO_MONITOR_HOST=NAME`` follows host NAME's. See docs/monitoring.md.
"""

from __future__ import annotations

import os

from bench_agent.jobs.worker import for_host
from controller import backends

app = backends.celery_app()
if os.environ.get("PANIO_MONITOR_HOST"):  # with keys per host (PANIO_BROKER_PER_HOST=1): that host's events
    app = for_host(app, os.environ["PANIO_MONITOR_HOST"])
# Flower parses the broker URL itself (queue lengths): keep kombu's own transport name here; the
# patched transport matters only to workers, which hold unacknowledged jobs across Redis restarts.
app.conf.broker_transport = None
