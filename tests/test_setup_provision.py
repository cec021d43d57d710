"""`panio setup --host`: a fresh host, reached over a real OpenSSH server, provisioned from nothing by Ansible.

The "host" is a new Unix user with an empty home on this machine, reached as
that user through the test sshd on loopback (no sudo: `--no-sudo`). After
setup its venv runs the controller's exact panio, its systemd unit passes
`systemd-analyze verify`, the worker started the way the unit says runs a
job submitted from the controller, and a second setup changes nothing.
The playbooks pass `ansible-playbook --syntax-check` and `ansible-lint`.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from jobhelp import job_file, stop_group, wait_for
from peerhelp import drop_keys
from serial_fixtures import processes
from sshd import Sshd

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
REDIS_URL = "redis://127.0.0.1:6379/7"
QUICK = "[[steps]]\nname = 'quick'\nrun = 'ping ${target} --count 3'\nexpect_output = 'seq=3'\n"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="creates a Unix user for the fresh host (CI runs as root)")


def test_playbooks_pass_syntax_check_and_lint():
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROOT / "ansible" / "roles")}
    for book in ("control_host.yml", "controller.yml"):
        p = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", "-i",
                            str(ROOT / "ansible" / "inventory.example.yml"), str(ROOT / "ansible" / book)],
                           capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([str(BIN / "ansible-lint"), "--offline", "control_host.yml", "controller.yml"],
                       cwd=ROOT / "ansible", capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


class FreshHost:
    """A Unix user with an empty home, as a control host nobody has set up."""

    def __init__(self) -> None:
        self.user = "pnh" + uuid.uuid4().hex[:8]
        self.base = Path(tempfile.mkdtemp(prefix="panio-host-"))
        os.chmod(self.base, 0o755)
        self.home = self.base / "home"
        subprocess.run(["useradd", "--create-home", "--home-dir", str(self.home), "--shell", "/bin/sh",
                        self.user], check=True)
        subprocess.run(["usermod", "-p", "*", self.user], check=True)  # not locked: sshd allows key logins
        self.uid = pwd.getpwnam(self.user).pw_uid

    def remove(self) -> None:
        subprocess.run(["pkill", "-KILL", "-u", self.user], check=False)
        subprocess.run(["userdel", "--force", self.user], check=False, capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture
def fresh(panio, tmp_path):
    host = FreshHost()
    sshd = Sshd(host.base / "sshd", tmp_path / "home")  # sshd reads authorized_keys as the host user
    shared = host.base / "shared"  # results database both users write
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    prefix = f"panio-setup-{uuid.uuid4().hex[:8]}:"
    panio.env.update({"PANIO_BROKER": REDIS_URL, "PANIO_REDIS_PREFIX": prefix,
                      "PANIO_RESULTS_URL": f"sqlite:///{shared / 'results.db'}",
                      "ANSIBLE_PRIVATE_KEY_FILE": str(tmp_path / "home" / ".ssh" / "id_ed25519"),
                      "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")})
    panio("init")
    panio("host", "add", "fresh", "--ssh", f"{host.user}@127.0.0.1", "--port", str(sshd.port))
    panio("host", "trust", "fresh")
    panio("target", "add", "board", "--host", "fresh")
    yield host
    host.remove()
    sshd.stop()
    drop_keys(REDIS_URL, prefix)


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
    assert oct(os.stat(prefix / "keys" / "signing.key").st_mode & 0o777) == "0o600"
    assert os.stat(prefix / "keys" / "signing.key").st_uid == fresh.uid
    assert (prefix / "keys" / "trusted" / "controller.crt").read_bytes() == \
        (Path(panio.env["PANIO_STATE_DIR"]) / "keys" / "signing.crt").read_bytes()
    trusted = panio("keys", "list", "--json").json()["trusted"]
    assert sorted(t["name"] for t in trusted) == ["controller", "fresh"]
    assert "PANIO_SIGNING_KEY=" in env_file.read_text()

    # doctor --host sees the controller's version and the installed unit (systemd is not PID 1 here)
    rows = {r["item"]: r for r in panio("doctor", "--host", "fresh", "--json", check=False).json()["targets"]["fresh (host)"]}
    assert rows["panio"]["status"] == "ok" and rows["worker"]["status"] in ("ok", "unchecked"), rows

    # start the worker as the unit would (systemd is not PID 1 here), then run a job on it
    argv, env = unit_command(unit, env_file)
    log = open(tmp_path / "worker.log", "w+")
    worker = subprocess.Popen(["runuser", "-u", fresh.user, "--", "env", "-i", f"HOME={fresh.home}",
                               "PATH=/usr/bin:/bin", *(f"{k}={v}" for k, v in env.items()), *argv],
                              cwd=fresh.home, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: "ready." in (tmp_path / "worker.log").read_text() or worker.poll() is not None,
                 timeout_s=90)
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()
        job = panio("job", "submit", job_file(tmp_path, QUICK), "--target", "board", "--json").json()["job_id"]
        done = wait_for(lambda: (j := panio("job", "status", str(job), "--json").json())["state"] == "done" and j,
                        timeout_s=90, every_s=0.3)
        assert (done["health"], done["result"]) == ("complete", "passed"), done
        assert done["worker"].startswith("worker fresh@")
    finally:
        stop_group(worker)

    # idempotent: the same setup again changes nothing; --code-only too
    again = panio("setup", "--host", "fresh", "--no-sudo", "--json", timeout=600).json()
    assert again["stats"]["changed"] == 0, again["changed"]
    code = panio("setup", "--host", "fresh", "--no-sudo", "--code-only", "--json", timeout=600).json()
    assert code["stats"]["changed"] == 0 and code["stats"]["failures"] == 0, code


@needs_root
def test_an_untrusted_host_key_fails_naming_the_host_and_the_task(panio, fresh, tmp_path):
    known = Path(panio.env["HOME"]) / ".config" / "panio" / "known_hosts"
    known.write_text("")
    # it builds the wheelhouse before Ansible meets the host key: minutes on a loaded machine
    r = panio.fails("setup", "--host", "fresh", "--no-sudo", code=4, timeout=600)
    assert "host fresh" in r.err and "task" in r.error


def test_setup_without_a_broker_says_what_to_set(panio):
    panio("init")
    panio("host", "add", "bench1", "--ssh", "u@127.0.0.1")
    env = {k: v for k, v in panio.env.items() if k != "PANIO_BROKER"}
    panio.env = env
    r = panio.fails("setup", "--host", "bench1", code=3)
    assert "PANIO_BROKER" in r.err


def test_the_wheelhouse_pins_the_extras_panio_asks_for():
    from controller.provision.wheelhouse import pins

    names = {pin.split("==")[0] for pin in pins()}
    assert {"psycopg", "psycopg-binary", "celery", "redis"} <= names and "panio" not in names
