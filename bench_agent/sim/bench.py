"""panio-sim: start and stop a simulated bench (boards behind Shelly-protocol plugs) and write its lab file.

    panio-sim up [--dir DIR] [--boards N] [--gen 1|2] [--password PW] [--qemu [--qemu-netboot]]
                 [--no-screen] [--one-process]
    panio-sim status [--dir DIR] [--json]
    panio-sim down [--dir DIR]
    panio-sim inject BOARD [--dir DIR] --boot-line TEXT | --drop-line TEXT | --boot-delay-s S | --no-prompt
                     | --version TEXT | --clear

``up`` starts one detached process per board (``bench_agent.sim.board``;
``--one-process``: one for all the bench's boards, each still its own console PTY and plug port),
waits until each is ready, and writes ``DIR/lab.toml`` (targets ``board0``,
``board1``, ... with a serial console whose CTS line senses power, and power
hooks that call the real ``shellyplug`` helper over HTTP), ``DIR/sim.pids`` and
the bundled jobs (``DIR/boot.toml``, ``DIR/suite.toml``: power-cycle, boot to a
shell, answer on the console, on every board). Each simulated board also has a
screen (MJPEG on loopback: the ``video`` channel) and a CH9329 HID rig on a PTY
(the ``hid`` channel). ``--qemu`` adds ``qemu0``, a QEMU board running a real
kernel (``bench_agent.sim.qemu``: serial, power, screen and input).
``down`` stops exactly the processes listed there, and the daemons (of this
state directory) that use their devices: serial and video captures, netboot
servers. A bench started with ``--dir`` is noted in the state directory
(``sim.benches``), so ``status``, ``down`` and ``inject`` without ``--dir`` find
it when it is the only one running. Not part of ``panio --help``.
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

from bench_agent.errors import Busy, DeviceError, NotRunning, UsageError

PIDFILE = "sim.pids"
BENCHES = "sim.benches"  # in the state directory: the benches started with --dir (JSON list of paths)
BOARD_MODULE = "bench_agent.sim.board"
ANDROID_MODULE = "bench_agent.sim.android"
READY_TIMEOUT_S = 10.0


def default_dir() -> Path:
    """``$PANIO_STATE_DIR/sim``, else the per-user state directory's ``sim``."""
    from bench_agent.paths import state_dir

    return state_dir() / "sim"


def up(directory: Path, boards: int, gen: int, password: str | None, boot_s: float, countdown_s: float,
       qemu: bool = False, qemu_netboot: bool = False, look: list[str] | None = None,
       one_process: bool = False, android: bool = False) -> list[dict]:
    """``look``: ``bench_agent.sim.board`` options giving every board another design's look (``--prompt P``,
    ``--banner B``, ``--no-setup``, ``--no-screen``); the lab's ``profile`` tables describe it.
    ``one_process``: every board in one process (each still its own console PTY and plug port).
    ``android``: add tablet0, a simulated Android device that Debian's `adb` reaches over TCP (sim/android.py)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot use {directory} as the bench's directory: {exc.strerror or exc}",
                         hint="give --dir a folder you can write, or leave it out (the state directory's sim/)",
                         ) from None
    if alive(read_pids(directory)):
        raise Busy(f"a simulated bench is already running in {directory}", hint=f"stop it with `panio-sim down --dir {directory}`")
    groups = [[f"board{i}" for i in range(boards)]] if one_process and boards else \
        [[f"board{i}"] for i in range(boards)]
    procs = [_spawn(directory, names, gen, password, boot_s, countdown_s, look or []) for names in groups]
    if android:
        procs.append(_spawn_android(directory, "tablet0"))
    try:
        described = [_wait_ready(directory, name, proc) for names, proc in procs for name in names]
        if qemu:
            from bench_agent.sim import qemu as qemu_board

            qemu_board.paths(directory, "qemu0")["boot"].unlink(missing_ok=True)
            if qemu_netboot:
                qemu_board.prepare_netboot(directory, "qemu0", _free_udp_port())
            qemu_board.start(directory, "qemu0")
            described.append(qemu_board.describe(directory, "qemu0"))
    except BaseException:
        _stop([proc.pid for _, proc in procs], directory)
        raise
    _write_json(directory / PIDFILE, described)
    (directory / "lab.toml").write_text(lab_toml(described, password))
    copy_jobs(directory)
    if directory != default_dir().resolve():
        _note_bench(directory, keep=True)
    return described


def _benches_file() -> Path:
    return default_dir().parent / BENCHES


def _note_bench(directory: Path, keep: bool) -> None:
    """Add ``directory`` to (``keep``) or drop it from the state directory's list of benches started with --dir."""
    path = _benches_file()
    try:
        known = [d for d in json.loads(path.read_text()) if isinstance(d, str)]
    except (OSError, ValueError, TypeError):
        known = []
    known = [d for d in known if d != str(directory)] + ([str(directory)] if keep else [])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(path, known)
    except OSError:
        pass  # a note for convenience only: `--dir` still finds the bench


