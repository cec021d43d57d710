"""``PanioTarget``: one leased target and its channels, as a test sees them.

Each handle fills in what the CLI would (the target's name, its channel's
configuration from the lab file) and calls the operation through
``adapter.call``, so a test's call travels exactly like ``panio serial send``
does: same dispatch, same transport, same lease checks, same typed errors
(``bench_agent.errors``: a ``Timeout`` is exit 22's error, and so on).

Serial waits need no bookkeeping: ``serial.wait(pattern)`` reads from the
handle's *mark*, which is set when the session starts capture, before every
power action and ``send``, and where the last ``transact`` or wait ended
(``serial.mark()`` sets it by hand). So ``power.cycle()`` then
``serial.wait("login:")`` sees the new boot, never the last one.
"""

from __future__ import annotations

from typing import Any

from bench_agent.errors import DeviceError, NotConfigured, Timeout, Unreachable
from controller.plugin import adapter


class PanioTarget:
    """A target leased for the test session: ``name``, ``host``, ``lease_token`` and its channel handles."""

    def __init__(self, lab: Any, name: str, token: int | None, credential: str | None = None) -> None:
        self.lab, self.name, self.lease_token = lab, name, token
        self._credential = credential if credential is not None else token  # the lease's TOKEN:SECRET
        self.config = lab.target(name)
        self.host = self.config.get("host") or "local"
        self.serial = SerialHandle(self)
        self.power = PowerHandle(self)
        self.video = VideoHandle(self)
        self.hid = HidHandle(self)

    def call(self, op: str, **args: Any) -> Any:
        """Any operation by name, for this target (``target`` filled in): ``t.call("serial.status", iface=...)``."""
        return adapter.call(self.lab, self.name, op, args, self._credential)

    def has(self, channel: str) -> bool:
        """Whether the lab gives this target ``channel`` (serial, power, video, hid, ...)."""
        return bool(self.config.get(channel))

    def __repr__(self) -> str:
        return f"<PanioTarget {self.name} on {self.host}, lease token {self.lease_token}>"


class ChannelHandle:
    """A channel's operations (``<kind>.<verb>``), each given the channel's table from the lab file."""

    def __init__(self, target: PanioTarget, kind: str) -> None:
        self.target, self.kind = target, kind

    def table(self) -> dict[str, Any]:
        return dict(self.target.lab.channel(self.target.name, self.kind))  # NotConfigured names the fix

    def call(self, verb: str, **args: Any) -> Any:
        table = self.table()  # first: a target without the channel fails naming the command that adds it
        op = f"{self.kind}.{verb}"
        if _takes(op, self.kind):  # video.watch takes the table; video.shot reads the running daemon
            args = {self.kind: table, **args}
        return self.target.call(op, **args)

    def __getattr__(self, verb: str) -> Any:
        if verb.startswith("_"):
            raise AttributeError(verb)
        return lambda **args: self.call(verb, **args)  # video.shot(), video.read(region=...), video.watch()


class VideoHandle(ChannelHandle):
    """The target's screen: ``read()``, ``shot()``, ``wait(...)`` start its capture first if none runs (it is
    started on first use, not for every test, so a session that never looks at the screen holds no dongle)."""

    SELF_STARTING = ("shot", "read", "wait")

    def __init__(self, target: PanioTarget) -> None:
        super().__init__(target, "video")
        self.started = False  # by this handle: the session stops it at the end
        self._running = False  # known to run (checked once, not before every read)

    def call(self, verb: str, **args: Any) -> Any:
        if verb in self.SELF_STARTING and not self._running:
            self.table()  # no video channel: NotConfigured naming the command that adds it, before anything starts
            if not super().call("watch").get("already_running"):
                self.started = True
            self._running = True
        elif verb in ("watch", "stop"):
            self._running = False
        return super().call(verb, **args)


class HidHandle(ChannelHandle):
    """Keyboard and mouse through the target's HID rig: ``send("key", "ENTER")``, ``type("root")``."""

    def __init__(self, target: PanioTarget) -> None:
        super().__init__(target, "hid")

    def send(self, *words: Any, pace_ms: int | None = None) -> Any:
        return self.call("send", command=[str(w) for w in words], **_given(pace_ms=pace_ms))

    def key(self, name: str) -> Any:
        return self.send("key", name)

    def type(self, text: str, pace_ms: int | None = None) -> Any:
        return self.send("type", text, pace_ms=pace_ms)


class PowerHandle:
    """The target's power hooks. Each switch marks every serial interface first (see the module docstring)."""

    def __init__(self, target: PanioTarget) -> None:
        self.target = target

    def _switch(self, verb: str, level: str | None) -> dict[str, Any]:
        self.target.serial.mark_all()
        power = self.target.lab.channel(self.target.name, "power")
        return self.target.call(f"power.{verb}", power=power, level=level)

    def on(self, level: str | None = None) -> dict[str, Any]:
        return self._switch("on", level)

    def off(self, level: str | None = None) -> dict[str, Any]:
        return self._switch("off", level)

    def cycle(self, level: str | None = None) -> dict[str, Any]:
        return self._switch("cycle", level)

    def state(self, level: str | None = None) -> str:
        """``on``, ``off`` or ``unknown``: the state hook, else the serial sense line (as `panio power-state`)."""
        from controller import power

        return adapter.run(power.states, self.target._credential, self.target.lab, self.target.name, level)[0]["state"]


