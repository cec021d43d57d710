"""QemuBoard: a board that runs a real Linux kernel under QEMU (TCG), wired like a bench board.

    serial   QEMU's ttyS0 on a PTY, linked at DIR/NAME.tty
    power    hooks that run ``python -m bench_agent.sim.qemu power --dir DIR --name NAME on|off|cycle|state``:
             on = start QEMU, off = QMP ``quit`` (the plug pulled), cycle = QMP ``system_reset``
             (start when off), state = is QEMU running
    video    ``qmp:DIR/NAME.video.qmp`` (QMP ``screendump`` of the VGA screen)
    hid      ``DIR/NAME.hid.qmp`` with protocol qmp (``input-send-event``: keyboard, usb-tablet)

With ``netboot`` (``panio-sim up --qemu --qemu-netboot``) the board has no ``-kernel``: its e1000
NIC's iPXE ROM takes ``bootfile=tftp://10.0.2.2:PORT/boot.ipxe`` from QEMU's user-networking DHCP
and fetches the same kernel and initramfs from ``DIR/NAME.tftp`` through panio's own TFTP
server on the host's loopback (the lab's ``netboot`` table: ``panio netboot start NAME``
serves it). Until that server runs, the firmware finds nothing to boot and retries.

Each role has its own QMP socket (QEMU serves one client per socket). QEMU
starts paused (``-S``) so the serial PTY can be linked before the first byte
(QEMU drops output written while no one has the PTY open); ``/dev/kvm`` is not
used (it hangs here: QEMU-BOARD.md). Settings measured in QEMU-BOARD.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_agent.errors import DeviceError, NotConfigured
from bench_agent.qmp import QMPClient, wait_socket
from bench_agent.sim import qemu_image

QEMU = "qemu-system-x86_64"
START_TIMEOUT_S = 20.0
APPEND = "console=tty0 console=ttyS0,115200 loglevel=3"


def paths(directory: Path, name: str) -> dict[str, Path]:
    return {k: directory / f"{name}.{suffix}" for k, suffix in
            (("tty", "tty"), ("power", "power.qmp"), ("video", "video.qmp"), ("hid", "hid.qmp"),
             ("pid", "qemu.pid"), ("log", "qemu.log"), ("boot", "boot.json"), ("tftp", "tftp"))}


def ipxe_script(base_url: str, append: str = "console=ttyS0,115200 loglevel=3 panic=-1") -> str:
    """An iPXE script that fetches the kernel and initrd from BASE_URL and boots them."""
    return (f"#!ipxe\nkernel {base_url}/vmlinuz {append}\ninitrd {base_url}/initrd.img\nboot\n")


def prepare_netboot(directory: Path, name: str, tftp_port: int) -> Path:
    """Fill the board's TFTP root (iPXE script, kernel, initramfs) and record that it boots from the network."""
    import shutil

    p, kernel = paths(directory, name), qemu_image.kernel()
    p["tftp"].mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kernel, p["tftp"] / "vmlinuz")
    shutil.copyfile(qemu_image.initramfs(directory, kernel), p["tftp"] / "initrd.img")
    (p["tftp"] / "boot.ipxe").write_text(ipxe_script(f"tftp://10.0.2.2:{tftp_port}", APPEND))
    p["boot"].write_text(json.dumps({"netboot": True, "tftp_port": tftp_port, "tftp_root": str(p["tftp"])}))
    return p["tftp"]


def boot_settings(directory: Path, name: str) -> dict[str, Any]:
    """``{"netboot": True, "tftp_port": P, "tftp_root": DIR}`` for a netbooting board, else ``{}``."""
    try:
        return json.loads(paths(directory, name)["boot"].read_text())
    except (OSError, ValueError):
        return {}


def _boot_argv(directory: Path, name: str) -> list[str]:
    nb = boot_settings(directory, name)
    if nb.get("netboot"):
        return ["-netdev", f"user,id=n0,bootfile=tftp://10.0.2.2:{nb['tftp_port']}/boot.ipxe",
                "-device", "e1000,netdev=n0", "-boot", "n"]
    kernel = qemu_image.kernel()
    return ["-kernel", str(kernel), "-initrd", str(qemu_image.initramfs(directory, kernel)), "-append", APPEND]


def running_pid(directory: Path, name: str) -> int | None:
    """QEMU's pid when this board's QEMU runs (checked against its command line, not just the pid file)."""
    p = paths(directory, name)
    try:
        pid = int(p["pid"].read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError):
        return None
    return pid if QEMU.encode() in argv and str(p["power"]).encode() in argv and stat != "Z" else None


