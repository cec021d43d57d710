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

