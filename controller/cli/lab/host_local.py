"""A control host on this machine (``panio host add NAME --local``): its state directory and signing keys, without
SSH or Ansible.

Two hosts on one machine (a test bench, a machine with two sets of boards) each run a worker with a state directory
of their own (``STATE_DIR/hosts/NAME``: its captures, leases, started jobs, keys). Its key pair is made there and
exchanged with this machine's, as ``panio setup`` would do over SSH. Its worker reads the lab file itself: a
worker takes only its own targets' tables from it (``bench_agent.jobs.host_config``) and re-reads it when it
changes, so the host's configuration is always the lab's, with no copy to regenerate after an edit.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from bench_agent.jobs import signing


def state_dir_of(name: str) -> Path:
    from bench_agent.paths import state_dir

    return state_dir() / "hosts" / name


def prepare(name: str, lab_path: str) -> dict:
    """Make host ``name``'s state directory and key pair (kept if they exist), trust its certificate here and this
    machine's there; its worker's command line."""
    from controller import keys

    mine = signing.default_keys()
    if not mine.key.exists():
        keys.create("controller", mine)
    state = state_dir_of(name)
    theirs = signing.Keys(state / "keys" / signing.KEY_NAME, state / "keys" / signing.CERT_NAME,
                          state / "keys" / signing.STORE_NAME)
    if not theirs.key.exists():
        keys.create(name, theirs)
    keys.trust(theirs.cert, mine.store, name)  # its results and re-sends, here
    keys.trust(mine.cert, theirs.store)  # this machine's jobs, there
    worker = (f"PANIO_STATE_DIR={shlex.quote(str(state))} panio worker --host {shlex.quote(name)} "
              f"--lab {shlex.quote(str(Path(lab_path).resolve()))}")
    return {"host": name, "state_dir": str(state), "cert": str(theirs.cert), "worker": worker}