def find_bench() -> Path:
    """The bench a command without ``--dir`` means: the default directory's, else the one bench started with
    ``--dir`` that still runs; several such benches is a usage error that lists them."""
    default = default_dir().resolve()
    if read_pids(default):
        return default
    try:
        noted = [Path(d) for d in json.loads(_benches_file().read_text()) if isinstance(d, str)]
    except (OSError, ValueError, TypeError):
        noted = []
    running = [d for d in noted if alive(read_pids(d), d) or any(b.get("kind") == "qemu" for b in read_pids(d))]
    if len(running) == 1:
        return running[0]
    if len(running) > 1:
        raise UsageError(f"{len(running)} simulated benches run: " + ", ".join(map(str, running)),
                         hint="say which with --dir DIR")
    return default


JOBS = Path(__file__).resolve().parent / "jobs"


def _free_udp_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_jobs(directory: Path) -> list[Path]:
    """Put the bundled job files (a boot job and a suite running it on every board) beside the lab."""
    copied = []
    for job in sorted(JOBS.glob("*.toml")):
        dest = directory / job.name
        dest.write_text(job.read_text())
        copied.append(dest)
    return copied


def _spawn(directory: Path, names: list[str], gen: int, password: str | None, boot_s: float,
           countdown_s: float, look: list[str]) -> tuple[list[str], subprocess.Popen]:
    """One process hosting the boards ``names`` (its log is the first one's)."""
    for name in names:
        for stale in (directory / f"{name}.json", directory / f"{name}.faults.json"):  # a new board boots clean
            stale.unlink(missing_ok=True)
    argv = [sys.executable, "-P", "-m", BOARD_MODULE, "--dir", str(directory),
            *[arg for name in names for arg in ("--name", name)], "--gen", str(gen),
            "--boot-s", str(boot_s), "--countdown-s", str(countdown_s), *look]
    env = {**os.environ, "PANIO_SIM_PASSWORD": password or ""}
    with open(directory / f"{names[0]}.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True)
    proc.log_name = names[0]
    return names, proc


def _spawn_android(directory: Path, name: str) -> tuple[list[str], subprocess.Popen]:
    (directory / f"{name}.json").unlink(missing_ok=True)
    argv = [sys.executable, "-P", "-m", ANDROID_MODULE, "--dir", str(directory), "--name", name]
    with open(directory / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    proc.log_name = name
    return [name], proc


def _wait_ready(directory: Path, name: str, proc: subprocess.Popen) -> dict:
    ready, end = directory / f"{name}.json", time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < end:
        if ready.exists():
            return json.loads(ready.read_text())
        if proc.poll() is not None:
            tail = (directory / f"{proc.log_name}.log").read_text(errors="replace").strip().splitlines()[-1:]
            raise DeviceError(f"simulated {name} exited {proc.returncode} at start: {' '.join(tail)}", board=name)
        time.sleep(0.05)
    raise DeviceError(f"simulated {name} not ready after {READY_TIMEOUT_S:g} s (see {directory / (name + '.log')})")


def lab_toml(boards: list[dict], password: str | None) -> str:
    """A lab file whose targets are the simulated boards."""
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment("Written by `panio-sim up`: simulated boards behind simulated Shelly plugs."))
    targets = tomlkit.table(is_super_table=True)
    for b in boards:
        if b.get("kind") == "qemu":
            from bench_agent.sim.qemu import lab_table

            targets[b["name"]] = lab_table(b)
            continue
        if b.get("kind") == "android":
            targets[b["name"]] = android_table(b)
            continue
        plug = ["shellyplug", "-d", b["plug"]] + (["-p", password] if password else [])
        hook = {verb: shlex.join(plug + [verb]) for verb in ("on", "off", "cycle", "state")}
        t = tomlkit.table()
        t["description"] = f"simulated board (Gen{b['gen']} plug on {b['plug']})"
        t["tags"] = ["sim"]
        serial = tomlkit.aot()
        serial.append(tomlkit.item({"name": "console", "device": b["device"], "baud": 115200,
                                    "power_sense_signal": "CTS"}))
        t["serial"] = serial
        t["power"] = {f"{verb}_cmd": cmd for verb, cmd in hook.items()} | {"cycle_off_s": 1.0}
        if b.get("video"):
            t["video"] = {"device": b["video"]}
        if b.get("hid"):
            t["hid"] = {"device": b["hid"], "protocol": "ch9329", "baud": 9600,
                        "reply_timeout_ms": 10_000}  # the simulated rig is a process a loaded host can pause
        if b.get("profile"):  # how checks recognise the board (the eval's hardware tier): docs/lab-file.md
            t["profile"] = b["profile"]
        targets[b["name"]] = t
    doc["targets"] = targets
    return tomlkit.dumps(doc)


def android_table(b: dict) -> dict:
    """The lab entry of a simulated Android device: its adb serial (console, screen and input follow from it)
    and a reboot hook, as a real tablet's (docs/adb.md)."""
    reboot = shlex.join(["adb", "-s", b["serial"], "reboot"])
    state = shlex.join(["sh", "-c", f"adb -s {shlex.quote(b['serial'])} get-state 2>/dev/null | grep -qx device "
                                    "&& echo on || echo off"])
    return {"description": f"simulated Android device (adb over TCP, {b['size']})", "tags": ["sim", "android"],
            "adb": {"serial": b["serial"]}, "power": {"cycle_cmd": reboot, "state_cmd": state}}


def read_pids(directory: Path) -> list[dict]:
    try:
        return json.loads((directory / PIDFILE).read_text())
    except (OSError, ValueError):
        return []


def ours(pid: int, directory: Path) -> bool:
    """Is ``pid`` still a board process of this bench (not a recycled pid)?"""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (BOARD_MODULE.encode() in argv or ANDROID_MODULE.encode() in argv) and str(directory).encode() in argv


def alive(boards: list[dict], directory: Path | None = None) -> list[dict]:
    return [b for b in boards if b.get("kind") != "qemu"
            and ours(b["pid"], directory or Path(b.get("state_file") or b.get("state_dir")).parent)]


def down(directory: Path) -> tuple[int, list[dict]]:
    """Stop the bench's boards and the serial captures reading their consoles; (boards, captures stopped)."""
    boards = read_pids(directory)
    if not boards:
        raise NotRunning(f"no simulated bench in {directory}", hint="start one with `panio-sim up`")
    captures = stop_captures(boards)
    for b in boards:
        if b.get("kind") == "qemu":
            from bench_agent.sim import qemu

            qemu.stop(directory, b["name"])
    _stop([b["pid"] for b in boards if b.get("kind") != "qemu"], directory)
    (directory / PIDFILE).unlink(missing_ok=True)
    _note_bench(directory, keep=False)
    return len(boards), captures


def stop_captures(boards: list[dict]) -> list[dict]:
    """Daemons that use the bench's devices (serial and video captures, netboot servers) would outlive it,
    disconnected: stop them, in whichever lab of this state directory started them (the devices are the
    bench's own, so no other lab's daemon can be reading them)."""
    from bench_agent.daemons import registry as daemons
    from bench_agent.paths import known_labs, using_lab

    devices = {b.get(key) for b in boards for key in ("device", "tty", "video")}
    devices |= {b["netboot"]["tftp_root"] for b in boards if b.get("netboot")}
    devices |= {f"{scheme}{b['serial']}" for b in boards if b.get("kind") == "android" for scheme in ("adb://", "adb:")}
    stopped = []
    for lab in [None, *known_labs()]:  # None: the bare state directory (no lab, or from before labs)
        with using_lab(lab):
            for entry in daemons.daemons_of(devices - {None}):
                try:
                    stopped.append(daemons.stop_daemon(entry))
                except NotRunning:  # it stopped on its own meanwhile
                    continue
    # and those of other state directories: the workers of two hosts on one machine each keep their own
    done = {s.get("pid") for s in stopped}
    for entry in daemons.daemons_anywhere(devices - {None}):
        if entry["pid"] not in done:
            how = daemons.terminate(entry["pid"], entry["name"], entry["name"], False)
            stopped.append({"name": entry["name"], "pid": entry["pid"], "how": how, "state_dir": entry["state_dir"]})
    return stopped


def _stop(pids: list[int], directory: Path) -> None:
    mine = [pid for pid in dict.fromkeys(pids) if ours(pid, directory)]  # boards sharing a process: once
    for pid in mine:
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 5
    while any(ours(pid, directory) for pid in mine) and time.monotonic() < end:
        _reap(mine)
        time.sleep(0.05)
    for pid in mine:
        if ours(pid, directory):
            os.kill(pid, signal.SIGKILL)
    _reap(mine)


def _reap(pids: list[int]) -> None:
    """Collect our own exited children (when up and down run in one process)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def status(directory: Path) -> list[dict[str, Any]]:
    out = []
    for b in read_pids(directory):
        if b.get("kind") == "qemu":
            from bench_agent.sim import qemu

            pid = qemu.running_pid(directory, b["name"])
            out.append({**b, "pid": pid, "running": True, "power": "on" if pid else "off", "pty": b["tty"],
                        "plug": "QMP"})
            continue
        running = ours(b["pid"], directory)
        if b.get("kind") == "android":
            out.append({**b, "running": running, "power": "on" if running else "off", "pty": "-",
                        "plug": f"adb {b['serial']}"})
            continue
        power = Path(b["state_file"]).read_text().strip() if running and Path(b["state_file"]).exists() else "off"
        out.append({**b, "running": running, "power": power})
    return out


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}", hint=f"see `{self.prog} --help`")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="panio-sim", description="Run a simulated bench: boards whose consoles boot on PTYs, "
                "powered through plugs that speak the real Shelly HTTP APIs on loopback.",
                epilog="example:\n  panio-sim up --boards 2 && export PANIO_LAB=$(panio-sim status --lab)\n"
                       "  panio power-cycle board0\n  panio-sim down\n\nsee also: docs/simulator.md",
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", metavar="COMMAND", parser_class=_Parser, required=True)
    def verb(name: str, summary: str, details: str, example: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.\n\n{details}",
                              epilog=f"example:\n  {example}\n\nsee also: panio-sim --help, docs/simulator.md",
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    u = verb("up", "start the boards and write DIR/lab.toml",
             "Each board is a console on a PTY that boots when its plug switches on, and a plug that\n"
             "speaks the Shelly HTTP API on loopback. The lab file wires them as targets board0...", "panio-sim up --boards 2")
    u.add_argument("--boards", type=int, default=1, help="how many boards (default 1)")
    u.add_argument("--gen", type=int, choices=(1, 2), default=2, help="plug API generation (default 2)")
    u.add_argument("--password", help="protect the plugs with this password (digest auth on Gen2)")
    u.add_argument("--boot-s", type=float, default=1.0, help="seconds of boot log (default 1)")
    u.add_argument("--countdown-s", type=float, default=3.0, help="seconds of autoboot countdown (default 3)")
    u.add_argument("--qemu", action="store_true", help="add qemu0: a QEMU board booting a real Linux kernel")
    u.add_argument("--android", action="store_true",
                   help="add tablet0: a simulated Android device speaking the ADB protocol (needs Debian's adb)")
    u.add_argument("--qemu-netboot", action="store_true",
                   help="qemu0 boots over the network from panio's TFTP server (`panio netboot start qemu0`)")
    u.add_argument("--prompt", metavar="TEXT", help="the boards' shell prompt (default 'root@sim:~# ')")
    u.add_argument("--banner", metavar="TEXT",
                   help="the boards' first boot line and last kernel line: what their screens show once up")
    u.add_argument("--no-setup", action="store_true", help="boards without a setup menu (F2 is just a key)")
    u.add_argument("--no-screen", action="store_true", help="boards without a screen or HID rig (console and plug only)")
    u.add_argument("--one-process", action="store_true",
                   help="host every board in one process (each still its own console PTY and plug): "
                        "light, for many boards on one machine")
    s = verb("status", "list the boards, their power and devices",
             "Reads the bench's directory; changes nothing. --lab prints the lab file's path for PANIO_LAB.",
             "panio-sim status --json\n  export PANIO_LAB=$(panio-sim status --lab)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")
    s.add_argument("--lab", action="store_true", help="print only the lab file's path")
    verb("down", "stop every board this bench started",
         "Stops each board's process (its console and plug) and forgets their pids; the lab file stays.",
         "panio-sim down")
    from bench_agent.sim import faults

    faults.add_parser(verb)
    for c in sub.choices.values():
        c.add_argument("--dir", type=Path, help=f"the bench's directory (default {default_dir()})")
    return p


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.dir is not None:
        directory = args.dir.expanduser().resolve()
    else:
        directory = default_dir().resolve() if args.verb == "up" else find_bench()
    if args.verb == "up":
        if not (0 if args.qemu or args.android else 1) <= args.boards <= 16:
            raise UsageError(f"--boards must be 1..16 (0..16 with --qemu or --android), not {args.boards}")
        if args.qemu_netboot and not args.qemu:
            raise UsageError("--qemu-netboot needs --qemu")
        look = (["--prompt", args.prompt] if args.prompt else []) + (["--banner", args.banner] if args.banner else [])
        for text in (args.prompt, args.banner):
            if text is not None and (not text.strip() or not text.isprintable() or len(text) > 80):
                raise UsageError(f"--prompt/--banner {text!r}: give 1 to 80 printable characters")
        look += (["--no-setup"] if args.no_setup else []) + (["--no-screen"] if args.no_screen else [])
        boards = up(directory, args.boards, args.gen, args.password, args.boot_s, args.countdown_s, args.qemu,
                    args.qemu_netboot, look, one_process=args.one_process, android=args.android)
        for b in boards:
            if b.get("kind") == "android":
                print(f"{b['name']}: Android device, adb serial {b['serial']} ({b['size']}), pid {b['pid']}")
                continue
            if b.get("kind") == "qemu":
                boot = (f", netboots from TFTP port {b['netboot']['tftp_port']} (run `panio netboot start "
                        f"{b['name']}`)") if b.get("netboot") else ""
                print(f"{b['name']}: QEMU board, console {b['tty']}, screen {b['video']}, pid {b['pid']}{boot}")
                continue
            print(f"{b['name']}: console {b['pty']}, Gen{b['gen']} plug {b['plug']}, screen {b['video'] or 'none'}, "
                  f"pid {b['pid']}")
        print(f"lab file: {directory / 'lab.toml'}\n  export PANIO_LAB={shlex.quote(str(directory / 'lab.toml'))}")
        print(f"bundled suite: panio suite run {shlex.quote(str(directory / 'suite.toml'))} "
              f"(on {', '.join(b['name'] for b in boards if b.get('kind') != 'android')}; its jobs start each "
              "board's serial capture)")
    elif args.verb == "inject":
        from bench_agent.sim import faults

        now = faults.inject(directory, [b["name"] for b in read_pids(directory)
                                        if b.get("kind") not in ("qemu", "android")], args)
        if args.json:
            print(json.dumps({"board": args.board, "faults": now}, indent=2))
        elif now:
            print(f"{args.board}: from its next boot: {faults.words(now)} (end with `panio-sim inject {args.board} "
                  "--clear`)")
        else:
            print(f"{args.board}: no injected faults; its next boot is normal")
    elif args.verb == "down":
        count, captures = down(directory)
        also = f" and the daemons using them ({', '.join(c['name'] for c in captures)})" if captures else ""
        print(f"stopped {count} simulated board(s){also} in {directory}")
    else:
        return _print_status(directory, args)
    return 0


def _print_status(directory: Path, args: argparse.Namespace) -> int:
    boards = status(directory)
    if args.lab:
        print(directory / "lab.toml")
    elif args.json:
        print(json.dumps(boards, indent=2))
    elif not boards:
        print(f"no simulated bench in {directory} (start one with `panio-sim up`)")
    for b in boards if not (args.lab or args.json) else []:
        state = f"power {b['power']}" if b["running"] else "NOT RUNNING"
        print(f"{b['name']}: {state}, console {b['pty']}, plug {b['plug']}, pid {b['pid']}")
    return 0


def main() -> None:
    from bench_agent.helpers import console_main

    console_main("panio-sim", run)
