"""Opening a serial port exclusively, and saying who holds it when that fails.

Every device string goes through ``serial.serial_for_url``: a /dev path,
``rfc2217://host:port`` (ser2net), ``socket://host:port``, or a simulator's
scheme from ``bench_agent/sim/protocol_<scheme>.py``. A posix port is
``flock``ed (pyserial's ``exclusive=True``, which tio and minicom honour too)
and then marked TIOCEXCL, so one of watch, connect or an outside program holds
it at a time; a network port is refused while one of panio's own captures
holds the same URL.
pyserial exceptions become panio errors here.

The three kinds of port read differently, and ``fileno``/``read_now`` hide it:

    /dev path     an fd to select on; os.read returns what the driver holds
    socket://     a socket to select on; pyserial opens it non-blocking, and a
                  read is one os.read of it (pyserial's in_waiting only says 0 or 1)
    rfc2217://    no descriptor: a reader thread queues what arrives (rfc2217.py,
                  in chunks); in_waiting counts the bytes, and a read of that
                  many returns at once
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import termios
import time
TYPE_CHECKING = False  # a capture need not import typing (docs/scale.md: every supervisor pays for it)
if TYPE_CHECKING:
    from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import serial

from bench_agent.errors import Busy, DeviceError, Unreachable
from bench_agent.serial.opening import KeepsInputOnOpen
from bench_agent.serial.urls import refuse_unsupported
from bench_agent.procinfo import command_line  # noqa: F401 - re-exported for the serial modules

if "bench_agent.sim" not in serial.protocol_handler_packages:
    serial.protocol_handler_packages.append("bench_agent.sim")

SIGNALS = {"CTS": "cts", "DSR": "dsr", "DCD": "cd", "RI": "ri"}


WRITE_TIMEOUT_S = 10.0
READ_MAX = 65536
DRAIN_FROM = 2048  # a tty read this long may have more behind it (a tty hands over at most 4 KiB a read)
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES = 10, 5, 3  # a dead link is lost within ~25 s


def open_port(cfg: dict[str, Any], timeout: float | None = 0.2) -> serial.SerialBase:
    """Open the interface's device, exclusively; DTR released on a power_button interface.

    ``timeout`` bounds a blocking read (callers that select on ``fileno`` never block). Writes time
    out after WRITE_TIMEOUT_S: a board that stops reading (flow control held) must not wedge the
    supervisor's input path. rfc2217:// is the exception, pyserial refuses a write timeout there;
    its socket's own 5 s timeout bounds those writes instead.
    """
    device = cfg["device"]
    refuse_unsupported(device, f"serial interface {cfg.get('name', 'console')!r}")
    scheme = urlsplit(device).scheme if "://" in device else ""
    if scheme in ("rfc2217", "socket", "adb"):
        _refuse_if_captured(device)
    options: dict[str, Any] = {} if scheme == "rfc2217" else {"write_timeout": WRITE_TIMEOUT_S}
    if scheme == "socket":
        timeout = 0  # callers select on fileno(); with any other timeout a read waits to fill its size
    try:
        port = _unopened(port_url(device), scheme, baudrate=cfg.get("baud", 115200), timeout=timeout,
                         exclusive=True, **options)
        if cfg.get("power_button"):
            port.dtr = False  # DTR is the board's button: never press it by opening
        port.open()
    except (serial.SerialException, OSError, ValueError) as exc:
        raise open_error(device, exc) from exc
    fd = getattr(port, "fd", None)
    if isinstance(fd, int):
        try:
            fcntl.ioctl(fd, termios.TIOCEXCL)
        except OSError:
            pass  # not a tty (e.g. a pipe-backed simulator): the flock still guards it
        os.set_blocking(fd, False)  # as pyserial opens it; ``_drain`` reads until the tty has nothing more
    _keepalive(getattr(port, "_socket", None))
    return port


def _keepalive(sock: socket.socket | None) -> None:
    """Probe an idle network port, so a console server that rebooted or vanished reads as lost.

    A quiet board and a dead link look alike on an idle TCP connection; without probes the capture
    would wait on the old connection forever while the new ser2net has no client.
    """
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE_S), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
                          ("TCP_KEEPCNT", KEEPALIVE_PROBES)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def _unopened(url: str, scheme: str, **settings: Any) -> serial.SerialBase:
    if scheme == "rfc2217":
        from bench_agent.serial.rfc2217 import ChunkedRfc2217Serial

        port = ChunkedRfc2217Serial(None, **settings)
        port.port = url
        return port
    if scheme == "socket":
        from bench_agent.serial.socket_port import KeepInputSocketSerial

        port = KeepInputSocketSerial(None, **settings)
        port.port = url
        return port
    if scheme == "adb":  # an Android target's kept `adb shell` (bench_agent/adb/console.py)
        from bench_agent.adb.console import AdbShellPort

        return AdbShellPort(url)
    if scheme == "":
        port = KeepInputSerial(None, **settings)
        port.port = url
        return port
    return serial.serial_for_url(url, do_not_open=True, **settings)


class KeepInputSerial(KeepsInputOnOpen, serial.Serial):
    """A local port whose ``open`` keeps what the kernel already buffered.

    pyserial's ``open`` flushes the input queue (``tcflush(TCIFLUSH)``), so what a
    board printed while no capture held the port (between a supervisor's death and
    the next ``serial watch``) was thrown away: 640 of 640 bytes on a PTY. Capture
    restarts keep those bytes; an explicit ``reset_input_buffer()`` still flushes.
    """

    def _reset_input_buffer(self) -> None:
        if not self._opening:
            super()._reset_input_buffer()


def port_url(device: str) -> str:
    """What pyserial opens for ``device``: an rfc2217:// URL gains ``ign_set_control``.

    ser2net exporting a PTY (or any port whose driver refuses modem-control ioctls) never
    answers RFC 2217 SET_CONTROL, and pyserial then fails every open after 3 s. labgrid adds
    the option to every rfc2217 URL for the same reason; users never have to.
    """
    parts = urlsplit(device) if device.startswith("rfc2217://") else None
    if parts is None or "ign_set_control" in parse_qs(parts.query, keep_blank_values=True):
        return device
    return urlunsplit(parts._replace(query="&".join(filter(None, (parts.query, "ign_set_control")))))


def fileno(port: serial.SerialBase) -> int | None:
    """The descriptor to select on before ``read_now``; None for rfc2217:// (its bytes sit in a queue)."""
    fd = getattr(port, "fd", None)
    if isinstance(fd, int):
        return fd
    try:
        return port.fileno()
    except (AttributeError, NotImplementedError, OSError, serial.SerialException):
        return None


