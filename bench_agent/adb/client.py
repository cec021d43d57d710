"""The one road to the adb server: Debian's (or the SDK's) ``adb`` binary, run with ``-s SERIAL``.

Why the binary and not a Python client of the adb server protocol: docs/adb.md.
Every call goes through ``run`` (argv, never a shell; a deadline; stdout as
bytes), and every failure becomes one of panio's errors here:

    adb not installed                 NotConfigured (3)
    serial not in `adb devices`       DeviceError (12), or Unreachable (4) for HOST:PORT that refuses
    `adb devices` says unauthorized   AuthFailed (11)
    offline / a command timed out     Unreachable (4) / Timeout (22)

A serial of the form HOST:PORT is a device on the network (Wi-Fi debugging, an
emulator, the simulated device): ``ready`` connects it (`adb connect`) when the
server does not have it, and reconnects it when the server holds it offline
(after a reboot the server's own retry takes ~10 s).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

from bench_agent.errors import AuthFailed, DeviceError, NotConfigured, Timeout, Unreachable

NETWORK = re.compile(r"^[A-Za-z0-9._-]+:\d{1,5}$")
DEFAULT_TIMEOUT_S = 15.0
INSTALL_HINT = "install it (Debian/Ubuntu: `apt-get install adb`; else Android's platform-tools) and check `adb devices`"


def adb() -> str:
    """The adb binary's path; ``NotConfigured`` when there is none."""
    path = shutil.which("adb")
    if path is None:
        raise NotConfigured("adb is not installed on this host (an Android target needs it)", hint=INSTALL_HINT)
    return path


def argv(serial: str, *args: str) -> list[str]:
    return [adb(), "-s", serial, *args]


def run(serial: str | None, args: list[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> bytes:
    """``adb [-s SERIAL] ARGS`` to its end; its stdout. A non-zero exit is translated (``failure``)."""
    cmd = argv(serial, *args) if serial else [adb(), *args]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise Timeout(f"`adb {' '.join(args)}` on {serial} did not finish in {timeout_s:g} s", serial=serial) \
            from None
    except OSError as exc:
        raise NotConfigured(f"cannot run adb: {exc}", hint=INSTALL_HINT) from exc
    if done.returncode != 0:
        raise failure(serial, (done.stderr or done.stdout).decode("utf-8", "replace"))
    return done.stdout


def failure(serial: str | None, text: str) -> Exception:
    """adb's complaint about ``serial`` as panio's error."""
    line = (text.strip().splitlines() or ["adb failed"])[-1]
    if "unauthorized" in text:
        return unauthorized(serial)
    if "not found" in text and serial:
        return not_found(serial)
    if "offline" in text:
        return Unreachable(f"adb device {serial} is offline ({line})", serial=serial,
                           hint="it is rebooting or its link dropped: wait, or check the cable")
    return DeviceError(f"adb on {serial}: {line}", serial=serial)


def not_found(serial: str) -> DeviceError:
    return DeviceError(f"adb device {serial} is not attached (not in `adb devices`)", serial=serial,
                       hint="`adb devices` (or `panio discover`) lists the serials this host sees; check the cable "
                            "and USB debugging, or fix the serial with `panio adb set`")


def unauthorized(serial: str | None) -> AuthFailed:
    return AuthFailed(f"adb device {serial} is unauthorized: it has not accepted this host's adb key",
                      serial=serial, hint="unlock the device and accept the \"Allow USB debugging\" prompt "
                                          "(or `adb kill-server` and plug it in again), then retry")


def devices() -> dict[str, str]:
    """serial -> state (device | offline | unauthorized | ...) from `adb devices`."""
    out = run(None, ["devices"]).decode("utf-8", "replace")
    rows = [line.split() for line in out.splitlines()[1:] if line.strip() and not line.startswith("*")]
    return {r[0]: (r[1] if len(r) > 1 else "") for r in rows}


def state(serial: str) -> str | None:
    return devices().get(serial)


def ready(serial: str, timeout_s: float = 5.0) -> None:
    """Return once ``serial`` is a usable device, connecting a network one; else the error that says why not."""
    now = state(serial)
    if now == "device":
        return
    if now == "unauthorized":
        raise unauthorized(serial)
    if not NETWORK.match(serial):
        if now is None:
            raise not_found(serial)
        raise Unreachable(f"adb device {serial} is {now}", serial=serial,
                          hint="it is rebooting or its link dropped: wait, or check the cable")
    if now is not None:  # offline: drop the server's stale transport, then connect afresh
        run(None, ["disconnect", serial], timeout_s)
    _connect(serial, timeout_s)


def _connect(serial: str, timeout_s: float) -> None:
    out = run(None, ["connect", serial], timeout_s).decode("utf-8", "replace")
    if "authenticate" in out or "unauthorized" in out:
        raise unauthorized(serial)
    if "connected to" not in out:
        raise Unreachable(f"adb cannot connect to {serial}: {out.strip()}", serial=serial,
                          hint="is the device up, and its adb listening on that port (`adb tcpip 5555`)?")
    deadline = time.monotonic() + timeout_s
    while (now := state(serial)) != "device":
        if now == "unauthorized":
            raise unauthorized(serial)
        if time.monotonic() > deadline:
            raise Unreachable(f"adb device {serial} connected but is {now or 'gone'}", serial=serial)
        time.sleep(0.05)

