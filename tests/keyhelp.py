"""Message-signing keys for tests that start real `panio worker` processes.

One controller pair and one worker pair per test process (an RSA key takes a
moment to make), and one certificate store that trusts both: what `panio
setup` arranges between a controller and its hosts (the controller trusts the
workers' replies, a worker trusts the controller and itself). Give
``CONTROLLER`` to the commands a test runs and ``WORKER`` to the workers it
starts (``peerhelp.Workers`` does both).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from bench_agent.jobs.signing import CERT_ENV, KEY_ENV, STORE_ENV, Keys


@functools.cache
def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="panio-test-keys-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def pair(name: str, store: Path | None = None) -> dict[str, str]:
    """A new key pair ``name`` (its certificate trusted by ``store``, default its own), as environment variables."""
    from controller import keys

    folder = _root() / name
    k = Keys(folder / "signing.key", folder / "signing.crt", store or folder / "trusted")
    keys.create(name, k)  # trusted by its store too
    return {KEY_ENV: str(k.key), CERT_ENV: str(k.cert), STORE_ENV: str(k.store)}


@functools.cache
def _lab_pairs() -> tuple[dict[str, str], dict[str, str]]:
    store = _root() / "store"
    return pair("controller", store), pair("worker", store)


def controller_env() -> dict[str, str]:
    return dict(_lab_pairs()[0])


def worker_env() -> dict[str, str]:
    return dict(_lab_pairs()[1])