def write(port: serial.SerialBase, data: bytes) -> None:
    """Write all of ``data``. On a tty's descriptor, one ``os.write`` when the tty takes it all (a command line
    does): pyserial's ``write`` follows every write with a ``select`` for writability, one more system call
    (and a wake-up) on every `serial send` and transact. Whatever the tty did not take, and every other kind
    of port, goes through pyserial's own loop."""
    rest = write_now(port, data)
    if rest:
        port.write(rest)


def write_now(port: serial.SerialBase, data: bytes) -> bytes:
    """Write what a tty takes of ``data`` at once, never waiting (its descriptor is non-blocking); the rest, all
    of ``data`` on any other kind of port, is returned for ``write`` (pyserial's loop, which may wait)."""
    fd = getattr(port, "fd", None)
    if isinstance(fd, int) and port.is_open and data:
        try:
            return data[os.write(fd, data):]
        except BlockingIOError:  # a full tty buffer waits in pyserial's loop
            pass
    return data


def read_now(port: serial.SerialBase, limit: int = READ_MAX) -> bytes:
    """Up to ``limit`` bytes the port holds now. Call it once ``fileno`` is readable, or any time without one.

    An empty answer from a readable descriptor means the device went away: SerialException.
    """
    own = getattr(port, "read_now", None)  # a port that reads itself (an adb shell): it knows why it ended
    if own is not None:
        return own(limit)
    fd = getattr(port, "fd", None)
    if isinstance(fd, int):
        data = os.read(fd, limit)
        if not data:
            raise serial.SerialException("device reports readiness to read but returned no data (unplugged?)")
        # a short read is all there was (a reply, a prompt): only a full tty read may have more behind it
        return _drain(fd, data, limit) if DRAIN_FROM <= len(data) < limit else data
    fd = fileno(port)
    if fd is not None:
        return _read_socket(fd, limit)
    waiting = min(port.in_waiting, limit)
    return port.read(waiting) if waiting else b""


