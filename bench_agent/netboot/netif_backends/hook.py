"""HookHardDown: the target's own commands cut and restore the adapter's power (or its far end's link)."""

from __future__ import annotations

from typing import Any

from bench_agent import hooks
from bench_agent.errors import NotConfigured


class HookHardDown:
    def __init__(self, target: str, netboot: dict[str, Any]) -> None:
        self.target, self.netboot = target, netboot

    def _run(self, key: str) -> dict[str, Any]:
        command = self.netboot.get(key)
        if not command:
            flag = "--" + key.replace("_", "-")
            raise NotConfigured(f"no {key} for {self.target}'s link", hint=f"panio netboot set -t {self.target} "
                                f"{flag} CMD", target=self.target, hook=key)
        env = {"PANIO_TARGET": self.target, "PANIO_INTERFACE": self.netboot["interface"]}
        hooks.run(command, name=f"{key} of {self.target}", env=env)
        return {"backend": "hook", "command": command}

    def down(self) -> dict[str, Any]:
        return self._run("hard_down_cmd")

    def up(self, remembered: dict[str, Any]) -> dict[str, Any]:
        return self._run("hard_up_cmd")
