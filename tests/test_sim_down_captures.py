"""`panio-sim down` stops the captures reading its boards whatever state directory started them (issue 44 item 6):
two hosts' workers on one machine each keep their own, and a capture one of them started outlived the bench."""

from __future__ import annotations

import subprocess

from conftest import PANIO
from jobhelp import wait_for
from simbench import sim_bench

from bench_agent.daemons import registry
from bench_agent.procinfo import pid_alive


def test_sim_down_stops_a_capture_started_from_another_state_directory(panio, tmp_path):
    with sim_bench(panio, tmp_path / "sim", booted=True) as bench:
        host = {**panio.env, "PANIO_STATE_DIR": str(tmp_path / "host-state")}  # another host's worker, here
        subprocess.run([PANIO, "serial", "watch", "board0"], env=host, check=True, capture_output=True, timeout=60)
        found = registry.daemons_anywhere({bench.boards()[0]["device"]})
        assert len(found) == 1 and found[0]["state_dir"].startswith(str(tmp_path / "host-state")), found
        said = bench.down().stdout
        assert "daemons using them" in said, said
        wait_for(lambda: not pid_alive(found[0]["pid"]), timeout_s=10)


def test_a_worker_that_stops_stops_the_captures_of_its_hosts_targets(panio, tmp_path):
    import os
    import signal

    from peerhelp import Workers

    with sim_bench(panio, tmp_path / "sim", booted=True) as bench:
        workers = Workers(tmp_path / "w", "redis://127.0.0.1:6379/7")
        (tmp_path / "w").mkdir()
        workers.lab.write_text(bench.lab.read_text())  # board0, on this machine (host "local")
        worker = workers.start("local", concurrency=1)
        try:
            host = {**panio.env, "PANIO_STATE_DIR": str(tmp_path / "w" / "wstate"), "PANIO_LAB": str(workers.lab)}
            subprocess.run([PANIO, "serial", "watch", "board0"], env=host, check=True, capture_output=True,
                           timeout=60)  # as a job of the worker's starts it: in the worker's state directory
            found = registry.daemons_anywhere({bench.boards()[0]["device"]})
            assert len(found) == 1, found
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
            wait_for(lambda: not pid_alive(found[0]["pid"]), timeout_s=10)
            assert "stopped capture" in worker.log.read_text()
        finally:
            workers.stop_all()
