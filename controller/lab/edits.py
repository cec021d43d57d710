"""Small helpers for changing a ``tomlkit`` lab document with clear errors."""

from __future__ import annotations

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

if TYPE_CHECKING:
    from typing import Any

from bench_agent.errors import AlreadyExists


def section(doc: Any, key: str) -> Any:
    """The top-level ``hosts``/``targets`` table, created as a super-table if absent."""
    import tomlkit

    if key not in doc:
        doc.add(key, tomlkit.table(is_super_table=True))
    elif isinstance(doc[key], tomlkit.items.InlineTable):  # `targets = {...}` cannot hold a [targets.x] table
        table = tomlkit.table(is_super_table=True)
        for name, value in doc[key].items():
            table[name] = value
        doc[key] = table
    return doc[key]


def target(doc: Any, name: str, path: Any) -> Any:
    """The target's table in the ``tomlkit`` document, refused as reading the lab refuses it."""
    from controller.lab.model import Lab

    return Lab(path, doc).target(name)


def host(doc: Any, name: str, path: Any) -> Any:
    """The host's table in the ``tomlkit`` document, refused as reading the lab refuses it."""
    from controller.lab.model import Lab

    return Lab(path, doc).host(name)


def require_absent(container: Any, name: str, kind: str, where: str, target: str | None = None) -> None:
    if name in container:
        raise AlreadyExists(f"{kind} {name!r} already exists in {where}", hint=_exists_hint(kind, name, target),
                            name=name)


def _exists_hint(kind: str, name: str, target: str | None) -> str:
    """What to do about a taken name, naming only commands that exist (there is no `target set` or `action set`)."""
    if kind == "host":
        return f"change it with `panio host set {name} ...` or pick another name"
    if kind == "action":
        return f"pick another name, or replace it: `panio action rm {name} -t {target}`, then add it again"
    return (f"pick another name; see it with `panio target show {name}`; its channels change with their own "
            f"set commands (e.g. `panio serial set`)")


def set_fields(table: Any, values: dict[str, Any]) -> list[str]:
    """Set each non-None value; an empty string removes the key. Returns the keys changed."""
    changed = []
    for key, value in values.items():
        if value is None:
            continue
        if value == "" and key in table:
            del table[key]
        elif value != "":
            table[key] = value
        changed.append(key)
    return changed


def new_table(values: dict[str, Any]) -> Any:
    import tomlkit

    t = tomlkit.table()
    for key, value in values.items():
        if value is not None and value != "":
            t[key] = value
    t.add(tomlkit.nl())
    return t
