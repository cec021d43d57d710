"""A real OpenSSH server on a loopback port, with host and user keys generated for the test."""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path, kind: str = "ed25519") -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)


class Sshd:
    def __init__(self, root: Path, home: Path, env: dict[str, str] | None = None, ecdsa_key: bool = False) -> None:
        """``env``: variables set in every session (sshd's SetEnv), e.g. the host side's own PANIO_STATE_DIR;
        ``ecdsa_key``: a second host key, as hosts have one per type (``host_key_ecdsa``)."""
        self.root, self.port = root, free_port()
        root.mkdir(parents=True, exist_ok=True)
        if os.environ.get("PYTHONPATH"):  # the host side runs the panio under test (a worktree's), as the CLI does
            env = {"PYTHONPATH": os.environ["PYTHONPATH"], **(env or {})}
        keygen(root / "host_key")
        if ecdsa_key:
            keygen(root / "host_key_ecdsa", "ecdsa")
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        keygen(home / ".ssh" / "id_ed25519")
        (root / "authorized_keys").write_text((home / ".ssh" / "id_ed25519.pub").read_text())
        (root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\nPidFile {root / 'sshd.pid'}\n"
            + (f"HostKey {root / 'host_key_ecdsa'}\n" if ecdsa_key else "") +
            f"AuthorizedKeysFile {root / 'authorized_keys'}\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
            "LogLevel ERROR\n"  # one SetEnv line: sshd heeds only the first of a repeated keyword
            + (f"SetEnv {' '.join(f'{k}={v}' for k, v in env.items())}\n" if env else ""))
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", exist_ok=True)
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")],
                                     stderr=open(root / "sshd.log", "w"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                assert self.proc.poll() is None, (root / "sshd.log").read_text()
                time.sleep(0.05)
        self.user = getpass.getuser()

    @property
    def host_pub(self) -> str:
        return (self.root / "host_key.pub").read_text()

    def new_host_key(self) -> None:
        """Regenerate the host key (a reinstalled host); sshd reads it for each new connection."""
        for path in (self.root / "host_key", self.root / "host_key.pub"):
            path.unlink()
        keygen(self.root / "host_key")

    def sessions(self) -> list[int]:
        """Pids of the per-connection sshd processes under our listener (not the agents they run)."""
        out = []
        for pid in _descendants(self.proc.pid):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip().startswith("sshd"):
                    out.append(pid)
            except OSError:
                pass
        return out

    def signal_sessions(self, sig: int) -> list[int]:
        pids = self.sessions()
        for pid in pids:
            os.kill(pid, sig)
        return pids

    def stop(self) -> None:
        for pid in self.sessions():
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