def _read_socket(fd: int, limit: int) -> bytes:
    """One ``read`` of a socket://'s non-blocking socket: what pyserial's ``read`` does with a zero timeout
    (a ``select``, a ``recv``, an ``expired`` check), less its ``select``, which the reader thread has just
    made. A read takes everything the socket holds, up to ``limit``: nothing to drain after it."""
    try:
        data = os.read(fd, limit)
    except BlockingIOError:
        return b""
    except OSError as exc:
        raise serial.SerialException(f"read failed: {exc}") from exc
    if not data:
        raise serial.SerialException("socket disconnected")
    return data


def _drain(fd: int, first: bytes, limit: int) -> bytes:
    """``first`` and whatever else ``fd`` already holds, up to ``limit``. A tty hands over at most 4 KiB a
    read; during a flood the rest is already there, and taking it now makes one record (one log write, one
    wake-up of the waiters, one line count) of what would be sixteen: the capture keeps up with pyserial's
    own read loop. Nothing waits: the descriptor is non-blocking (``open_port``), so a read with nothing there
    ends the drain (EAGAIN) at once, one system call where a ``select`` before each read was two: the capture
    of a flood 0.77x -> 0.87-0.96x pyserial's rate (docs/performance.md)."""
    parts, size = [first], len(first)
    while size < limit:
        try:
            more = os.read(fd, limit - size)
        except BlockingIOError:  # nothing more there now
            break
        if not more:
            break  # gone: the next read says so
        parts.append(more)
        size += len(more)
    return first if len(parts) == 1 else b"".join(parts)


def _refuse_if_captured(url: str) -> None:
    """A network port that another of panio's captures holds is busy.

    No lock can say so across the network, and ser2net would refuse the newcomer (max-connections)
    or, with kickolduser, drop the capture for it; panio's own discovery files can.
    """
    from bench_agent.process import pid_alive
    from bench_agent.serial import files

    holders = []
    paths = [p for d in files.every_lab_daemons_dir() if d.is_dir() for p in d.glob("serial-*.json")]
    for path in paths:  # every lab's: the port is one, whichever lab's capture holds it
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        pid = info.get("pid")
        if (isinstance(pid, int) and pid != os.getpid() and pid_alive(pid)
                and any(i.get("device") == url for i in info.get("interfaces", []))):
            holders.append({"pid": pid, "command": command_line(pid)})
    if holders:
        raise busy(url, holders)


def open_error(device: str, exc: Exception) -> Exception:
    text = str(exc).replace(port_url(device), device)  # the user wrote the URL without panio's options
    code = getattr(exc, "errno", None)
    if "exclusively lock" in text or code in (errno.EBUSY, errno.EAGAIN) or "[Errno 16]" in text:
        return busy(device)
    if code == errno.ENOENT or "[Errno 2]" in text:
        if device.startswith("simboard://"):  # `panio serial devices` does not list a simulated board
            return DeviceError(f"serial device {device} does not exist (is the simulated bench up?)",
                               hint="`panio-sim status` shows the simulated bench; `panio-sim up` starts it",
                               device=device)
        return DeviceError(f"serial device {device} does not exist (unplugged?)",
                           hint="`panio serial devices` lists this host's ports", device=device)
    if "refused" in text.lower() or "timed out" in text.lower():
        return Unreachable(f"cannot reach serial device {device}: {text}", device=device)
    return DeviceError(f"cannot open serial device {device}: {text}", device=device)


