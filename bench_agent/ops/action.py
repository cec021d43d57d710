"""Named actions: run a project's command bound to a target (action.run).

The command is split with ``shlex`` and executed without a shell, with
``PANIO_TARGET`` and ``PANIO_ACTION`` in its environment, bounded by its
``timeout_s`` (default 600). Its output is returned, not streamed.
"""

from __future__ import annotations

from typing import Any

from bench_agent import hooks
from bench_agent.ops import operation
from bench_agent.ops.spec import Param, s_deadline

DEFAULT_TIMEOUT_S = 600.0


@operation("action.run", side_effect=True, destructive=True, deadline=s_deadline("timeout_s", DEFAULT_TIMEOUT_S),
           params=(Param("timeout_s", float, "how long the action may run", default=None, unit="s", minimum=0.001,
                         maximum=86400.0),))
def run(target: str, name: str, command: str, timeout_s: float | None = None) -> dict[str, Any]:
    """``{"exit", "stdout", "stderr"}`` of the action; a non-zero exit is returned, not raised."""
    result = hooks.run(command, name=f"action {name} of {target}", check=False,
                       timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
                       env={"PANIO_TARGET": target, "PANIO_ACTION": name})
    return {"target": target, "action": name, "exit": result.returncode, "stdout": result.stdout,
            "stderr": result.stderr}
