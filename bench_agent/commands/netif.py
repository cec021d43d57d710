"""The bodies of ``panio netif mode|down-hard|status``.

``opts`` carries ``target``, ``json``, ``netboot`` (the lab's netboot table:
the link and its hard-down backend), and ``mode`` for ``mode``, ``probe`` for
``status``.
"""

from __future__ import annotations

from typing import Any

from bench_agent.commands import Call, Output, command, fields, items

WHAT = {"link": "link up", "ffx": "link up for ffx (IPv6 link-local)", "off": "administratively down (soft)"}
LINK = {
    "target": ("string", "the target"),
    "interface": ("string", "the control host's link to the target"),
}
HARD = fields({"backend": ("string", "usb-sysfs, uhubctl or hook")}, "and what the backend needs to undo it")
MODE = fields({
    **LINK,
    "mode": ("string", "link, ffx or off"),
    "netboot_stopped?": ("boolean", "ffx, off: a netboot server was stopped"),
    "hard_up?": (HARD, "the adapter's power was restored (it was down-hard)"),
})
DOWN = fields({
    **LINK,
    "mode": ("string", "down-hard"),
    "netboot_stopped": ("boolean", "a netboot server was stopped"),
    "hard_down": (HARD, "how the adapter's power was cut"),
    "already?": ("boolean", "it was already down-hard (nothing done)"),
})
STATUS = fields({
    **LINK,
    "mode": ("string|null", "the mode last set (link, ffx, off, down-hard; null: never set)"),
    "netboot_serving": ("boolean", "a netboot server runs on it"),
    "present": ("boolean", "the interface exists (false: its adapter is powered off)"),
    "admin_up": ("boolean", "administratively up"),
    "carrier": ("boolean", "cable live"),
    "operstate?": ("string", "the kernel's operstate"),
    "mac?": ("string", "its MAC address"),
    "addresses": (items("string"), "its addresses (CIDR)"),
    "neighbours": (items("string"), "IPv6 link-local neighbours that answered"),
    "target_link_local": ("string|null", "the target's IPv6 link-local address"),
    "ffx": ("string|null", "the `ffx target add` line for it"),
    "note?": ("string", "why it is absent"),
})


def _op(call: Call, op: str, opts: dict, extra: dict[str, Any] | None = None) -> Any:
    return call(op, {"target": opts["target"], "netboot": opts["netboot"], **(extra or {})})


@command("netif.mode", output=MODE)
def mode(call: Call, opts: dict, out: Output, context: dict) -> None:
    target, want = opts["target"], opts["mode"]
    r = _op(call, "netif.mode", opts, {"mode": want})
    if opts.get("json"):
        out.json(r)
        return
    notes = []
    if r.get("netboot_stopped"):
        notes.append("netboot stopped")
    if r.get("hard_up"):
        notes.append("adapter power restored")
    out.say(f"netif {target} ({r['interface']}): {WHAT[want]}" + (f"; {', '.join(notes)}" if notes else ""))
    if want == "ffx":
        out.say(f"next: power-cycle the target, then `panio netif status {target}` for the ffx address")


@command("netif.down_hard", output=DOWN)
def down_hard(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    r = _op(call, "netif.down_hard", opts)
    if opts.get("json"):
        out.json(r)
        return
    if r.get("already"):
        out.say(f"netif {target} ({r['interface']}): already hard down; `panio netif mode link {target}` "
                "brings it back")
        return
    extra = "; netboot stopped" if r.get("netboot_stopped") else ""
    out.say(f"netif {target} ({r['interface']}): adapter power cut via {r['hard_down']['backend']}{extra}; "
            f"`panio netif mode link {target}` brings it back")


@command("netif.status", output=STATUS)
def status(call: Call, opts: dict, out: Output, context: dict) -> None:
    target = opts["target"]
    st = _op(call, "netif.status", opts, {"probe": opts.get("probe", True)})
    if opts.get("json"):
        out.json(st)
        return
    out.say(f"netif {target}: {st['interface']}, mode {st['mode'] or 'unset'}"
            + (", netboot serving" if st["netboot_serving"] else ""))
    if not st["present"]:
        out.say(f"  {st['note']}")
        return
    out.say(f"  admin {'up' if st['admin_up'] else 'down'}, carrier {'up' if st['carrier'] else 'down'}"
            f" (operstate {st['operstate']}), mac {st['mac']}")
    out.say(f"  addresses  {', '.join(st['addresses']) or 'none'}")
    if st["ffx"]:
        out.say(f"  target     {st['target_link_local']}")
        out.say(f"  {st['ffx']}")
    else:
        out.say("  target     no IPv6 link-local neighbour answered (is it powered and booted, is the link up?)")
