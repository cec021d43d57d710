"""The bodies of ``panio discover``, ``configure`` and ``doctor``: a host's hardware, read; nothing changes.

``discover`` opts: ``json``. ``configure``: ``target`` (the name to propose),
``host`` (written into the proposal), ``json``. Both ask ``system.discover``
of the host the controller routes them to (``--host``, else this machine).

``doctor``: ``targets`` (each ``{"name", "config"}``: its table from the lab
file), ``host`` and ``version`` (with ``--host``: that host itself is checked
first, against the controller's panio version), ``json``. A netboot TFTP root
is resolved where the body runs, as ``netboot tftp-root`` does.
"""

from __future__ import annotations

from typing import Any

from bench_agent.commands import Call, Output, command, fields, items, keyed, maybe
from bench_agent.commands.serial import PORT
from bench_agent.errors import PanioError

MARK = {"ok": "ok     ", "missing": "MISSING", "problem": "PROBLEM", "unchecked": "-      ", "warning": "WARNING"}
NOTHING = {"status": "unchecked", "channel": "-", "item": "-", "detail": "no channels configured"}

INVENTORY = fields({
    "serial": (items(PORT), "serial ports"),
    "video": (items(fields({"device": ("string", "the capture device node"),
                            "by_id": ("string|null", "its stable by-id path"),
                            "name": ("string", "what the driver calls it")})), "video capture devices"),
    "hid": (items(fields({"kind": ("string", "ch9329 (probably) or hidg"), "device": ("string", "its device node"),
                          "usb?": ("string|null", "USB VID:PID")})), "keyboard/mouse rigs"),
    "usb": (items(fields({"vid": ("string", "vendor id (hex)"), "pid": ("string", "product id (hex)"),
                          "bus": ("integer", "USB bus number"), "path": ("string", "bus-port path"), "manufacturer": ("string", "maker"),
                          "product": ("string", "product name"), "serial": ("string", "serial number"),
                          "role": ("string", "what panio takes it for (a serial adapter, a rig...), or empty")})),
            "USB devices"),
    "network": (items(fields({"interface": ("string", "the link's name"), "mac": ("string", "its MAC address"),
                              "state": ("string", "operstate (up, down...)"), "carrier": ("boolean", "cable live"),
                              "usb": ("boolean", "a USB adapter"),
                              "primary": ("boolean", "carries the default route: never for netboot")})),
                "network links"),
    "adb": (maybe(items(fields({"serial": ("string", "the device's adb serial"),
                                "state": ("string", "device, unauthorized, offline...")}))),
            "adb devices (null: adb not installed)"),
})
ROW = fields({
    "channel": ("string", "serial, video, hid, power, netboot, host..."),
    "item": ("string", "the interface, device or hook checked"),
    "status": ("string", "ok, missing, problem, unchecked or warning"),
    "detail": ("string", "what was found"),
})
DOCTOR = fields({
    "ok": ("boolean", "nothing missing or wrong (else exit 1 after the report)"),
    "targets": (keyed(items(ROW)), "each target's rows (and `HOST (host)`'s with --host)"),
    "broker?": (items(ROW), "the controller's broker checks (warnings only)"),
})
CONFIGURE = fields({
    "target": ("string", "the proposed target's name"),
    "proposal": ("object", "the target block (serial, netboot, video, adb, host), as lab.toml would hold it"),
    "written": ("boolean", "always false: configure writes nothing"),
})


@command("hardware.discover", output=INVENTORY)
def discover(call: Call, opts: dict, out: Output, context: dict) -> None:
    inv = call("system.discover", {})
    if opts.get("json"):
        out.json(inv)
        return
    for line in _inventory_lines(inv):
        out.say(line)


def _inventory_lines(inv: dict[str, Any]) -> list[str]:
    lines = ["serial ports:" if inv["serial"] else "serial ports: none"]
    lines += [f"  {p['by_id'] or p['device']}  {p['vid_pid'] or '-'}  {p['description']}" for p in inv["serial"]]
    lines.append("video capture:" if inv["video"] else "video capture: none")
    lines += [f"  {v['by_id'] or v['device']}  {v['name']}" for v in inv["video"]]
    lines.append("keyboard/mouse rigs:" if inv.get("hid") else "keyboard/mouse rigs: none")
    lines += [f"  {h['device']}  {h['kind']}" + (f"  {h['usb']}" if h.get("usb") else "") for h in inv.get("hid", [])]
    lines.append("USB devices:" if inv.get("usb") else "USB devices: none")
    lines += [_usb_line(u) for u in inv.get("usb", [])]
    lines.append("network links:" if inv["network"] else "network links: none")
    lines += [_link_line(n) for n in inv["network"]]
    if inv["adb"] is None:
        lines.append("adb: not installed")
    else:
        lines.append("adb devices: " + (", ".join(d["serial"] for d in inv["adb"]) or "none"))
    return lines


