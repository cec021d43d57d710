"""Human summaries of targets and hosts, shared by `target show` and `config show`."""

from __future__ import annotations

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

if TYPE_CHECKING:
    from typing import Any



def _hooks(table: dict[str, Any]) -> str:
    from controller.lab.schema import HOOKS

    parts = [f"{h.removesuffix('_cmd')}: {table[h]}" for h in HOOKS if h in table]
    return "; ".join(parts) if parts else "(no hooks)"


def serial_line(iface: dict[str, Any]) -> str:
    extras = []
    if "power_sense_signal" in iface:
        extras.append(f"sense={iface['power_sense_signal']}")
    if iface.get("power_button"):
        extras.append("power_button")
    if "line_ending" in iface:
        extras.append(f"line_ending={iface['line_ending']}")
    baud = f" @{iface['baud']}" if "baud" in iface else ""
    return f"{iface['name']}  {iface['device']}{baud}" + (f"  {' '.join(extras)}" if extras else "")


def target_lines(name: str, t: dict[str, Any]) -> list[str]:
    head = name
    head += f"  (host: {t['host']})" if "host" in t else "  (host: this machine)"
    if t.get("description"):
        head += f"  {t['description']}"
    if t.get("tags"):
        head += f"  tags: {', '.join(t['tags'])}"
    out = [head]
    for iface in t.get("serial", []):
        out.append(f"  serial   {serial_line(iface)}")
    if "netboot" in t:
        nb = t["netboot"]
        root = nb.get("tftp_root", "(default)")
        out.append(f"  netboot  interface {nb['interface']}, tftp root {root}")
    if "power" in t:
        pw = t["power"]
        out.append(f"  power    {_hooks(pw)}")
        for level, hooks in pw.get("levels", {}).items():
            out.append(f"           level {level}: {_hooks(hooks)}")
    if "video" in t:
        out.append(f"  video    {t['video']['device']}")
    if "hid" in t:
        hid = t["hid"]
        out.append(f"  hid      {hid['device']}" + (f" ({hid['protocol']})" if "protocol" in hid else ""))
    if "adb" in t:
        out.append(f"  adb      serial {t['adb']['serial']}")
    for aname, act in t.get("actions", {}).items():
        power = " [requires power]" if act.get("requires_power") else ""
        takes = f" [takes up to {act['max_args']} arguments]" if act.get("max_args") else ""
        out.append(f"  action   {aname}: {act['command']}{takes}{power}")
    if "profile" in t:
        pr = t["profile"]
        keys = pr.get("setup_key")
        keys = "+".join(keys) if isinstance(keys, list) else keys
        parts = [f"prompt /{pr['prompt']}/" if "prompt" in pr else "",
                 f"screen /{pr['screen_text']}/" if "screen_text" in pr else "",
                 f"setup menu by {keys} at /{pr['setup_cue']}/" if keys else "no setup menu"]
        out.append("  profile  " + ", ".join(p for p in parts if p))
    if len(out) == 1:
        out.append("  (no channels yet: add one with `panio serial add`, `panio power set`, ...)")
    return out


def host_line(name: str, h: dict[str, Any]) -> str:
    port = f" port {h['port']}" if "port" in h else ""
    desc = f"  {h['description']}" if h.get("description") else ""
    return f"{name}  ssh {h['ssh']}{port}{desc}"
