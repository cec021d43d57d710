"""`panio setup --host`: a fresh host, reached over a real OpenSSH server, provisioned from nothing by Ansible.

The "host" is a new Unix user with an empty home on this machine, reached as
that user through the test sshd on loopback (no sudo: `--no-sudo`). After
setup its venv runs the controller's exact panio, its systemd unit passes
`systemd-analyze verify`, the worker started the way the unit says runs a
job submitted from the controller, and a second setup changes nothing.
(The fresh host is tests/freshhost.py; setup's checks and refusals are tests/test_setup_checks.py.)
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import PANIO
from jobhelp import job_file, stop_group, wait_for
from serial_fixtures import processes

QUICK = "[[steps]]\nname = 'quick'\nrun = 'ping ${target} --count 3'\nexpect_output = 'seq=3'\n"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="creates a Unix user for the fresh host (CI runs as root)")


def _lingering_ssh_masters() -> list[str]:
    """SSH master connections (``ssh: SOCKET [mux]``) whose socket folder, a finished setup run's, is gone."""
    found = []
    for _, cmdline in processes():
        argv = cmdline.decode(errors="replace")
        if argv.startswith("ssh: ") and "[mux]" in argv and "/panio-setup-" in argv:
            if not Path(argv.split()[1]).parent.exists():
                found.append(argv)
    return found


def unit_command(unit: Path, env_file: Path) -> tuple[list[str], dict[str, str]]:
    """ExecStart and the EnvironmentFile's variables, as systemd would start the service."""
    lines = unit.read_text().splitlines()
    exec_start = next(line.split("=", 1)[1] for line in lines if line.startswith("ExecStart="))
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line and line[0] != "#")
    return shlex.split(exec_start), env