class SerialHandle:
    """The target's serial consoles (``interface=None``: the only one, or the first)."""

    def __init__(self, target: PanioTarget) -> None:
        self.target = target
        self._marks: dict[str, tuple[int, int]] = {}

    @property
    def interfaces(self) -> list[str]:
        return [i["name"] for i in self.target.config.get("serial", [])]

    def _iface(self, interface: str | None) -> dict[str, Any]:
        if interface is None and not self.interfaces:
            raise NotConfigured(f"target {self.target.name!r} has no serial interface",
                                hint=f"add one with `panio serial add console -t {self.target.name} --device PATH`")
        return dict(self.target.lab.serial(self.target.name, interface or self.interfaces[0]))

    def watch(self) -> dict[str, Any]:
        """Start capture (harmless when it runs) and mark every interface."""
        ifaces = [dict(i) for i in self.target.config.get("serial", [])]
        out = self.target.call("serial.watch", interfaces=ifaces)
        self.mark_all()
        return out

    def stop(self, force: bool = False) -> dict[str, Any]:
        self._marks.clear()
        return self.target.call("serial.stop", force=force)

    def status(self, interface: str | None = None) -> dict[str, Any]:
        return self.target.call("serial.status", iface=self._iface(interface))

    def running(self) -> bool:
        return bool(self.interfaces) and self.status()["process"]["state"] == "running"

    def mark(self, interface: str | None = None) -> tuple[int, int]:
        """Make the next ``wait`` on ``interface`` start from now; returns (epoch, cursor)."""
        st = self.status(interface)
        if not isinstance(st["epoch"], int):
            raise Unreachable(f"no serial capture of {self.target.name!r} to mark", target=self.target.name,
                              hint="the plugin starts capture when it leases the target; was it stopped?")
        name = st["interface"]
        self._marks[name] = (st["epoch"], st["rx"]["cursor"])
        return self._marks[name]

    def mark_all(self) -> None:
        for name in self.interfaces:
            try:
                self.mark(name)
            except Unreachable:
                self._marks.pop(name, None)  # no capture: a later wait says so itself

    def send(self, text: str, interface: str | None = None, newline: bool = True,
             pace_ms: int | None = None) -> dict[str, Any]:
        iface = self._iface(interface)
        self.mark(iface["name"])
        return self.target.call("serial.send", iface=iface, text=text, newline=newline, **_given(pace_ms=pace_ms))

    def transact(self, text: str, until: str, timeout_ms: int | None = None, interface: str | None = None,
                 max_bytes: int | None = None) -> str:
        """Send ``text`` and return the reply up to the match of ``until``; ``Timeout`` if it never matched."""
        iface = self._iface(interface)
        epoch, _ = self.mark(iface["name"])
        r = self.target.call("serial.transact", iface=iface, text=text, until=until,
                             **_given(timeout_ms=timeout_ms, max_bytes=max_bytes))
        _raise_unless_matched(r, until, self.target.name)
        self._marks[iface["name"]] = (r.get("epoch", epoch), r["cursor"])  # the reply is consumed
        return r["text"]

    def wait(self, pattern: str, timeout_ms: int | None = None, interface: str | None = None,
             max_bytes: int | None = None) -> dict[str, Any]:
        """Wait from the mark until ``pattern`` matches; the mark moves past the match. ``Timeout`` otherwise."""
        iface = self._iface(interface)
        epoch, since = self._marks.get(iface["name"]) or self.mark(iface["name"])
        r = self.target.call("serial.wait", iface=iface, epoch=epoch, since=since, pattern=pattern,
                             **_given(timeout_ms=timeout_ms, max_bytes=max_bytes))
        _raise_unless_matched(r, pattern, self.target.name)
        self._marks[iface["name"]] = (r["epoch"], r["cursor"])
        return r

    def log(self, tail: int = 200, interface: str | None = None) -> list[str]:
        """The last ``tail`` captured lines' text (from disk: works while capture is stopped)."""
        r = self.target.call("serial.log", iface=self._iface(interface), tail=tail)
        return [entry.get("text", "") for entry in r["lines"] if "seq" in entry]


def _takes(op: str, name: str) -> bool:
    """Whether operation ``op`` has a parameter ``name`` (its registered function says so)."""
    import inspect

    from bench_agent import ops

    return name in inspect.signature(ops.lookup(op)).parameters


def _raise_unless_matched(r: dict[str, Any], pattern: str, target: str) -> None:
    details = {"status": r["status"], "cursor": r.get("cursor"), "epoch": r.get("epoch"), "target": target}
    if r["status"] == "disconnect" and r.get("capture_stopped"):
        from bench_agent.serial.control import capture_stopped

        raise capture_stopped(target, f"while waiting for {pattern!r}", status=r["status"], cursor=r.get("cursor"),
                              epoch=r.get("epoch"))
    if r["status"] == "disconnect":
        raise Unreachable(f"the serial device of {target!r} went away while waiting for {pattern!r}", **details)
    if r["status"] == "fault":
        raise DeviceError(f"serial wait on {target!r} failed: {r.get('fault')}", **details)
    if r["status"] in ("timeout", "cap"):
        tail = (r.get("text") or "")[-300:]
        raise Timeout(f"{pattern!r} did not match on {target!r}; the last bytes were {tail!r}", **details)


def _given(**kw: Any) -> dict[str, Any]:
    """The arguments a test gave; the others take the operation's spec defaults (written once, in the spec)."""
    return {k: v for k, v in kw.items() if v is not None}
