"""A fresh control host for `panio setup` tests: a new Unix user with an empty home, reached as that user
through a test sshd on loopback, and a lab on this side that names it (fixture ``fresh``)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from peerhelp import drop_keys
from sshd import Sshd

REDIS_URL = "redis://127.0.0.1:6379/7"


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