@needs_root
def test_setup_provisions_a_fresh_host_that_then_runs_a_job(panio, fresh, tmp_path):
    r = panio("setup", "--host", "fresh", "--no-sudo", "--json", timeout=900)
    assert not _lingering_ssh_masters(), "panio setup left Ansible's SSH master connections running"
    report = r.json()
    assert report["stats"]["failures"] == 0 and report["stats"]["changed"] > 0
    venv = fresh.home / ".local" / "share" / "panio" / "venv"
    assert report["python"] == str(venv / "bin" / "python")
    assert panio("host", "show", "fresh", "--json").json()["python"] == str(venv / "bin" / "python")

    # the controller's exact version, owned by the host's user, the agent importable there
    version = subprocess.run([str(venv / "bin" / "python"), "-P", "-c",
                              "import importlib.metadata as m, bench_agent.agent; print(m.version('panio'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == panio("--version").out.split()[1]
    assert os.stat(venv / "pyvenv.cfg").st_uid == fresh.uid  # bin/python links to the system python

    unit = fresh.home / ".config" / "systemd" / "user" / "panio-worker.service"
    env_file = fresh.home / ".local" / "share" / "panio" / "worker.env"
    assert "ExecStart=" in unit.read_text() and oct(os.stat(env_file).st_mode & 0o777) == "0o600"
    verify = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert "panio-worker.service" not in verify.stderr, verify.stderr

    # the host's own configuration (its worker runs only that) and its signing key, made there, 0600;
    # each side trusts the other's certificate
    prefix = fresh.home / ".local" / "share" / "panio"
    host_lab = (prefix / "lab.toml").read_text()
    assert "[targets.board]" in host_lab and f"--lab {prefix / 'lab.toml'}" in unit.read_text()
    assert oct(os.stat(prefix / "lab.toml").st_mode & 0o777) == "0o600"  # it names hooks and devices: the owner's
    assert oct(os.stat(prefix / "keys" / "signing.key").st_mode & 0o777) == "0o600"
    assert os.stat(prefix / "keys" / "signing.key").st_uid == fresh.uid
    assert (prefix / "keys" / "trusted" / "controller.crt").read_bytes() == \
        (Path(panio.env["PANIO_STATE_DIR"]) / "keys" / "signing.crt").read_bytes()
    trusted = panio("keys", "list", "--json").json()["trusted"]
    assert sorted(t["name"] for t in trusted) == ["controller", "fresh"]
    assert "PANIO_SIGNING_KEY=" in env_file.read_text()
    assert "PANIO_RESULTS_URL" not in env_file.read_text()  # the host reports (issue 38): the recorder records

    # doctor --host sees the controller's version and the installed unit (systemd is not PID 1 here)
    rows = {r["item"]: r for r in panio("doctor", "--host", "fresh", "--json", check=False).json()["targets"]["fresh (host)"]}
    assert rows["panio"]["status"] == "ok" and rows["worker"]["status"] in ("ok", "unchecked"), rows

    # start the worker as the unit would (systemd is not PID 1 here), then run a job on it
    argv, env = unit_command(unit, env_file)
    log = open(tmp_path / "worker.log", "w+")
    worker = subprocess.Popen(["runuser", "-u", fresh.user, "--", "env", "-i", f"HOME={fresh.home}",
                               "PATH=/usr/bin:/bin", *(f"{k}={v}" for k, v in env.items()), *argv],
                              cwd=fresh.home, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    recorder = subprocess.Popen([PANIO, "recorder", "--lab", str(panio.lab)], env=panio.env,
                                stdout=open(tmp_path / "recorder.log", "w"), stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for(lambda: "ready." in (tmp_path / "worker.log").read_text() or worker.poll() is not None,
                 timeout_s=90)
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()
        job = panio("job", "submit", job_file(tmp_path, QUICK), "--target", "board", "--json").json()["job_id"]
        done = wait_for(lambda: (j := panio("job", "status", str(job), "--json").json())["state"] == "done" and j,
                        timeout_s=90, every_s=0.3)
        assert (done["health"], done["result"]) == ("complete", "passed"), done
        assert done["worker"].startswith("worker fresh@")
        assert "refused" not in (tmp_path / "recorder.log").read_text()
    finally:
        stop_group(worker)
        stop_group(recorder)

    # idempotent: the same setup again changes nothing; --code-only too
    again = panio("setup", "--host", "fresh", "--no-sudo", "--json", timeout=600).json()
    assert again["stats"]["changed"] == 0, again["changed"]
    code = panio("setup", "--host", "fresh", "--no-sudo", "--code-only", "--json", timeout=600).json()
    assert code["stats"]["changed"] == 0 and code["stats"]["failures"] == 0, code


@needs_root
def test_an_install_that_failed_is_installed_again_by_the_next_run(panio, fresh):
    """Issue 45: the install ran only when the venv was new or the wheelhouse changed, so after a failed install
    neither was true and the next run skipped it. The venv now records what it holds only once an install
    succeeded. The failure here: a venv whose site-packages its user cannot write."""
    venv = fresh.home / ".local" / "share" / "panio" / "venv"
    subprocess.run(["runuser", "-u", fresh.user, "--", "sh", "-c", f"mkdir -p {venv.parent} && "
                    f"/usr/bin/python3 -m venv {venv}"], check=True, cwd="/")
    site = next(venv.glob("lib/python3*/site-packages"))
    os.chmod(site, 0o555)
    r = panio.fails("setup", "--host", "fresh", "--no-sudo", code=16, timeout=900)
    assert "Install panio and its dependencies" in r.err, r.err
    os.chmod(site, 0o755)
    report = panio("setup", "--host", "fresh", "--no-sudo", "--json", timeout=900).json()
    assert report["stats"]["failures"] == 0, report
    assert any("Install panio and its dependencies" in t for t in report["changed"]), report["changed"]
    version = subprocess.run([str(venv / "bin" / "python"), "-P", "-c", "import importlib.metadata as m; "
                              "print(m.version('panio'))"], capture_output=True, text=True, check=True).stdout.strip()
    assert version == panio("--version").out.split()[1]
