"""A read-only view of a validated lab file, with lookups that fail helpfully."""

from __future__ import annotations

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

from bench_agent.errors import NotConfigured, UsageError

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

CHANNELS = ("serial", "netboot", "power", "video", "hid", "adb")


def _unknown_hint(name: str, known: Any, add: str, kind: str) -> str:
    """A hint for an unknown name: the near miss if there is one, else how to add it (only for a valid name,
    so no unchecked input ever lands in a line meant to be pasted into a shell)."""
    from bench_agent.nearmiss import closest
    from controller.lab.schema import NAME_RE

    close = [k for k in known if k == name.lower()] or [c for c in [closest(name, known, cutoff=0.75)] if c]
    if close:
        return f"did you mean {close[0]!r}?" + (f" {kind} names are lowercase" if close[0] == name.lower() else "")
    if NAME_RE.match(name):
        return f"add it with `{add.format(name)}`"
    return "names are lowercase letters, digits, '-' and '_'"


def _names(items: Any) -> str:
    names = sorted(items)
    return ", ".join(names) if names else "none"


class Lab:
    """A validated lab file: ``path`` and its parsed ``data``."""

    __slots__ = ("path", "data")

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    @property
    def key(self) -> str:
        """The lab's key on control hosts: its ``[lab] name``, else a hash of the lab file's real path
        (``bench_agent.paths.lab_key_of``). A target's captures, logs and leases are keyed by it."""
        from bench_agent.paths import lab_key_of

        return lab_key_of(str(self.path), self.data.get("lab", {}).get("name"))

    @property
    def targets(self) -> dict[str, dict[str, Any]]:
        return self.data.get("targets", {})

    @property
    def hosts(self) -> dict[str, dict[str, Any]]:
        return self.data.get("hosts", {})

    def target(self, name: str) -> dict[str, Any]:
        try:
            return self.targets[name]
        except KeyError:
            raise NotConfigured(
                f"no target {name!r} in {self.path} (targets: {_names(self.targets)})",
                hint=_unknown_hint(name, self.targets, "panio target add {}", "target"),
                target=name,
                known=sorted(self.targets),
            ) from None

    def host(self, name: str) -> dict[str, Any]:
        try:
            return self.hosts[name]
        except KeyError:
            raise NotConfigured(
                f"no host {name!r} in {self.path} (hosts: {_names(self.hosts)})",
                hint=_unknown_hint(name, self.hosts, "panio host add {} --ssh USER@HOST", "host"),
                host=name,
                known=sorted(self.hosts),
            ) from None

    def channel(self, target: str, kind: str) -> dict[str, Any]:
        t = self.target(target)
        if kind not in t:
            raise NotConfigured(
                f"target {target!r} has no {kind} channel",
                hint=f"configure it with `panio {kind} set -t {target} ...`",
                target=target,
                channel=kind,
            )
        return t[kind]

    def serial(self, target: str, iface: str | None = None) -> dict[str, Any]:
        """The serial interface ``iface`` of ``target``; with one interface, ``iface`` may be omitted."""
        ifaces = self.target(target).get("serial", [])
        names = [i["name"] for i in ifaces]
        if not ifaces:
            raise NotConfigured(
                f"target {target!r} has no serial interface",
                hint=f"add one with `panio serial add console -t {target} --device PATH`",
                target=target,
            )
        if iface is None:
            if len(ifaces) == 1:
                return ifaces[0]
            raise UsageError(
                f"target {target!r} has {len(ifaces)} serial interfaces ({', '.join(names)}); choose one with -i NAME",
                target=target,
                interfaces=names,
            )
        for i in ifaces:
            if i["name"] == iface:
                return i
        raise NotConfigured(
            f"target {target!r} has no serial interface {iface!r} (interfaces: {', '.join(names)})",
            target=target,
            interface=iface,
            interfaces=names,
        )

    def channels_of(self, target: str) -> list[str]:
        t = self.target(target)
        return [c for c in CHANNELS if c in t]
