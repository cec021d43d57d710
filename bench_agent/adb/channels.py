"""The channels an ``adb`` table implies, derived where a lab file is read: by the controller
(``controller.lab.store``) and by a control host from its own copy (``bench_agent.jobs.host_config``), so both
see the same configuration and a job's messages match the host's."""

from __future__ import annotations


def implied(serial: str) -> dict:
    """serial ``console`` = ``adb://SERIAL`` (a kept adb shell), video ``adb:SERIAL`` (screencap), hid protocol
    ``adb`` (input): docs/adb.md."""
    return {"serial": [{"name": "console", "device": f"adb://{serial}"}], "video": {"device": f"adb:{serial}"},
            "hid": {"device": f"adb:{serial}", "protocol": "adb"}}


def with_adb_channels(data: dict) -> dict:
    """``data`` (a parsed lab file) whose targets with an ``adb`` table carry the implied channels where the
    file gives none of its own. Never written back; anything malformed is left for the schema to name."""
    targets = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(targets, dict) or not any(isinstance(t, dict) and "adb" in t for t in targets.values()):
        return data
    out = {**data, "targets": dict(targets)}
    for name, t in targets.items():
        serial = t.get("adb", {}).get("serial") if isinstance(t, dict) and isinstance(t.get("adb"), dict) else None
        if isinstance(serial, str) and serial:
            out["targets"][name] = {**{k: v for k, v in implied(serial).items() if k not in t}, **t}
    return out
