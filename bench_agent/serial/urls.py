"""What a serial device may be: a path, or one of the URL schemes panio supports, with their documented options.

The lab file's schema, the config commands and the host (``device.open_port``,
the CH9329 HID backend) all check with ``device_problem``, so the rule is
written once. pyserial's ``serial_for_url`` opens any scheme it has a handler
for, and some of them act on their options: ``spy://...?file=PATH`` creates or
truncates PATH (as root, on a host whose worker runs as root), ``hwgrep://``
opens whichever port a pattern finds. Only these reach pyserial:

    /dev/ttyUSB0                  a path (no "://"): opened, never created
    rfc2217://HOST:PORT           ser2net's telnet(rfc2217); ign_set_control, poll_modem, timeout, logging
    socket://HOST:PORT            ser2net's raw tcp; logging
    loop://                       pyserial's loopback (tests); logging
    simboard://PTY?state=FILE     the simulated board (bench_agent/sim/protocol_simboard.py); state, lines
    adb://SERIAL                  an Android device's kept `adb shell` (bench_agent/adb/console.py); stream=logcat
"""

from __future__ import annotations

OPTIONS = {"rfc2217": ("ign_set_control", "poll_modem", "timeout", "logging"), "socket": ("logging",),
           "loop": ("logging",), "simboard": ("state", "lines"), "adb": ("stream",)}
NETWORK = ("rfc2217", "socket")  # HOST:PORT, nothing after it but the options
RULE = ("use a device path (/dev/ttyUSB0), rfc2217://HOST:PORT or socket://HOST:PORT (docs/serial.md)")


def device_problem(device: object) -> str | None:
    """Why ``device`` is not a serial device panio opens, or None. The sentence names the value, not its field."""
    if not isinstance(device, str) or not device:
        return "a serial device must be a non-empty string"
    if any(ord(c) < 0x20 or ord(c) == 0x7f for c in device):
        return f"{device!r} holds a control character: {RULE}"
    if "://" not in device.lower():  # pyserial's own test: anything else is a URL for one of its handlers
        return None
    scheme, _, rest = device.partition("://")
    scheme = scheme.lower()
    if scheme not in OPTIONS:
        return f"{device!r}: panio does not open {scheme}:// ports: {RULE}"
    where, _, query = rest.partition("?")
    if scheme in NETWORK and (why := _host_port(where)):
        return f"{device!r}: {why}: use {scheme}://HOST:PORT"
    if scheme == "adb" and (not where or "/" in where):
        return f"{device!r}: no serial: use adb://SERIAL (as `adb devices` lists it)"
    if scheme == "loop" and where not in ("", "/"):
        return f"{device!r}: loop:// takes nothing but options"
    return _options(device, scheme, query)


def refuse_unsupported(device: str, what: str) -> None:
    """``Refused`` for a device pyserial must not open, where it is opened: a lab file checked on the controller is
    checked again on the host (its own file, an older lab, a message that did not come through the schema)."""
    if why := device_problem(device):
        from bench_agent.errors import Refused

        raise Refused(f"{what}: device {why}", device=device)


def _host_port(where: str) -> str | None:
    host, colon, port = where.rstrip("/").rpartition(":")
    if not colon or not host or "/" in host or "@" in host:
        return "no HOST:PORT"
    if not port.isdigit() or not 0 < int(port) <= 65535:
        return f"port {port!r} is not from 1 to 65535"
    return None


def _options(device: str, scheme: str, query: str) -> str | None:
    allowed = OPTIONS[scheme]
    for pair in filter(None, query.split("&")):
        name = pair.partition("=")[0]
        if name not in allowed:
            return f"{device!r}: unknown option {name!r} for {scheme}:// (allowed: {', '.join(allowed)})"
    return None
