"""A control host's own configuration, and the guard that makes broker messages obey it.

Commands never travel on the broker. ``panio worker --host NAME --lab PATH``
reads the targets this host serves from a lab file *on the host* (the one
``panio setup`` installs there), and every request that arrives through the
broker — a Celery ``panio.op`` or a step of a ``panio.run_job`` — is checked
against it in ``bench_agent.ops.call`` before anything runs:

* the target must be in the host's file and be this host's (its ``host``,
  or no host for ``--host local``; an action with a ``host`` of its own
  belongs to that host): otherwise ``refused``;
* every argument that is configuration — a power table with its hooks, an
  action's command, the netboot table with its hook backends, a serial
  interface, the video and HID devices, a doctor's target table — is taken
  from the host's file. A message may repeat it (the job payload's step
  ``args`` keep the shape the CLI uses), but a value that differs from the
  host's is refused, whatever the message's signature;
* an operation whose function takes configuration this module does not know
  how to check is refused over the broker altogether (nothing new fails open).

The CLI in-process and the SSH agent pass configuration as before: their
caller is an operator with a shell on this host or over SSH (docs/security.md).

This is the one place ``bench_agent`` reads a lab file (``tomllib``, re-read
when the file changes); it does not validate it the way the controller does,
it only looks up tables in it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from bench_agent.errors import NotConfigured, Refused

LOCAL = "local"  # the host of a target without one (served by `panio worker --host local`)
HOST_OPS = frozenset({"system.ping", "system.info", "system.discover", "system.host_check", "daemons.list",
                      "daemons.stop"})  # about the host itself: no target, no configuration
CHANNEL_ARGS = ("power", "netboot", "video", "hid")  # a target's table, passed whole
_INSTALLED: list[HostConfig] = []  # the worker's own configuration, set once at its start (``install``)


def install_hint(host: str) -> str:
    """How host ``host`` gets its configuration: `panio setup` for a control host; for ``local`` (this
    machine's own targets, which no setup installs) the operator's lab itself."""
    if host == LOCAL:
        return ("`panio worker --host local` serves the targets without a host of a lab on this machine: "
                "pass it with `panio worker --host local --lab FILE` (or $PANIO_LAB), or create one with `panio init`")
    return f"install it with `panio setup --host {host}` from the controller (docs/hosts.md)"


class HostConfig:
    """The targets control host ``host`` serves, from the lab file at ``path``."""

    def __init__(self, path: str | os.PathLike, host: str) -> None:
        self.path, self.host = Path(path), host
        self._seen: tuple | None = None
        self._data: dict[str, Any] = {}
        self._lock = threading.Lock()

    def data(self) -> dict[str, Any]:
        """The parsed file, read again when it changed (``panio setup`` installs a new one under a live worker)."""
        import tomllib

        try:
            st = self.path.stat()
            with self._lock:
                if self._seen != (st.st_mtime_ns, st.st_size, st.st_ino):
                    from bench_agent.adb.channels import with_adb_channels

                    with open(self.path, "rb") as f:  # with an adb table's channels, as the controller sees them
                        self._data = with_adb_channels(tomllib.load(f))
                    self._seen = (st.st_mtime_ns, st.st_size, st.st_ino)
                return self._data
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise NotConfigured(f"host {self.host}: cannot read its configuration {self.path}: {exc}",
                                hint=install_hint(self.host),
                                host=self.host, file=str(self.path)) from None

    def owned(self) -> dict[str, dict[str, Any]]:
        """This host's targets: name -> the target's table."""
        targets = self.data().get("targets")
        if not isinstance(targets, dict):
            return {}
        return {n: t for n, t in targets.items() if isinstance(t, dict) and (t.get("host") or LOCAL) == self.host}

    def target(self, name: Any, action: Any = None) -> dict[str, Any]:
        """Target ``name``'s table if this host serves it (or serves its ``action``), else refused."""
        targets = self.data().get("targets")
        table = targets.get(name) if isinstance(targets, dict) and isinstance(name, str) else None
        if not isinstance(table, dict):
            raise self._refuse(f"target {name!r} is not in this host's configuration", target=name)
        owner = table.get("host") or LOCAL
        if action is not None:
            act = (table.get("actions") or {}).get(action)
            if not isinstance(act, dict):
                raise self._refuse(f"target {name!r} has no action {action!r} in this host's configuration",
                                   target=name, action=action)
            owner = act.get("host") or owner
        if owner != self.host:
            raise self._refuse(f"target {name!r}{f' action {action!r}' if action else ''} belongs to host "
                               f"{owner!r}, not to this one", target=name)
        return table

    def notify(self) -> list[dict[str, Any]]:
        """The lab's ``[[notify]]`` channels, as this host's file has them."""
        return [n for n in self.data().get("notify", []) if isinstance(n, dict)]

    def enforce(self, op: str, args: dict[str, Any], params: set[str], taken: set[str]) -> dict[str, Any]:
        """``args`` for ``op`` with every configuration argument taken from this host's file (see the module
        docstring); ``params`` are the op's declared runtime parameters, ``taken`` every argument its function
        takes. Refused (and logged) otherwise."""
        if op in HOST_OPS:
            return args
        if op == "system.doctor":
            return self._doctor(args)
        unknown = taken - params - {"target", "iface", "interfaces", "tftp_root", *CHANNEL_ARGS} - _OWN.get(op, set())
        if unknown:
            raise self._refuse(f"{op} takes configuration a broker message may not carry "
                               f"({', '.join(sorted(unknown))})", op=op)
        if "target" not in taken:
            raise self._refuse(f"{op} names no target: not served over the broker", op=op)
        out = dict(args)
        table = self.target(args.get("target"), args.get("name") if op == "action.run" else None)
        for key in CHANNEL_ARGS:
            if key in taken:
                out[key] = self._same(op, key, args, table.get(key))
        if "iface" in taken:
            out["iface"] = self._iface(op, args, table)
        if "interfaces" in taken:
            out["interfaces"] = self._interfaces(op, args, table)
        if op == "action.run":  # the command, and how many words a request may append to it, are this host's
            act = table["actions"][args["name"]]
            out["command"] = self._same(op, "command", args, act.get("command"))
            out["max_args"] = self._same(op, "max_args", args, act.get("max_args"))
        if "tftp_root" in taken and args.get("tftp_root") is not None:
            self._same(op, "tftp_root", args, (table.get("netboot") or {}).get("tftp_root"))
        return out

    def _same(self, op: str, key: str, args: dict[str, Any], mine: Any) -> Any:
        if key in args and args[key] != mine:
            raise self._refuse(f"{op}: the message's {key} differs from this host's configuration of target "
                               f"{args.get('target')!r}", op=op, argument=key, target=args.get("target"))
        return mine

    def _iface(self, op: str, args: dict[str, Any], table: dict[str, Any]) -> dict[str, Any]:
        mine = [i for i in table.get("serial", []) if isinstance(i, dict)]
        given = args.get("iface")
        if given is None and len(mine) == 1:
            return mine[0]
        name = given.get("name") if isinstance(given, dict) else None
        found = next((i for i in mine if i.get("name") == name), None)
        if found is None:
            raise self._refuse(f"{op}: target {args.get('target')!r} has no serial interface {name!r} in this "
                               "host's configuration", op=op, argument="iface", target=args.get("target"))
        return self._same(op, "iface", args, found)

    def _interfaces(self, op: str, args: dict[str, Any], table: dict[str, Any]) -> list[dict[str, Any]]:
        mine = [i for i in table.get("serial", []) if isinstance(i, dict)]
        given = args.get("interfaces")
        if given is None:
            return mine
        if not isinstance(given, list) or any(i not in mine for i in given):
            raise self._refuse(f"{op}: the message's serial interfaces differ from this host's configuration of "
                               f"target {args.get('target')!r}", op=op, argument="interfaces")
        return given

    def _doctor(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("config") not in self.owned().values():
            raise self._refuse("system.doctor: the message's target table is not one of this host's targets",
                               op="system.doctor", argument="config")
        return args

    def _refuse(self, why: str, **details: Any) -> Refused:
        import logging

        logging.getLogger("panio.host_config").warning("refused a broker request on host %s: %s", self.host, why)
        return Refused(f"host {self.host}: {why}", hint=f"the host runs only its own configuration ({self.path}); "
                       + install_hint(self.host), host=self.host, **details)


_OWN = {"action.run": {"name", "command", "max_args"}}  # configuration an op names itself, checked above


def install(config: HostConfig) -> None:
    """Make ``config`` guard every ``bench_agent.ops.call`` in this process (``panio worker``, at start)."""
    _INSTALLED[:] = [config]


def installed() -> HostConfig | None:
    return _INSTALLED[0] if _INSTALLED else None
