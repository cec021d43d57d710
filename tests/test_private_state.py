"""Another local user and panio's files (issue 45): sockets, logs, caches and the results database are this user's
alone, a directory another user could reach is refused, and a cache another user planted is never believed.

Tests run as root; the other user is ``nobody``, a forked child that gave up root (``os.setuid``)."""

from __future__ import annotations

import hashlib
import marshal
import os
import select
import shutil
import socket
import stat
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest

from conftest import PANIO
from jobhelp import job_file
from serial_fixtures import Bench

NOBODY = 65534
LONG = "a-very-long-target-name-so-the-socket-goes-to-tmp"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to act as another user (nobody) too")


def as_nobody(work, *keep: int) -> int:
    """Run ``work()`` in a forked child as user nobody; its exit status (0: it returned)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            work()
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


class Listener:
    """A unix socket nobody listens on at ``path``: what root would send to a socket swapped in for its own."""

    def __init__(self, path: str) -> None:
        self.ready_r, ready_w = os.pipe()
        self.got_r, got_w = os.pipe()
        self.stop_r, self.stop_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                os.close(self.stop_w)  # the parent's close of its end is the signal to stop
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.bind(path)
                os.chmod(path, 0o777)
                s.listen(4)
                os.write(ready_w, b"1")
                got = b""
                while select.select([s, self.stop_r], [], [], 60)[0] == [s]:
                    conn, _ = s.accept()
                    conn.settimeout(5)
                    got += b"<connection>" + conn.recv(65536)
                    conn.sendall(b'{"ok": true, "result": {}}\n')
                os.write(got_w, got or b"-")
                code = 0
            finally:
                os._exit(code)
        os.close(ready_w)
        os.close(got_w)
        assert os.read(self.ready_r, 1) == b"1", "nobody could not listen"

    def received(self) -> bytes:
        os.close(self.stop_w)
        got = os.read(self.got_r, 1 << 20)
        os.waitpid(self.pid, 0)
        return b"" if got == b"-" else got


@pytest.fixture
def shared_tmp(panio):
    """A TMPDIR like /tmp (every user may make a directory in it, sticky), for panio's short socket paths."""
    path = Path(tempfile.mkdtemp(prefix="panio-shared-tmp-", dir="/tmp"))
    path.chmod(0o1777)
    panio.env["TMPDIR"] = str(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_root
def test_a_socket_directory_another_user_made_first_is_refused_and_gets_no_console_input(panio, tmp_path, shared_tmp):
    bench = Bench(panio, tmp_path)
    try:
        bench.board(LONG)
        theirs = shared_tmp / f"panio-{os.getuid()}"
        assert as_nobody(lambda: (os.mkdir(theirs), os.chmod(theirs, 0o777))) == 0
        r = panio.fails("serial", "watch", LONG, code=13)  # refused, with the directory named: never used
        assert str(theirs) in r.error["message"] and "uid 65534" in r.error["message"]
        assert bench.discovery(LONG) is None and os.listdir(theirs) == []
        # nobody listens where root's socket would be; root's console input must not reach it
        long_path = f"{bench.state}/run/serial-{LONG}.sock"
        listener = Listener(str(theirs / f"serial-{hashlib.sha256(long_path.encode()).hexdigest()[:24]}.sock"))
        sent = panio("serial", "send", LONG, "secret-password", check=False)
        assert listener.received() == b"", sent
        assert sent.code == 13, sent  # refused the same way, not sent elsewhere
        shutil.rmtree(theirs)  # the fix the refusal names: panio then makes its own, private
        panio("serial", "watch", LONG)
        st = os.lstat(theirs)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
        assert as_nobody(lambda: os.listdir(theirs)) != 0  # nobody can neither look in nor swap the socket
        assert panio("serial", "send", LONG, "echo hi").code == 0
    finally:
        bench.close()


def panio_umask0(panio, *args: str) -> subprocess.CompletedProcess:
    """``panio ARGS`` run with umask 000: what panio makes private must be private whatever the umask."""
    p = subprocess.run(["sh", "-c", 'umask 000; exec "$0" "$@"', PANIO, *args], env=panio.env, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


@needs_root
def test_logs_caches_sockets_and_results_are_this_users_alone_whatever_the_umask(panio, tmp_path):
    os.chmod(tmp_path, 0o755)  # nobody may walk to the state directory: only panio's own modes keep it out
    bench = Bench(panio, tmp_path)
    try:
        bench.board("pico")
        panio_umask0(panio, "target", "list")  # parses the lab: its parse is cached
        panio_umask0(panio, "serial", "watch", "pico")
        body = "[[steps]]\nname = 'hello'\nrun = 'serial send ${target} \"echo secret-words\"'\n"
        panio_umask0(panio, "job", "run", job_file(tmp_path, body), "--target", "pico")
        state = Path(panio.env["PANIO_STATE_DIR"])
        cache = Path(lab_cache_path_in(state, panio.lab))
        log = bench.state / "serial" / "pico" / "console.log"
        kept = {"parse cache": cache, "console log": log, "results database": state / "results.db"}
        for what, path in kept.items():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, what
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, what
            assert as_nobody(lambda path=path: path.read_bytes()) != 0, f"nobody read the {what}"
        sockets = Path(bench.discovery("pico")["socket"]).parent
        assert stat.S_IMODE(sockets.stat().st_mode) == 0o700 and sockets.stat().st_uid == os.geteuid()
        for path in [state, *state.rglob("*")]:  # all of it: daemons, leases, epochs, gap counts, the daemon's log
            mode = stat.S_IMODE(path.lstat().st_mode)
            assert mode == (0o700 if path.is_dir() else 0o600), f"{path} is {mode:o}"
        panio("serial", "stop", "pico")
    finally:
        bench.close()


def lab_cache_path_in(state: Path, lab: Path) -> str:
    """Where panio caches the parse of ``lab`` (``bench_agent.paths.lab_cache_path``) for state directory ``state``."""
    return str(state / "cache" / ("lab-" + os.path.abspath(lab).replace(os.sep, "%") + ".marshal"))


@needs_root
def test_a_parse_cache_another_user_planted_is_ignored(panio, shared_tmp):
    state, pwned = shared_tmp / "state", shared_tmp / "pwned"
    state.mkdir()
    state.chmod(0o777)  # a state directory another user can write: what they put there must not run as us
    panio.env["PANIO_STATE_DIR"] = str(state)
    panio("init")
    panio("target", "add", "pico")
    panio("target", "list")
    text = panio.lab.read_text()
    data = tomllib.loads(text)
    data["targets"]["pico"]["power"] = {"on_cmd": f"touch {pwned}"}
    planted = marshal.dumps({"text": text, "data": data})
    cache = Path(lab_cache_path_in(state, panio.lab))

    def plant() -> None:
        if (state / "cache").exists():
            os.rename(state / "cache", state / "cache-was-roots")
        os.mkdir(state / "cache", 0o755)
        cache.write_bytes(planted)

    assert as_nobody(plant) == 0
    panio.fails("power", "on", "pico", code=3)  # the lab has no power hook: the planted one is not believed
    assert not pwned.exists()
    assert cache.read_bytes() == planted  # and panio wrote nothing of its own where another user can reach


def test_the_netboot_daemons_state_is_this_users_alone_whatever_the_umask(panio, tmp_path):
    """The netboot daemon made its folders and wrote its discovery file, lock and the link's record with the
    umask (0777 and 0666 under umask 000), where every other daemon's are 0700 and 0600 (docs/security.md)."""
    root = tmp_path / "tftp"
    root.mkdir()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    panio("init")
    panio("target", "add", "pico")
    panio("netboot", "set", "-t", "pico", "--interface", "lo", "--server", "panio", "--tftp-port", str(port),
          "--tftp-root", str(root))
    panio_umask0(panio, "netboot", "start", "pico")
    try:
        state = Path(panio.env["PANIO_STATE_DIR"])
        made = [p for p in [state, *state.rglob("*")] if "netboot" in str(p.relative_to(state))]
        assert made, "the daemon left nothing in the state directory"
        for path in [state, *state.rglob("*")]:
            mode = stat.S_IMODE(path.lstat().st_mode)
            assert mode == (0o700 if path.is_dir() else 0o600), f"{path} is {mode:o}"
    finally:
        panio("netboot", "stop", "pico")
