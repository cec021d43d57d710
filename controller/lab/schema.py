"""The lab file's schema, and a validator that names the key at fault.

The schema is data: a table spec maps each allowed key to a field spec. The
validator walks a parsed document (plain dicts and lists from ``tomllib``) and
returns the first problem as ``(key_path, message)``; ``store`` turns the path
into a line and column of the file. Unknown keys are errors, with a
"did you mean" when one is close, because a typo (``bauds = 9600``) that is
silently ignored costs a lab engineer an afternoon.
"""

from __future__ import annotations

import re
TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

if TYPE_CHECKING:
    from typing import Any, Callable

from controller.lab.fields import (  # noqa: F401  (re-exported: the schema's vocabulary)
    Field, KeyPath, Problem, TableSpec, _dotted, _nonempty_string, _string, _table, _tomltype, _type, check_table)
from controller.lab.profile import PROFILE

NAME_RE_TEXT = "[a-z0-9][a-z0-9_-]{0,63}"  # the name grammar: lab keys, CLI arguments, MCP schemas
NAME_RE = re.compile(NAME_RE_TEXT + r"\Z")  # \Z, not $: "$" also matches before a final newline
NAME_RULE = "lowercase letters, digits, '-' and '_', starting with a letter or digit, at most 64 characters"

SENSE_SIGNALS = ("CTS", "DSR", "DCD", "RI")
LINE_ENDINGS = ("cr", "lf", "crlf", "none")
HID_PROTOCOLS = ("ch9329", "hidg", "qmp", "adb")
HOOKS = ("on_cmd", "off_cmd", "cycle_cmd", "state_cmd")
MAX_SECONDS = 7 * 86400  # durations in the lab (hook and action timeouts): a week is already absurd
MAX_PORT, MAX_BAUD, MAX_PIXELS = 65535, 100_000_000, 65535
MAX_ACTION_ARGS = 64  # an action's max_args: words appended to its command (bench_agent.ops.action)

def _command(path: KeyPath, value: Any) -> None:
    """A command line panio splits into words (``shellwords``, shlex's rules, never a shell): unbalanced quotes
    fail now, not when the hook or action first runs."""
    from bench_agent import shellwords

    _nonempty_string(path, value)
    try:
        shellwords.split(value)
    except ValueError as exc:
        raise Problem(path, f"{_dotted(path)} cannot be split into words ({exc}): {value!r}") from None


def _bool(path: KeyPath, value: Any) -> None:
    _type(bool, "true or false")(path, value)


class _bounded_int:  # noqa: N801  a field's check, named as the other checks are
    """A whole number from 1 to ``maximum`` (ports, bauds, pixels: each field says its own ceiling). The one
    statement of the bound: the config command's flag (``controller.cli.common.add_field``) reads it too."""

    __slots__ = ("maximum",)

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum

    def __call__(self, path: KeyPath, value: Any) -> None:
        _type(int, "a whole number")(path, value)
        if not 0 < value <= self.maximum:
            raise Problem(path, f"{_dotted(path)} must be from 1 to {self.maximum}, not {value}")



def _positive_number(path: KeyPath, value: Any) -> None:
    _type((int, float), "a number")(path, value)
    if value != value or value in (float("inf"), float("-inf")):
        raise Problem(path, f"{_dotted(path)} must be a finite number, not {value}")
    if not 0 < value <= MAX_SECONDS:
        raise Problem(path, f"{_dotted(path)} must be greater than 0 and at most {MAX_SECONDS}, not {value}")


def _name(path: KeyPath, value: Any) -> None:
    _string(path, value)
    if not NAME_RE.match(value):
        raise Problem(path, f"{_dotted(path)} = {value!r} is not a valid name: use {NAME_RULE}")


def _one_of(choices: tuple[str, ...]) -> Callable[[KeyPath, Any], None]:
    def check(path: KeyPath, value: Any) -> None:
        _string(path, value)
        if value not in choices:
            raise Problem(path, f"{_dotted(path)} = {value!r} must be one of {', '.join(choices)}")

    return check


def _string_list(path: KeyPath, value: Any) -> None:
    _type(list, "a list of strings")(path, value)
    for i, item in enumerate(value):
        _name(path + (i,), item)


