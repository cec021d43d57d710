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

from bench_agent.netboot import channel as netboot
from bench_agent.netboot.tftp import TftpServer

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
    deadline = time.monotonic() + 60
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


def _rrq(port: int, name: str, *opts: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(struct.pack("!H", 1) + name.encode() + b"\0octet\0" + b"".join(o.encode() + b"\0" for o in opts),
             ("127.0.0.1", port))
    return s


def _blocks_until_quiet(s: socket.socket, quiet_s: float = 0.3) -> tuple[list[int], tuple]:
    """The DATA block numbers that arrive without any ACK from us, and the transfer's port."""
    got, peer = [], None
    s.settimeout(quiet_s)
    try:
        while True:
            pkt, peer = s.recvfrom(2048)
            if pkt[:2] == struct.pack("!H", 3):
                got.append(struct.unpack("!H", pkt[2:4])[0])
    except socket.timeout:
        return got, peer


def _ack(s: socket.socket, peer: tuple, block: int) -> None:
    s.sendto(struct.pack("!HH", 4, block), peer)


def test_blocks_go_out_ahead_of_the_acks_and_a_lost_block_is_sent_again(tmp_path: Path) -> None:
    """Lock-step costs a wake-up per block; panio sends SEND_AHEAD blocks ahead of the ACKs (in order) and,
    on three duplicate ACKs (iPXE acknowledges every block with its first gap), goes back with half the window."""
    from bench_agent.netboot import tftp

    (tmp_path / "f").write_bytes(os.urandom(100 * 512))
    srv = TftpServer(str(tmp_path), "127.0.0.1", 0).start()
    try:
        with _rrq(srv.port, "f") as s:  # no options: 512-byte blocks, no OACK
            blocks, peer = _blocks_until_quiet(s)
            assert blocks == list(range(1, tftp.SEND_AHEAD + 1))
            _ack(s, peer, 3)  # 1..3 arrived: the window slides by three
            assert _blocks_until_quiet(s)[0] == list(range(tftp.SEND_AHEAD + 1, tftp.SEND_AHEAD + 4))
            for _ in range(3):  # block 4 was lost: the client keeps acknowledging 3
                _ack(s, peer, 3)
            resent = _blocks_until_quiet(s)[0]
            assert resent == list(range(4, 4 + tftp.SEND_AHEAD // 2)), resent
        with _rrq(srv.port, "f", "blksize", "512", "windowsize", "4") as s:  # RFC 7440: the client's window
            s.settimeout(5)
            oack, peer = s.recvfrom(2048)
            assert b"windowsize\x004\0" in oack
            _ack(s, peer, 0)
            assert _blocks_until_quiet(s)[0] == [1, 2, 3, 4]
    finally:
        srv.close()


def test_an_ack_for_a_block_sent_before_a_go_back_moves_the_window(tmp_path: Path) -> None:
    """iPXE stalled with 16 blocks in flight: after a go-back the client acknowledged a block the server had
    sent before going back, and the server, resending from the oldest block, ignored that ACK for good."""
    from bench_agent.netboot import tftp

    (tmp_path / "f").write_bytes(os.urandom(100 * 512))
    srv = TftpServer(str(tmp_path), "127.0.0.1", 0).start()
    try:
        with _rrq(srv.port, "f") as s:
            blocks, peer = _blocks_until_quiet(s)
            newest = tftp.SEND_AHEAD + 3
            _ack(s, peer, 3)
            assert _blocks_until_quiet(s)[0][-1] == newest
            for _ in range(3):  # duplicate ACKs: the server goes back to block 4
                _ack(s, peer, 3)
            assert _blocks_until_quiet(s)[0][0] == 4
            _ack(s, peer, newest)  # the blocks sent before the go-back had all arrived
            after = _blocks_until_quiet(s)[0]
            assert after and after[0] == newest + 1, after
    finally:
        srv.close()


@pytest.mark.parametrize("ahead", [1, 8], ids=["lock-step", "send-ahead"])
def test_block_numbers_wrap_past_65535_intact(tmp_path: Path, ahead: int) -> None:
    """70000 blocks of 64 bytes: the 16-bit block number wraps; the window never straddles the wrap."""
    data = os.urandom(70_000 * 64 + 3)
    (tmp_path / "big").write_bytes(data)
    srv = TftpServer(str(tmp_path), "127.0.0.1", 0, send_ahead=ahead).start()
    try:
        r = subprocess.run(["busybox", "tftp", "-g", "-b", "64", "-r", "big", "-l", str(tmp_path / "got"), "127.0.0.1",
                            str(srv.port)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "got").read_bytes() == data
    finally:
        srv.close()


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


# -- hostile requests (issue 22, item 4) -----------------------------------------------------------

def _ask(port: int, packet: bytes, source: str = "127.0.0.1") -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((source, 0))
        s.settimeout(5)
        s.sendto(packet, ("127.0.0.1", port))
        return s.recvfrom(70000)[0]


def _request(name: bytes, *words: bytes, mode: bytes = b"octet") -> bytes:
    return struct.pack("!H", 1) + name + b"\0" + mode + b"\0" + b"".join(w + b"\0" for w in words)


@pytest.mark.parametrize("packet,code,text", [
    (_request(b"f", b"blksize", b"4"), 8, b"blksize must be a whole number from 8 to 65464"),
    (_request(b"f", b"blksize", b"100000"), 8, b"blksize"),
    (_request(b"f", b"blksize", b"lots"), 8, b"blksize"),
    (_request(b"f", b"timeout", b"0"), 8, b"timeout must be a whole number from 1 to 255"),
    (_request(b"f", b"timeout", b"300"), 8, b"timeout"),
    (_request(b"f", b"tsize", b"big"), 8, b"tsize"),
    (_request(b"f", b"windowsize", b"0"), 8, b"windowsize"),
    (_request(b"f", b"blksize"), 8, b"has no value"),
    (_request(b"a" * 2000), 0, b"file name longer than 255 bytes"),
    (_request(b"a" * 300 + b"/" + b"b" * 3000), 0, b"request longer than 2048 bytes"),
    (_request(b"f", mode=b"mail"), 4, b"transfer mode"),
    (struct.pack("!H", 1) + b"f\0", 4, b"illegal TFTP operation"),
], ids=["blksize 4", "blksize 100000", "blksize words", "timeout 0", "timeout 300", "tsize words", "windowsize 0",
        "option without value", "2000-byte name", "2 KB request", "mode mail", "no mode"])
def test_a_bad_option_or_an_over_long_name_is_answered_with_an_error_packet(server, tmp_path, packet, code, text):
    """RFC 2347/2348/2349: these got no answer at all, and the client waited for nothing."""
    (server.root / "f").write_bytes(b"z" * 100)
    reply = _ask(server.port, packet)
    assert reply[:4] == struct.pack("!HH", 5, code) and text in reply and reply.endswith(b"\0"), reply
    assert get(server, "f", tmp_path / "got").returncode == 0  # and it keeps serving


def _status(pid: int) -> dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {"threads": int(fields["Threads"]), "rss_kb": int(fields["VmRSS"].split()[0]),
            "peak_rss_kb": int(fields["VmHWM"].split()[0])}


def test_a_flood_of_unanswered_requests_is_bounded_and_another_client_is_still_served(panio, tmp_path: Path):
    """Issue 22, item 4: 150 unacknowledged requests for a 4 MB file took the server to 593 MB and 152 threads.

    The netboot daemon (panio's TFTP server, a real process) gets 150 requests from one address (many ports)
    and 64 from as many other addresses, none ever acknowledged; its threads stay within MAX_TRANSFERS of
    where they were, its peak RSS grows by less than 16 MiB, refused requests get an ERROR "server busy",
    and a busybox client arriving after the flood still gets its file intact."""
    import threading

    from bench_agent.netboot import tftp
    from jobhelp import wait_for

    root = tmp_path / "tftp"
    root.mkdir()
    kernel = os.urandom(4 << 20)
    (root / "kernel.img").write_bytes(kernel)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    panio("init")
    panio("target", "add", "pico")
    panio("netboot", "set", "-t", "pico", "--interface", "lo", "--server", "panio", "--tftp-port", str(port),
          "--tftp-root", str(root))
    panio("netboot", "start", "pico")
    pid = panio("netboot", "status", "pico", "--json").json()["pid"]
    try:
        before = _status(pid)
        peak = {"threads": before["threads"]}
        flooding = threading.Event()

        def sample() -> None:
            while flooding.is_set():
                peak["threads"] = max(peak["threads"], _status(pid)["threads"])
                time.sleep(0.02)

        flooding.set()
        sampler = threading.Thread(target=sample)
        sampler.start()
        attackers = []
        for i in range(150 + 64):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.1.1", 0) if i < 150 else (f"127.0.2.{i - 149}", 0))
            opts = (b"blksize", b"65464", b"windowsize", b"64") if i % 2 else ()
            s.sendto(_request(b"kernel.img", *opts), ("127.0.0.1", port))
            attackers.append(s)
        r = subprocess.run(["busybox", "tftp", "-g", "-b", "1432", "-r", "kernel.img", "-l", str(tmp_path / "got"),
                            "127.0.0.1", str(port)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "got").read_bytes() == kernel
        wait_for(lambda: _status(pid)["threads"] <= before["threads"], timeout_s=30)  # every transfer ended
        flooding.clear()
        sampler.join()
        after = _status(pid)
        busy = 0
        for s in attackers:
            s.setblocking(False)
            try:
                while True:
                    packet = s.recv(70000)
                    busy += packet[:4] == struct.pack("!HH", 5, 0) and b"server busy" in packet
            except BlockingIOError:
                pass
            s.close()
        assert peak["threads"] <= before["threads"] + tftp.MAX_TRANSFERS, (before, peak)
        assert after["peak_rss_kb"] - before["rss_kb"] < 16 << 10, (before, after)
        assert busy >= 150 - tftp.MAX_PER_CLIENT
    finally:
        panio("netboot", "stop", "pico")
