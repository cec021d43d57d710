"""`panio setup`'s checks and refusals: the playbooks lint clean, an untrusted host key and a missing broker
stop it with one line naming what to fix, and the wheelhouse pins the extras panio asks for. (The fresh host
provisioned end to end is tests/test_setup_provision.py, a file of its own: its few minutes run beside these.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

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


def test_the_wheelhouse_archive_depends_only_on_its_files(tmp_path):
    from controller.provision.wheelhouse import _archive

    house = tmp_path / "house"
    house.mkdir()
    for name in ("b.whl", "a.whl", "constraints.txt"):
        (house / name).write_text(name * 100)
    first = _archive(house, tmp_path / "1.tar").read_bytes()
    os.utime(house / "a.whl", (0, 0))  # touched, rebuilt, copied: the same bytes
    os.chmod(house / "b.whl", 0o600)
    assert _archive(house, tmp_path / "2.tar").read_bytes() == first
    (house / "a.whl").write_text("other")
    assert _archive(house, tmp_path / "3.tar").read_bytes() != first
