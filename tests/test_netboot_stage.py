"""`panio netboot stage`: a build's file put into a target's TFTP root and fetched over TFTP by busybox's client
from panio's netboot daemon on loopback, also under a subfolder (pxelinux.cfg/default); what it refuses (outside
stage_from, a symlink that escapes, bad names, a subfolder planted as a symlink or a file, no stage_from); and a
`panio bisect` whose probes stage each build's kernel and fetch it as a board would."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from jobhelp import wait_for

pytestmark = pytest.mark.skipif(not shutil.which("busybox"), reason="busybox-static is installed by system-deps.sh")


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab(panio, tmp_path: Path, stage_from: bool = True) -> tuple[Path, Path, int]:
    """pico netboots from panio's TFTP server on loopback: (its TFTP root, its stage_from folder, the port)."""
    root, builds, port = tmp_path / "tftp", tmp_path / "builds", _free_udp_port()
    root.mkdir()
    builds.mkdir()
    panio("init")
    panio("target", "add", "pico")
    panio("netboot", "set", "-t", "pico", "--interface", "lo", "--server", "panio", "--tftp-port", str(port),
          "--tftp-root", str(root), *(("--stage-from", str(builds)) if stage_from else ()))
    return root, builds, port


def _fetch(port: int, name: str, local: Path) -> bytes:
    r = subprocess.run(["busybox", "tftp", "-g", "-b", "1432", "-r", name, "-l", str(local), "127.0.0.1", str(port)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return local.read_bytes()


def test_a_staged_file_is_served_over_tftp_and_replaces_what_was_there(panio, tmp_path: Path) -> None:
    root, builds, port = _lab(panio, tmp_path)
    (builds / "v6.9").mkdir()
    kernel = os.urandom(700_000)
    (builds / "v6.9" / "Image").write_bytes(kernel)
    (builds / "latest").symlink_to(builds / "v6.9")  # a link that stays inside the folder is followed
    victim = tmp_path / "victim"
    victim.write_bytes(b"not to be overwritten")
    (root / "kernel8.img").symlink_to(victim)  # a link at the destination is replaced, never written through
    panio("netboot", "start", "pico")
    try:
        staged = panio("netboot", "stage", "pico", str(builds / "latest" / "Image"), "--as", "kernel8.img",
                       "--json").json()
        assert staged["source"] == str(builds / "v6.9" / "Image") and staged["bytes"] == len(kernel)
        import hashlib

        assert staged["sha256"] == hashlib.sha256(kernel).hexdigest()
        assert _fetch(port, "kernel8.img", tmp_path / "got") == kernel
        assert victim.read_bytes() == b"not to be overwritten"
        assert not (root / "kernel8.img").is_symlink()
        assert sorted(p.name for p in root.iterdir()) == ["kernel8.img"]  # no temporary file left behind

        (builds / "v6.9" / "Image").write_bytes(b"rebuilt")  # staged again: the board gets the new one
        out = panio("netboot", "stage", "pico", str(builds / "v6.9" / "Image")).out  # NAME: the file's own
        assert "as " + str(root / "Image") in out
        assert _fetch(port, "Image", tmp_path / "got2") == b"rebuilt"
    finally:
        panio("netboot", "stop", "pico")


def test_what_stage_refuses(panio, tmp_path: Path) -> None:
    root, builds, _ = _lab(panio, tmp_path)
    (builds / "Image").write_bytes(b"k")
    secret = tmp_path / "secret"
    secret.write_text("key")
    (builds / "escape").symlink_to(secret)  # inside by its path, outside by where it leads
    (builds / "up").symlink_to(tmp_path)  # a folder link out: builds/up/secret
    (builds / "sub").mkdir()
    os.mkfifo(builds / "fifo")

    refused = {str(secret): "is not inside the stage_from folder", str(builds / "escape"): "is not inside",
               str(builds / "up" / "secret"): "is not inside", str(builds / ".." / "secret"): "is not inside",
               str(builds / "sub"): "not a regular file", str(builds / "fifo"): "not a regular file"}
    for source, why in refused.items():
        assert why in panio.fails("netboot", "stage", "pico", source, "--as", "k", code=13).error["message"], source
    for name in ("../k", "a/../k", "/abs/k", "a//k", "k/", "a/.k", ".hidden/k", "..", "-x", "k\n", "tab\there", "",
                 "a/" * 8 + "k"):
        e = panio.fails("netboot", "stage", "pico", str(builds / "Image"), f"--as={name}", code=2).error
        assert e["argument"] == "name", name
    panio.fails("netboot", "stage", "pico", "https://ci.example/Image", code=2)
    panio.fails("netboot", "stage", "pico", str(builds / "missing"), code=3)
    assert list(root.iterdir()) == []

    for folder in ("/etc", "/", str(tmp_path / "home"), "relative/dir"):  # the folder itself: the root's rules
        panio.fails("netboot", "set", "-t", "pico", "--stage-from", folder, code=2)
    panio("netboot", "set", "-t", "pico", "--stage-from", "")  # removed: nothing can be staged
    e = panio.fails("netboot", "stage", "pico", str(builds / "Image"), code=3).error
    assert "stage_from" in e["message"] and "--stage-from DIR" in e["hint"]
    assert "stage_from" not in panio.lab.read_text()

    text = panio.lab.read_text().replace('tftp_root = ', 'stage_from = "/etc/ssl"\ntftp_root = ', 1)
    panio.lab.write_text(text)  # by hand: the lab file's own check
    assert "stage_from" in panio.fails("netboot", "stage", "pico", "/etc/ssl/x", code=5).error["message"]


def test_a_file_staged_in_subfolders_is_served_over_tftp(panio, tmp_path: Path) -> None:
    root, builds, port = _lab(panio, tmp_path)
    (builds / "default").write_text("DEFAULT linux\nLABEL linux\n  KERNEL kernels/v5/bzImage\n")
    kernel = os.urandom(300_000)
    (builds / "bzImage").write_bytes(kernel)
    (root / "pxelinux.cfg").mkdir(mode=0o700)  # a folder already there is used as it is
    old = os.umask(0o077)
    try:
        staged = panio("netboot", "stage", "pico", str(builds / "bzImage"), "--as", "kernels/v5/bzImage",
                       "--json").json()
    finally:
        os.umask(old)
    assert staged["name"] == "kernels/v5/bzImage" and staged["path"] == str(root / "kernels" / "v5" / "bzImage")
    assert (root / "kernels").stat().st_mode & 0o777 == 0o755  # made readable whatever the umask
    assert (root / "kernels" / "v5").stat().st_mode & 0o777 == 0o755
    panio("netboot", "stage", "pico", str(builds / "default"), "--as", "pxelinux.cfg/default")
    assert (root / "pxelinux.cfg").stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in (root / "kernels" / "v5").iterdir()) == ["bzImage"]  # no temporary file left
    panio("netboot", "start", "pico")
    try:
        assert _fetch(port, "pxelinux.cfg/default", tmp_path / "got-cfg").startswith(b"DEFAULT linux")
        assert _fetch(port, "kernels/v5/bzImage", tmp_path / "got-kernel") == kernel
    finally:
        panio("netboot", "stop", "pico")


def test_a_subfolder_planted_as_a_symlink_or_a_file_is_refused(panio, tmp_path: Path) -> None:
    root, builds, _ = _lab(panio, tmp_path)
    (builds / "default").write_text("DEFAULT evil\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "pxelinux.cfg").symlink_to(outside)  # what a board fetches is written to a folder out of the root
    (root / "kernels").mkdir()
    (root / "kernels" / "v5").symlink_to(outside)  # deeper down
    (root / "inner").mkdir()
    (root / "alias").symlink_to(root / "inner")  # even one that stays inside: a folder is a folder
    (root / "file").write_text("x")
    for name, why in (("pxelinux.cfg/default", "is a symlink"), ("kernels/v5/bzImage", "is a symlink"),
                      ("alias/default", "is a symlink"), ("file/default", "is not a folder")):
        e = panio.fails("netboot", "stage", "pico", str(builds / "default"), "--as", name, code=13).error
        assert why in e["message"] and str(root / name.rsplit("/", 1)[0]) in e["message"], (name, e)
    assert list(outside.iterdir()) == [] and list((root / "inner").iterdir()) == []
    assert sorted(p.name for p in root.iterdir()) == ["alias", "file", "inner", "kernels", "pxelinux.cfg"]


def test_a_bisection_stages_each_builds_kernel_and_the_board_fetches_it(panio, tmp_path: Path) -> None:
    """Each probe stages its build's kernel (`${build.kernel}`) as kernel8.img and a TFTP client (busybox, as a
    board's bootloader would) fetches it and prints it: a bad build's kernel holds a BUG line the job rejects."""
    root, builds, port = _lab(panio, tmp_path)
    panio("action", "add", "boot", "-t", "pico", "--command",
          f"busybox tftp -g -r kernel8.img -l /dev/stdout 127.0.0.1 {port}")
    lines = []
    for i in range(1, 9):
        (builds / f"b{i:02d}.img").write_text("BUG: oops at 0000dead\n" if i >= 6 else "boot ok\n")
        lines.append(f"b{i:02d} kernel={builds / f'b{i:02d}.img'}\n")
    (tmp_path / "builds.txt").write_text("".join(lines))
    (tmp_path / "boot.toml").write_text("""name = "netboot"
[[steps]]
name = "serve"
run = "panio netboot start ${target}"
[[steps]]
name = "stage ${build}"
run = "panio netboot stage ${target} ${build.kernel} --as kernel8.img"
expect_output = "staged"
[[steps]]
name = "boots clean"
run = "panio action run ${target} boot"
reject_output = "BUG:"
""")
    try:
        r = panio("bisect", "start", str(tmp_path / "boot.toml"), "--target", "pico", "--good", "b01", "--bad",
                  "b08", "--builds", str(tmp_path / "builds.txt"), "--json", timeout=180).json()
        assert r["first_bad"] == "b06", r
        probed = {p["build"] for p in r["probes"]}
        assert {"b05", "b06"} <= probed

        def fetched() -> int:  # the server logs a file once its last ACK is in, just after the client exits
            files = panio("netboot", "status", "pico", "--tail", "50", "--json").json()["files"]
            return len([f for f in files if f["result"] == "sent" and f["file"].endswith("kernel8.img")])

        wait_for(lambda: fetched() == len(r["probes"]), timeout_s=30)  # each probe's board fetched its kernel
        last = r["probes"][-1]
        steps = panio("job", "logs", str(last["job_id"]), "--json").json()
        assert str(builds / f"{last['build']}.img") in steps[1]["output"], steps  # what the step staged
        assert ("BUG: oops" in steps[2]["output"]) is (last["build"] >= "b06"), steps  # what the board fetched
    finally:
        panio("netboot", "stop", "pico")


def test_a_broker_message_cannot_widen_stage_from(tmp_path: Path) -> None:
    """Over the broker the netboot table (stage_from with it) is the host's own: a message that carries a wider
    one is refused, one that carries none gets the host's."""
    from bench_agent import ops
    from bench_agent.errors import Refused
    from bench_agent.jobs.host_config import HostConfig

    lab = tmp_path / "lab.toml"
    lab.write_text('[targets.t1]\nhost = "h1"\n[targets.t1.netboot]\ninterface = "lo"\nstage_from = "/srv/builds"\n')
    config = HostConfig(lab, "h1")
    code = ops.lookup("netboot.stage").__code__
    taken = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    params = {p.name for p in ops.spec("netboot.stage").params}
    request = {"target": "t1", "source": "/etc/shadow", "name": "k"}
    assert config.enforce("netboot.stage", request, params, taken)["netboot"]["stage_from"] == "/srv/builds"
    with pytest.raises(Refused, match="netboot differs"):
        config.enforce("netboot.stage", {**request, "netboot": {"interface": "lo", "stage_from": "/etc"}}, params,
                       taken)