def busy(device: str, who: list[dict[str, Any]] | None = None) -> Busy:
    who = holders(device) if who is None else who
    if who:
        first = who[0]
        names = "; ".join(_holder_name(h) for h in who)
        target = _watch_target(first["command"])
        elsewhere = _elsewhere(first["command"]) if target else None
        if elsewhere:
            import shlex

            state = shlex.quote(os.path.dirname(os.path.dirname(elsewhere)))
            hint = (f"that capture belongs to another lab or state directory ({elsewhere}): stop it there, with "
                    f"`PANIO_STATE_DIR={state} panio serial stop {target}` and that lab's PANIO_LAB, "
                    f"or end pid {first['pid']}")
        else:
            hint = (f"`panio serial stop {target}` frees it; while it runs use `panio serial log` and "
                    "`panio serial send`" if target else
                    "stop that program, or find panio's own holders with `panio daemons`")
        return Busy(f"serial device {device} is in use by {names}", hint=hint, device=device, holders=who)
    return Busy(f"serial device {device} is in use by another program",
                hint="`panio daemons` lists panio's holders", device=device, holders=[])


def _holder_name(holder: dict[str, Any]) -> str:
    target = _watch_target(holder["command"])
    if target:
        return f"panio's serial capture of {target} (pid {holder['pid']})"
    command = holder["command"]
    return f"pid {holder['pid']} ({command if len(command) <= 80 else command[:77] + '...'})"


def _elsewhere(command: str) -> str | None:
    """The lab state directory of a capture's command line (``--state-dir``), when it is not this process's lab's:
    `panio serial stop` here would not find that capture."""
    from bench_agent.paths import lab_state_dir_name

    words = command.split()
    if "--state-dir" not in words[:-1]:
        return None
    theirs = words[words.index("--state-dir") + 1]
    return None if os.path.realpath(theirs) == os.path.realpath(lab_state_dir_name()) else theirs


def _watch_target(command: str) -> str | None:
    words = command.split()
    if "bench_agent.serial.supervisor" in words and "--target" in words[:-1]:
        return words[words.index("--target") + 1]
    return None


def _local_path(device: str) -> str:
    """The file behind a device string: the path itself, or the path of a URL with no host (simboard:///dev/..)."""
    if "://" not in device:
        return device
    parts = urlsplit(device)
    return parts.path if not parts.netloc and parts.path else device


def holders(device: str) -> list[dict[str, Any]]:
    """Processes holding ``device``: flock owners first (from /proc/locks), else any opener."""
    device = _local_path(device)
    try:
        st = os.stat(device)
    except OSError:
        return []
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = _flock_pids(key) or _opener_pids(os.path.realpath(device))
    return [{"pid": pid, "command": command_line(pid)} for pid in sorted(pids) if pid != os.getpid()]


def _flock_pids(key: str) -> set[int]:
    try:
        with open("/proc/locks") as f:
            rows = [line.split() for line in f]
    except OSError:
        return set()
    return {int(r[4]) for r in rows if len(r) > 5 and r[1] == "FLOCK" and r[5] == key}


def _opener_pids(real: str) -> set[int]:
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == real for fd in fds):
                found.add(int(pid))
        except OSError:
            continue
    return found


def read_signal(port: serial.SerialBase, name: str) -> bool:
    try:
        return bool(getattr(port, SIGNALS[name]))
    except (serial.SerialException, OSError) as exc:
        raise DeviceError(f"cannot read {name} on {port.port}: {exc} (a pseudo-terminal has no modem lines)",
                          signal=name) from exc


def pulse_dtr(port: serial.SerialBase, ms: int) -> None:
    """Press the board's button (DTR asserted) for ``ms`` milliseconds, then release it."""
    try:
        port.dtr = True
        time.sleep(ms / 1000)
        port.dtr = False
    except (serial.SerialException, OSError) as exc:
        raise DeviceError(f"cannot drive DTR on {port.port}: {exc} (a pseudo-terminal has no modem lines)") from exc
