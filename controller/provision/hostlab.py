"""The part of the lab file a control host keeps as its own configuration (``panio setup`` installs it).

A worker runs only the hooks, actions and devices of this file
(``bench_agent.jobs.host_config``), so it holds everything the host serves: the
targets whose ``host`` is it (``local`` for the targets without one) and the
targets with an action it runs, whole; the ``[[notify]]`` channels its jobs
report to; and, so the file is a valid lab on its own, the SSH address of each
host they name (only that: a setting that changes from run to run, such as
``python``, would make every setup a change).
"""

from __future__ import annotations

from typing import Any

from bench_agent.jobs.host_config import LOCAL


def serves(target: dict[str, Any], host: str) -> bool:
    owners = {target.get("host") or LOCAL} | {a.get("host") for a in target.get("actions", {}).values()}
    return host in owners


def data(lab_data: dict[str, Any], host: str) -> dict[str, Any]:
    targets = {n: t for n, t in lab_data.get("targets", {}).items() if serves(t, host)}
    named = {t.get("host") for t in targets.values()} | {a.get("host") for t in targets.values()
                                                          for a in t.get("actions", {}).values()}
    hosts = {n: {k: v for k, v in h.items() if k in ("ssh", "port")}
             for n, h in lab_data.get("hosts", {}).items() if n in named}
    out: dict[str, Any] = {}
    if hosts:
        out["hosts"] = hosts
    if targets:
        out["targets"] = targets
    if lab_data.get("notify"):
        out["notify"] = lab_data["notify"]
    return out


def text(lab_data: dict[str, Any], host: str) -> str:
    import tomlkit

    head = (f"# The configuration of control host {host}, written by `panio setup --host {host}` from the "
            "operator's lab file.\n# Its worker runs only what this file says; edit the operator's lab and run "
            "setup again.\n")
    return head + tomlkit.dumps(data(lab_data, host))
