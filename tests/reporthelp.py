"""Reporting hosts for the recorder's tests: `panio worker` processes without PANIO_RESULTS_URL, each signing its
reports with its own key (CN = the host), and the controller's `panio recorder` process."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from conftest import PANIO
from jobhelp import wait_for
from peerhelp import SHARED_REDIS, Workers, start_worker


def make_keys(root: Path, name: str, store: Path) -> dict[str, str]:
    """A key pair whose certificate is named ``name`` (as `panio keys init --name HOST` makes it), trusted by
    ``store``."""
    from bench_agent.jobs.signing import CERT_ENV, KEY_ENV, STORE_ENV, Keys
    from controller import keys

    k = Keys(root / name / "signing.key", root / name / "signing.crt", store)
    keys.create(name, k)
    return {KEY_ENV: str(k.key), CERT_ENV: str(k.cert), STORE_ENV: str(k.store)}


class Peers(Workers):
    """Workers that hold no results URL, each with its host's own key, and the controller's recorder."""

    def __init__(self, root: Path, hosts: tuple[str, ...] = ("bench1", "bench2"), **env: str) -> None:
        root.mkdir(exist_ok=True)
        super().__init__(root, SHARED_REDIS, **env)
        store = root / "trusted"
        self.keys = {name: make_keys(root / "keys", name, store) for name in ("controller", *hosts)}
        self.env.update(self.keys["controller"])
        self.recorder: subprocess.Popen | None = None

    def start(self, host: str, *extra: str, concurrency: int = 3) -> subprocess.Popen:
        log = self.root / f"worker-{host}-{len(self.procs)}.log"
        env = {**os.environ, **self.env, **self.keys[host], "PANIO_STATE_DIR": str(self.root / "wstate"),
               "HOME": str(self.root)}
        del env["PANIO_RESULTS_URL"]  # the point: a host without the results database
        proc = start_worker(host, self.lab, env, log, concurrency, *extra)
        self.procs.append(proc)
        return proc

    def start_recorder(self) -> subprocess.Popen:
        self.rlog = self.root / "recorder.log"
        env = {**os.environ, **self.env, "PANIO_STATE_DIR": str(self.root / "cstate"), "HOME": str(self.root)}
        proc = subprocess.Popen([PANIO, "recorder", "--lab", str(self.lab)], env=env,
                                stdout=open(self.rlog, "a"), stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: "recorder: recording" in self.rlog.read_text() or proc.poll() is not None, timeout_s=30)
        assert proc.poll() is None, self.rlog.read_text()
        self.recorder = proc
        return proc

    def kill_recorder(self) -> None:
        os.killpg(self.recorder.pid, signal.SIGKILL)
        self.recorder.wait(timeout=10)

    def stop_all(self) -> None:
        if self.recorder and self.recorder.poll() is None:
            os.killpg(self.recorder.pid, signal.SIGTERM)
            self.recorder.wait(timeout=20)
        super().stop_all()

    def refusals(self) -> list[str]:
        return [line for line in self.rlog.read_text().splitlines() if "refused report" in line]
