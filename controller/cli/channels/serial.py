"""panio serial: configure serial interfaces (add|set|rm) and list this host's ports (devices).

The runtime console commands (watch, log, send, ...) register from
``controller.cli.channels.serial_runtime`` into the same group.
"""

from __future__ import annotations

import argparse

from bench_agent.errors import AlreadyExists, NotConfigured, UsageError
from controller.cli.runtime import Step, runtime
from controller.cli.common import (Unbuilt, add_field, add_json, add_target_option, check_name, command, say,
                                   subcommands)
from controller.lab import edit

GROUP_HELP = """\
Serial consoles. A target has one or more named interfaces (e.g. console, bmc).
Configure them with add/set/rm (-t TARGET); runtime commands take the target
positionally and need -i NAME only when the target has several interfaces."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = GROUP_HELP
    sub = subcommands(p)
    _register_config(sub)
    from controller.cli.channels import serial_runtime

    serial_runtime.register(sub)


def _register_config(sub: argparse._SubParsersAction) -> None:
    from controller.lab.schema import SERIAL

    c = command(sub, "add", "add a named serial interface to a target", func=add,
                example=["panio serial add console -t pico --device /dev/ttyUSB0 --baud 115200",
                         "panio serial add bmc -t pico --device /dev/ttyUSB1 --baud 9600",
                         "panio serial add console -t rack7 --device rfc2217://console-server.lab:7001"],
                see_also="panio serial devices (find the device path), panio serial set, panio skill, "
                         "docs/remote-serial.md (ports shared by ser2net)",
                details="--sense names the modem line that shows the board's power (read by\n"
                        "power-state). --power-button opts the interface into DTR reset/hard-off\n"
                        "(serial reset, serial dtr): only when DTR is wired to the board's button.")
    c.add_argument("name", metavar="NAME", help="interface name, e.g. console or bmc")
    add_target_option(c)
    c.add_argument("--device", required=True, help="port: /dev/..., rfc2217://HOST:PORT or socket://HOST:PORT")
    add_field(c, SERIAL, "baud", default=115200, help="line rate")
    _common_flags(c)

    c = command(sub, "set", "change a serial interface's settings", func=set_,
                example=["panio serial set console -t pico --baud 921600", "panio serial set console -t dut --power-button"],
                see_also="panio serial add, panio target show")
    c.add_argument("name", metavar="NAME", nargs="?", help="interface name (optional when the target has one)")
    add_target_option(c)
    c.add_argument("--device", help="new port path or URL")
    add_field(c, SERIAL, "baud", help="new line rate")
    _common_flags(c)
    c.add_argument("--no-sense", action="store_true", help="forget the power sense line")
    c.add_argument("--no-power-button", action="store_true", help="opt out of DTR reset/hard-off")

    c = command(sub, "rm", "remove one serial interface (others and other channels stay)", func=rm,
                example="panio serial rm bmc -t pico",
                see_also="panio target rm (removes the whole target)")
    c.add_argument("name", metavar="NAME", nargs="?", help="interface name (optional when the target has one)")
    add_target_option(c)

    c = command(sub, "devices", "list this host's serial ports (path, VID:PID, serial number, stable by-id path)",
                func=devices, example="panio serial devices --json",
                see_also="panio serial add --device")
    add_json(c)


def _common_flags(c: argparse.ArgumentParser) -> None:
    if isinstance(c, Unbuilt):  # `serial log` and the other runtime commands do not import the lab's schema
        return
    from controller.lab.schema import LINE_ENDINGS, SENSE_SIGNALS

    c.add_argument("--sense", choices=SENSE_SIGNALS, type=str.upper, metavar="|".join(SENSE_SIGNALS),
                   help="modem line that reads the board's power state (power_sense_signal)")
    c.add_argument("--power-button", action="store_true",
                   help="DTR is wired to the board's power button: allow serial reset / serial dtr")
    c.add_argument("--line-ending", choices=LINE_ENDINGS, help="what serial send appends (default cr)")
    c.add_argument("--description", help="free text")


def _find(ifaces, target: str, name: str | None):
    names = [i["name"] for i in ifaces]
    if not names:
        raise NotConfigured(f"target {target!r} has no serial interface", hint=f"add one with `panio serial add console -t {target} --device PATH`", target=target)
    if name is None:
        if len(names) > 1:
            raise UsageError(f"target {target!r} has {len(names)} serial interfaces ({', '.join(names)}); name the one to change",
                             target=target, interfaces=names)
        return 0
    if name not in names:
        raise NotConfigured(f"target {target!r} has no serial interface {name!r} (interfaces: {', '.join(names)})",
                            target=target, interface=name, interfaces=names)
    return names.index(name)


def _check_device(device: str) -> None:
    """The rule the lab file and the host apply (``bench_agent.serial.urls``), said about --device."""
    from bench_agent.serial.urls import device_problem

    if why := device_problem(device):
        raise UsageError(f"--device: {why}", argument="device")


def add(args: argparse.Namespace) -> None:
    import tomlkit

    from controller.lab import edits

    check_name("interface", args.name)
    _check_device(args.device)
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        ifaces = t.get("serial")
        if ifaces is not None and any(i["name"] == args.name for i in ifaces):
            raise AlreadyExists(f"target {args.target!r} already has a serial interface {args.name!r}",
                                      hint=f"change it with `panio serial set {args.name} -t {args.target} ...`")
        if ifaces is None:
            t["serial"] = ifaces = tomlkit.aot()
        ifaces.append(edits.new_table({
            "name": args.name, "device": args.device, "baud": args.baud,
            "power_sense_signal": args.sense, "power_button": True if args.power_button else None,
            "line_ending": args.line_ending, "description": args.description,
        }))
    say(f"added serial interface {args.name} to {args.target} ({args.device} @{args.baud})")


def set_(args: argparse.Namespace) -> None:
    from controller.lab import edits

    if args.sense and args.no_sense:
        raise UsageError("--sense and --no-sense contradict each other")
    if args.power_button and args.no_power_button:
        raise UsageError("--power-button and --no-power-button contradict each other")
    if args.device is not None:
        _check_device(args.device)
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        ifaces = t.get("serial", [])
        iface = ifaces[_find(ifaces, args.target, args.name)]
        changed = edits.set_fields(iface, {
            "device": args.device, "baud": args.baud, "power_sense_signal": "" if args.no_sense else args.sense,
            "power_button": True if args.power_button else ("" if args.no_power_button else None),
            "line_ending": args.line_ending, "description": args.description,
        })
        name = iface["name"]
    say(f"serial {name} on {args.target}: " + (f"set {', '.join(changed)}" if changed else "nothing to change"))


def rm(args: argparse.Namespace) -> None:
    from controller.lab import edits

    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        ifaces = t.get("serial", [])
        index = _find(ifaces, args.target, args.name)
        name = ifaces[index]["name"]
        del ifaces[index]
        if len(ifaces) == 0:
            del t["serial"]
    say(f"removed serial interface {name} from {args.target}")


@runtime(needs_lab=False)
def devices(args: argparse.Namespace, lab: None) -> Step:
    """This host's serial ports (run where the command runs: in a job, on the target's host)."""
    return Step("serial.devices", None, {"json": args.json})
