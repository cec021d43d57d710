"""The JSON shapes the daemons of `video` and `hid` share (``show``, ``watch``/``serve``, ``stop``): they answer
alike, so both ``bench_agent.commands.video`` and ``.hid`` declare these (not a command group: no bodies)."""

from __future__ import annotations

from bench_agent.commands import fields, items

DAEMON = fields({
    "target": ("string", "the target"),
    "state": ("string", "running, untracked (a daemon without its discovery file) or stopped"),
    "pid": ("integer|null", "the daemon's process (null: stopped)"),
    "pids?": (items("integer"), "untracked daemons' processes"),
    "device?": ("string|null", "the device it holds"),
    "hash?": ("string|null", "video: the latest frame's hash (null: no frame yet)"),
    "signal?": ("string|null", "video: the latest frame's signal (ok, no signal...)"),
    "published?": ("number|null", "video: when the latest frame was published (epoch s)"),
    "seen?": ("number|null", "video: when the daemon last read a frame (epoch s)"),
})
SHOW = fields({
    "target": ("string", "the target"),
    "channel": ("string", "video or hid"),
    "daemon": (DAEMON, "the capture (video) or rig (hid) daemon"),
}, "and the lab's table of the channel (device, protocol, ...), field by field")
WATCH = fields({
    "target": ("string", "the target"),
    "state": ("string", "running"),
    "pid": ("integer", "the daemon's process"),
    "device": ("string|null", "the device it holds"),
    "already_running": ("boolean", "it was running before (nothing started)"),
    "reaped": (items("integer"), "untracked or stale daemons stopped first"),
    "reaped_because?": ("string|null", "video: why they were stopped"),
})
STOPPED = fields({
    "target": ("string", "the target"),
    "pids": (items("integer"), "the daemon processes stopped"),
    "stopped": ("boolean", "true"),
})