def _usb_line(u: dict[str, Any]) -> str:
    label = " ".join(x for x in (u["manufacturer"], u["product"]) if x) or "-"
    extra = "  ".join(x for x in (f"serial {u['serial']}" if u["serial"] else "", u["role"]) if x)
    return f"  {u['vid']}:{u['pid']}  {u['path']:<10} {label}" + (f"  ({extra})" if extra else "")


def _link_line(n: dict[str, Any]) -> str:
    tags = ", ".join(t for t, on in (("primary: not for netboot", n["primary"]), ("usb", n["usb"]),
                                      ("carrier", n["carrier"])) if on)
    return f"  {n['interface']}  {n['mac']}  {n['state']}" + (f"  ({tags})" if tags else "")


def propose(target: str, host: str | None, inv: dict) -> dict:
    """A target block for ``target`` from a host's inventory: its serial ports, a USB network link, a capture device."""
    block: dict = {}
    if host:
        block["host"] = host
    serial = [{"name": "console" if i == 0 else f"uart{i}", "device": p["by_id"] or p["device"], "baud": 115200}
              for i, p in enumerate(inv["serial"])]
    if serial:
        block["serial"] = serial
    links = [n for n in inv["network"] if n["usb"] and not n["primary"]]
    if links:
        block["netboot"] = {"interface": links[0]["interface"]}
    if inv["video"]:
        block["video"] = {"device": inv["video"][0]["by_id"] or inv["video"][0]["device"]}
    phones = attached_adb(inv)
    if phones and not serial and not inv["video"]:  # an Android device alone: console, screen and input over adb
        block["adb"] = {"serial": phones[0]}
    return block


def attached_adb(inv: dict) -> list[str]:
    """The serials `adb devices` lists as usable (``device``), in its order."""
    return [d["serial"] for d in inv.get("adb") or [] if d.get("state") == "device"]


def to_toml(target: str, block: dict) -> str:
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"proposed by `panio configure {target}`: review, then paste into lab.toml"))
    targets = tomlkit.table(is_super_table=True)
    targets[target] = block
    doc["targets"] = targets
    return doc.as_string()


@command("hardware.configure", output=CONFIGURE)
def configure(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    inv = call("system.discover", {})
    block = propose(target, opts.get("host"), inv)
    if opts.get("json"):
        out.json({"target": target, "proposal": block, "written": False})
        return
    out.say(to_toml(target, block).rstrip())
    if not any(k in block for k in ("serial", "netboot", "video", "adb")):
        out.say("# no serial ports, USB network links, capture devices or adb devices found: add channels by hand")
    others = [s for s in attached_adb(inv) if s != block.get("adb", {}).get("serial")]
    if others:
        out.say(f"# adb devices: {', '.join(others)} (an Android target: adb = {{serial = \"SERIAL\"}}, docs/adb.md)")
    out.say("# nothing was written")


@command("hardware.doctor", output=DOCTOR)
def doctor(call: Call, opts: dict, out: Output, context: dict) -> None:
    from bench_agent.netboot.settings import effective_root

    report: dict[str, list] = {}
    if opts.get("host"):
        report[f"{opts['host']} (host)"] = call("system.host_check", {"version": opts["version"]})
    for t in opts["targets"]:
        config = t["config"]
        root = effective_root(t["name"], config["netboot"]) if "netboot" in config else None
        report[t["name"]] = call("system.doctor", {"config": config, "tftp_root": root})
    bad = any(r["status"] in ("missing", "problem") for rows in report.values() for r in rows)
    broker = opts.get("broker")  # the controller's broker rows (warnings only), read when the step was planned
    if opts.get("json"):
        out.json({"ok": not bad, "targets": report, **({"broker": broker} if broker is not None else {})})
    else:
        if broker is not None:
            out.say("broker:")
            for r in broker:
                out.say(f"  {MARK[r['status']]}  {r['channel']:<8} {r['item']:<14} {r['detail']}")
        _report_lines(report, out, bool(opts["targets"]), bad)
    if bad:  # the report is on stdout; the failure gets its two lines on stderr like every other
        wrong = [f"{t}/{r['channel']}/{r['item']}" for t, rows in report.items() for r in rows
                 if r["status"] in ("missing", "problem")]
        raise PanioError(f"{len(wrong)} configured item(s) missing or wrong: {', '.join(wrong)}",
                         hint="see the report on stdout and `panio discover`", items=wrong)


def _report_lines(report: dict[str, list], out: Output, any_target: bool, bad: bool) -> None:
    for name, rows in report.items():
        out.say(f"{name}:")
        for r in rows or [NOTHING]:
            out.say(f"  {MARK[r['status']]}  {r['channel']:<8} {r['item']:<14} {r['detail']}")
    if not any_target:
        out.say("no targets in the lab file")
    if not bad:
        out.say("all configured hardware is present")