def _named_tables(spec: TableSpec) -> Callable[[KeyPath, Any], None]:
    """A table whose keys are names, each holding a table of ``spec``."""

    def check(path: KeyPath, value: Any) -> None:
        _type(dict, "a table")(path, value)
        for key, sub in value.items():
            if not NAME_RE.match(key):
                raise Problem(path + (key,), f"{_dotted(path + (key,))}: {key!r} is not a valid name: use {NAME_RULE}")
            _type(dict, "a table")(path + (key,), sub)
            check_table(path + (key,), sub, spec)

    return check


def _table_array(spec: TableSpec) -> Callable[[KeyPath, Any], None]:
    def check(path: KeyPath, value: Any) -> None:
        _type(list, f"an array of tables ([[{_dotted(path)}]])")(path, value)
        for i, item in enumerate(value):
            _type(dict, "a table")(path + (i,), item)
            check_table(path + (i,), item, spec)

    return check


def _unique_serial_names(path: KeyPath, target: dict) -> None:
    seen: set[str] = set()
    for i, iface in enumerate(target.get("serial", [])):
        name = iface.get("name")
        if name in seen:
            raise Problem(path + ("serial", i, "name"), f"target {path[-1]!r} has two serial interfaces named {name!r}")
        seen.add(name)


# ``[USER@]HOST``: an OpenSSH client (Ansible's, for `panio setup`) reads a word that starts with "-" as one
# of its own options (`-oProxyCommand=...` runs a command), and whitespace or a control character splits or
# ends a line of the inventory and the ssh command it becomes.
SSH_USER_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.$-]{0,63}\Z")
SSH_HOST_RE = re.compile(r"[A-Za-z0-9_\[:][A-Za-z0-9_.:%\[\]-]{0,252}\Z")
SSH_RULE = ("use [USER@]HOST: HOST a name or address (letters, digits, '.', '-', '_', ':'), USER letters, "
            "digits, '.', '_', '-'; neither may start with '-' or hold spaces or control characters")


def ssh_destination_problem(value: str) -> str | None:
    """Why ``value`` is not an SSH destination panio will hand to ssh, or None."""
    user, at, host = value.rpartition("@")
    if (at and not SSH_USER_RE.match(user)) or not SSH_HOST_RE.match(host):
        return f"{value!r} is not an SSH destination: {SSH_RULE}"
    return None


def _ssh_destination(path: KeyPath, value: Any) -> None:
    _nonempty_string(path, value)
    if why := ssh_destination_problem(value):
        raise Problem(path, f"{_dotted(path)} = {why}")


def _serial_device(path: KeyPath, value: Any) -> None:
    """A port pyserial opens: a path or a scheme panio supports (``bench_agent.serial.urls``, the host's rule too)."""
    from bench_agent.serial.urls import device_problem

    _nonempty_string(path, value)
    if why := device_problem(value):
        raise Problem(path, f"{_dotted(path)}: {why}")


def _hid_device(path: KeyPath, value: Any) -> None:
    """A CH9329 rig's port is opened by pyserial too: a URL must pass the serial rule (a path, a QMP socket or a
    gadget are not URLs)."""
    _nonempty_string(path, value)
    if "://" in value:
        _serial_device(path, value)


def _netboot_value(rule_name: str) -> Callable[[KeyPath, Any], None]:
    """A netboot value checked by ``bench_agent.netboot.values.<rule_name>``, the rule the host applies too."""

    def check(path: KeyPath, value: Any) -> None:
        from bench_agent.netboot import values

        _nonempty_string(path, value)
        try:
            getattr(values, rule_name)(value)
        except values.BadValue as exc:
            raise Problem(path, f"{_dotted(path)}: {exc}") from None

    return check


_HOOK_FIELDS = {key: Field(_command) for key in HOOKS}
_HOOK_FIELDS["timeout_s"] = Field(_positive_number)
_HOOK_FIELDS["cycle_off_s"] = Field(_positive_number)

