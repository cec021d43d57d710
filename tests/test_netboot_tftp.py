"""panio's own TFTP server against busybox's tftp client on loopback: options, big files, refusals, its log."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from bench_agent import netboot
from bench_agent.tftp import TftpServer

pytestmark = pytest.mark.skipif(not shutil.which("busybox"), reason="busybox-static is installed by system-deps.sh")


@pytest.fixture
def server(tmp_path: Path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    lines: list[str] = []
    srv = TftpServer(str(root), "127.0.0.1", 0, log=lines.append).start()
    srv.lines = lines
    yield srv
    srv.close()


def get(srv: TftpServer, remote: str, local: Path, *opts: str) -> subprocess.CompletedProcess:
    return subprocess.run(["busybox", "tftp", "-g", *opts, "-r", remote, "-l", str(local), "127.0.0.1",
                           str(srv.port)], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("opts", [(), ("-b", "1432")], ids=["512-byte blocks", "blksize 1432"])
def test_files_arrive_byte_for_byte(server, tmp_path: Path, opts) -> None:
    data = os.urandom(1_000_000)
    (server.root / "sub" / "kernel_2712.img").write_bytes(data)
    r = get(server, "/sub/kernel_2712.img", tmp_path / "got", *opts)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "got").read_bytes() == data
    # the server logs once the final ACK arrives, which can be just after the client has exited
    deadline = time.monotonic() + 10
    while not server.lines and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.lines == [f"sent {server.root / 'sub' / 'kernel_2712.img'} to 127.0.0.1"]


def test_exact_multiple_of_the_block_size_ends_with_an_empty_block(server, tmp_path: Path) -> None:
    (server.root / "even").write_bytes(b"x" * 1024)
    assert get(server, "even", tmp_path / "got").returncode == 0
    assert (tmp_path / "got").read_bytes() == b"x" * 1024


def test_paths_outside_the_root_and_missing_files_are_not_found(server, tmp_path: Path) -> None:
    (server.root.parent / "secret").write_text("no")
    (server.root / "link").symlink_to(server.root.parent / "secret")
    for name in ("../secret", "link", "sub/../../secret", "missing.img"):
        r = get(server, name, tmp_path / "got")
        assert r.returncode != 0 and "file not found" in r.stderr, name
    assert len([ln for ln in server.lines if ln.endswith("not found")]) == 4


def test_writes_are_refused(server, tmp_path: Path) -> None:
    (tmp_path / "up").write_text("data")
    r = subprocess.run(["busybox", "tftp", "-p", "-l", str(tmp_path / "up"), "-r", "up", "127.0.0.1",
                        str(server.port)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and not (server.root / "up").exists()


def test_tsize_is_answered_in_the_oack(server) -> None:
    (server.root / "f").write_bytes(b"y" * 3000)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(struct.pack("!H", 1) + b"f\0octet\0tsize\x000\0blksize\x001000\0", ("127.0.0.1", server.port))
        reply, _ = s.recvfrom(1500)
    assert reply[:2] == struct.pack("!H", 6)
    assert b"tsize\x003000\0" in reply and b"blksize\x001000\0" in reply


def test_status_reads_the_server_log_in_dnsmasq_words(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "Nov 30 09:36:03 dnsmasq-tftp[10200]: TFTP root is /srv/pico\n"
        "Nov 30 09:36:07 dnsmasq-dhcp[10200]: 1928062214 DHCPACK(nb0) 10.233.0.144 a2:f0:97:54:2c:11 pi5\n"
        "Nov 30 09:36:08 dnsmasq-tftp[10200]: file /srv/pico/1a2b3c4d/start4.elf not found for 10.233.0.144\n"
        "Nov 30 09:36:09 panio-tftp[7]: sent /srv/pico/kernel_2712.img to 10.233.0.144\n")
    seen = netboot.read_log(log, tail=10)
    assert seen["dhcp"] == [{"time": "Nov 30 09:36:07", "ip": "10.233.0.144", "mac": "a2:f0:97:54:2c:11",
                             "hostname": "pi5"}]
    assert [(f["result"], Path(f["file"]).name) for f in seen["files"]] == [("not found", "start4.elf"),
                                                                            ("sent", "kernel_2712.img")]
    assert netboot.read_log(log, tail=1)["files"][0]["result"] == "sent"
