"""Issue 38 item 5: the controller's load generator, small, in `make test`.

``benchmarks/controller_load.py`` at 20 boards (2 hosts of 10), a job a board every 10 s for 20 s, as its own
process: the real controller (``panio dashboard``'s API as the job source, ``panio recorder``, ``panio schedule
serve``), a private redis-server and a PostgreSQL database made for the run, the hosts at the protocol level
(signed messages verified, leases with fencing tokens, signed reports). Every job submitted is recorded
complete, none is lost, none runs twice. No speed is asserted here (that is the benchmark's, on a machine it
states): the run drains for up to two minutes, so a loaded machine passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PG = "postgresql://postgres@127.0.0.1:5432"

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server not installed")


@pytest.fixture(scope="module")
def postgres():
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(f"{PG}/postgres", connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL not available at {PG}: {exc}")
    return PG


def test_twenty_boards_every_job_recorded_once(postgres, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANIO_")}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "controller_load.py"), "--boards", "20",
                        "--boards-per-host", "10", "--job-every-s", "10", "--minutes", str(20 / 60),
                        "--drain-s", "120", "--threads", "4", "--pg", postgres, "--json"],
                       env={**env, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    run = json.loads(p.stdout.strip().splitlines()[-1])["run"]
    assert run["submitted"] == 40 and run["submit_errors"] == 0, run
    assert run["lost"] == 0, run  # every submitted job's row is done and complete: the recorder recorded it
    assert run["run_twice"] == 0, run
    assert run["hosts_notes"] == [], run  # no message refused or dropped, no job failed on a host
    assert run["wait_p99_s"] is not None and run["db_connections_max"] >= 1, run