LEVEL = TableSpec(dict(_HOOK_FIELDS), "power level")
POWER = TableSpec({**_HOOK_FIELDS, "levels": Field(_named_tables(LEVEL))}, "power table")
SERIAL = TableSpec(
    {
        "name": Field(_name, required=True),
        "device": Field(_serial_device, required=True),
        "baud": Field(_bounded_int(MAX_BAUD)),
        "power_sense_signal": Field(_one_of(SENSE_SIGNALS)),
        "power_button": Field(_bool),
        "line_ending": Field(_one_of(LINE_ENDINGS)),
        "description": Field(_string),
    },
    "serial interface",
)
NETBOOT = TableSpec(
    {
        "interface": Field(_netboot_value("interface"), required=True),
        "tftp_root": Field(_netboot_value("tftp_root")),
        "stage_from": Field(_netboot_value("stage_from")),  # the folder `netboot stage` takes files from
        # netboot start/netif (docs/netboot.md): the server, its address and port, the PXE boot file,
        # and how `netif down-hard` cuts the link's adapter power
        "server": Field(_one_of(("dnsmasq", "panio"))),
        "address": Field(_netboot_value("address")),
        "tftp_port": Field(_bounded_int(MAX_PORT)),
        "boot_file": Field(_netboot_value("boot_file")),
        "hard_down": Field(_one_of(("usb-sysfs", "uhubctl", "hook"))),
        "usb_port": Field(_netboot_value("usb_port")),
        "hard_down_cmd": Field(_command),
        "hard_up_cmd": Field(_command),
    },
    "netboot table",
)
VIDEO = TableSpec(
    {"device": Field(_nonempty_string, required=True), "width": Field(_bounded_int(MAX_PIXELS)), "height": Field(_bounded_int(MAX_PIXELS)),
     "poll_ms": Field(_bounded_int(60_000))},
    "video table",
)
HID = TableSpec(
    {"device": Field(_hid_device, required=True), "protocol": Field(_one_of(HID_PROTOCOLS)), "baud": Field(_bounded_int(MAX_BAUD)),
     "reply_timeout_ms": Field(_bounded_int(60_000))},
    "hid table",
)
def _adb_serial(path: KeyPath, value: Any) -> None:
    """A serial as `adb devices` prints it (R58M123ABC, emulator-5554, HOST:PORT): it becomes the console's
    ``adb://SERIAL`` and the screen's ``adb:SERIAL`` (docs/adb.md), so no '/', '?', space or control character."""
    import re

    _nonempty_string(path, value)
    if not re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", value):
        raise Problem(path, f"{_dotted(path)}: {value!r} is not an adb serial: use what `adb devices` lists "
                            "(letters, digits, '.', '_', ':', '-')")


ADB = TableSpec({"serial": Field(_adb_serial, required=True)}, "adb table")
ACTION = TableSpec(
    {
        "command": Field(_command, required=True),
        "description": Field(_string),
        "requires_power": Field(_bool),
        "host": Field(_name),
        "timeout_s": Field(_positive_number),
        "max_args": Field(_bounded_int(MAX_ACTION_ARGS)),
    },
    "action",
)
HEALTH_CHECK = TableSpec({"job": Field(_nonempty_string, required=True), "every_s": Field(_positive_number),
                          "retry_s": Field(_positive_number), "retry_max_s": Field(_positive_number)},
                         "health_check table")
NOTIFY_EVENTS = ("suite_finished", "job_failed", "job_incomplete", "health_changed")


def _events(path: KeyPath, value: Any) -> None:
    _type(list, "a list of events")(path, value)
    for i, item in enumerate(value):
        _one_of(NOTIFY_EVENTS)(path + (i,), item)


def _http_url(path: KeyPath, value: Any) -> None:
    _nonempty_string(path, value)
    if not value.startswith(("http://", "https://")):
        raise Problem(path, f"{_dotted(path)} must be an http:// or https:// URL")


def _addresses(path: KeyPath, value: Any) -> None:
    _type(list, "a list of e-mail addresses")(path, value)
    if not value:
        raise Problem(path, f"{_dotted(path)} needs at least one address")
    for i, item in enumerate(value):
        _nonempty_string(path + (i,), item)


def _retries(path: KeyPath, value: Any) -> None:
    _type(int, "a whole number")(path, value)
    if not 0 <= value <= 10:
        raise Problem(path, f"{_dotted(path)} must be from 0 to 10, not {value}")