def start(directory: Path, name: str, memory_mb: int = 256) -> int:
    """Start QEMU (powered on), link its serial PTY, let it run; returns its pid."""
    import shutil

    if shutil.which(QEMU) is None:
        raise NotConfigured(f"{QEMU} is not installed", hint="install qemu-system-x86 (scripts/system-deps.sh does)")
    p = paths(directory, name)
    for key in ("power", "video", "hid", "pid"):
        p[key].unlink(missing_ok=True)
    argv = [QEMU, "-M", "pc", "-accel", "tcg", "-m", str(memory_mb), "-smp", "1", "-vga", "std",
            "-display", "none", "-S", "-no-user-config", "-nodefaults", "-serial", "pty",
            "-usb", "-device", "usb-tablet", "-pidfile", str(p["pid"]), "-name", f"panio-{name}",
            *_boot_argv(directory, name), "-device", "VGA"]
    for key in ("power", "video", "hid"):
        argv += ["-qmp", f"unix:{p[key]},server=on,wait=off"]
    argv = [a for a in argv if a not in ("-vga", "std")]  # -nodefaults: the VGA device is added explicitly
    with open(p["log"], "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                close_fds=True, cwd="/")
    try:
        wait_socket(str(p["power"]), START_TIMEOUT_S)
        with QMPClient(str(p["power"])) as qmp:
            pty = next(c["filename"].removeprefix("pty:") for c in qmp.execute("query-chardev")
                       if c["filename"].startswith("pty:"))
            _symlink(pty, p["tty"])
            qmp.execute("cont")
    except BaseException:
        proc.kill()
        proc.wait(5)
        raise
    return proc.pid


def _symlink(target: str, link: Path) -> None:
    tmp = link.with_name(link.name + ".tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def stop(directory: Path, name: str) -> bool:
    """Power off: QMP ``quit``, else SIGKILL. False when it was not running."""
    pid = running_pid(directory, name)
    if pid is None:
        return False
    try:
        with QMPClient(str(paths(directory, name)["power"]), timeout_s=2) as qmp:
            qmp.execute("quit")
    except Exception:  # noqa: BLE001 - a wedged QEMU is killed below either way
        pass
    end = time.monotonic() + 5
    while running_pid(directory, name) and time.monotonic() < end:
        _reap(pid)
        time.sleep(0.02)
    if running_pid(directory, name):
        os.kill(pid, signal.SIGKILL)
    _reap(pid)
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def power(directory: Path, name: str, verb: str) -> str:
    if verb == "state":
        return "on" if running_pid(directory, name) else "off"
    if verb == "off":
        stop(directory, name)
    elif verb == "on" and not running_pid(directory, name):
        start(directory, name)
    elif verb == "cycle":
        if running_pid(directory, name):
            with QMPClient(str(paths(directory, name)["power"])) as qmp:
                qmp.execute("system_reset")
        else:
            start(directory, name)
    return verb


def describe(directory: Path, name: str) -> dict[str, Any]:
    p = paths(directory, name)
    hook = [sys.executable, "-P", "-m", "bench_agent.sim.qemu", "power", "--dir", str(directory), "--name", name]
    nb = boot_settings(directory, name)
    return {"name": name, "kind": "qemu", "pid": running_pid(directory, name), "tty": str(p["tty"]),
            "video": f"qmp:{p['video']}", "hid": str(p["hid"]),
            "power": {f"{verb}_cmd": shlex.join(hook + [verb]) for verb in ("on", "off", "cycle", "state")},
            **({"netboot": {"tftp_port": nb["tftp_port"], "tftp_root": nb["tftp_root"]}} if nb.get("netboot") else {})}


def lab_table(b: dict[str, Any]) -> dict[str, Any]:
    """The lab file's target table for a described QEMU board (tag qemu, not sim: the bundled suite's jobs expect
    the simulated console's U-Boot and prompt)."""
    table = {"description": "QEMU board: a real Linux kernel and busybox under TCG", "tags": ["qemu"],
             "serial": [{"name": "console", "device": b["tty"], "baud": 115200}],
             "power": {**b["power"], "timeout_s": 30}, "video": {"device": b["video"]},
             "hid": {"device": b["hid"], "protocol": "qmp"},
             "profile": {"prompt": "qemu# "}}  # how checks recognise it (busybox's PS1, qemu_image.PROMPT)
    if b.get("netboot"):  # QEMU's user networking reaches the host's loopback: panio's own TFTP server, no root
        table["netboot"] = {"interface": "lo", "server": "panio", "tftp_port": b["netboot"]["tftp_port"],
                            "tftp_root": b["netboot"]["tftp_root"]}
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench_agent.sim.qemu", description="Power a QEMU board.")
    sub = p.add_subparsers(dest="cmd", required=True)
    pw = sub.add_parser("power", help="on | off | cycle | state (the lab's power hooks call this)")
    pw.add_argument("--dir", required=True, type=Path)
    pw.add_argument("--name", required=True)
    pw.add_argument("verb", choices=("on", "off", "cycle", "state"))
    a = p.parse_args(argv)
    try:
        print(power(a.dir, a.name, a.verb))
    except (DeviceError, NotConfigured, OSError) as exc:
        print(f"qemu board {a.name}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