def _one_channel(path: KeyPath, notify: dict) -> None:
    ways = [k for k in ("webhook", "webhook_env", "smtp") if k in notify]
    if len(ways) != 1:
        raise Problem(path, f"notify {_dotted(path)} needs exactly one of webhook, webhook_env, smtp"
                            + (f" (has {', '.join(ways)})" if ways else ""))
    if "smtp" in notify and "to" not in notify:
        raise Problem(path, f"notify {_dotted(path)} sends e-mail: it needs 'to'")


NOTIFY = TableSpec(
    {
        "name": Field(_name),
        "on": Field(_events),
        "webhook": Field(_http_url),
        "webhook_env": Field(_nonempty_string),
        "format": Field(_one_of(("json", "slack", "matrix", "teams"))),
        "smtp": Field(_nonempty_string),
        "starttls": Field(_bool),
        "username": Field(_nonempty_string),
        "password_env": Field(_nonempty_string),
        "from": Field(_nonempty_string),
        "to": Field(_addresses),
        "retries": Field(_retries),
    },
    "notify",
    extra=_one_channel,
)
TARGET = TableSpec(
    {
        "description": Field(_string),
        "health_check": Field(_table(HEALTH_CHECK)),
        "host": Field(_name),
        "tags": Field(_string_list),
        "serial": Field(_table_array(SERIAL)),
        "netboot": Field(_table(NETBOOT)),
        "power": Field(_table(POWER)),
        "video": Field(_table(VIDEO)),
        "hid": Field(_table(HID)),
        "adb": Field(_table(ADB)),
        "actions": Field(_named_tables(ACTION)),
        "profile": Field(_table(PROFILE)),  # the board as checks recognise it (controller.lab.profile)
    },
    "target",
    extra=_unique_serial_names,
)
HOST = TableSpec(
    {
        "ssh": Field(_ssh_destination, required=True),
        "port": Field(_bounded_int(MAX_PORT)),
        "description": Field(_string),
        "python": Field(_nonempty_string),
        "transport": Field(_one_of(("ssh", "celery"))),
    },
    "host",
)


def _duration(path: KeyPath, value: Any) -> None:
    """``30d``, ``12h``, ``90m``, ``45s`` (controller.jobs.retention reads them)."""
    _string(path, value)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|h|d)", value.strip())
    if not m or float(m.group(1)) <= 0:
        raise Problem(path, f"{_dotted(path)} = {value!r} must be a duration such as \"90d\", \"12h\", \"30m\"")


RETENTION = TableSpec({"jobs": Field(_duration), "artifacts": Field(_duration)}, "retention table")
def _lab_name(path: KeyPath, value: Any) -> None:
    _string(path, value)
    if not NAME_RE.match(value):
        raise Problem(path, f"{_dotted(path)} = {value!r} must be {NAME_RULE}")


# [lab] name: what keys the lab's captures, logs and leases on its control hosts (bench_agent.paths.lab_key_of)
LAB_TABLE = TableSpec({"name": Field(_lab_name)}, "lab table")
LAB = TableSpec({"lab": Field(_table(LAB_TABLE)), "hosts": Field(_named_tables(HOST)), "targets": Field(_named_tables(TARGET)),
                 "retention": Field(_table(RETENTION)), "notify": Field(_table_array(NOTIFY))}, "lab file")


def _check_references(data: dict) -> None:
    hosts = data.get("hosts", {})
    for tname, target in data.get("targets", {}).items():
        refs = [(("targets", tname, "host"), target.get("host"))]
        refs += [(("targets", tname, "actions", a, "host"), act.get("host")) for a, act in target.get("actions", {}).items()]
        for path, host in refs:
            if host is not None and host not in hosts:
                known = ", ".join(sorted(hosts)) or "none"
                raise Problem(path, f"{_dotted(path)} = {host!r} names no host (hosts: {known}); add it with `panio host add {host} --ssh USER@HOST`")


def validate(data: dict) -> None:
    """Raise ``Problem`` for the first thing wrong with a parsed lab file."""
    check_table((), data, LAB)
    _check_references(data)
