"""Bundled helper programs: small standalone tools that power hooks and people call.

A helper is a module with ``run(argv) -> int`` (raises ``PanioError`` on
failure) and ``main()`` (its own console script). ``panio helper`` lists
them; ``panio helper NAME ARGS...`` runs one with its arguments passed
through verbatim. Helpers sit behind generic hooks: there is no
``panio shelly``, there is ``shellyplug`` in a power hook.
"""

from __future__ import annotations

import sys
TYPE_CHECKING = False  # a power hook need not import typing (docs/scale.md: a process a power operation)

from bench_agent.errors import NotConfigured, PanioError

if TYPE_CHECKING:
    from typing import Callable

# name -> (module, one-line summary, example)
HELPERS: dict[str, tuple[str, str, str]] = {
    "shellyplug": (
        "bench_agent.helpers.shellyplug",
        "switch a Shelly smart plug (Gen1 HTTP or Gen2+ RPC): on, off, cycle, state, toggle",
        "shellyplug -d 192.0.2.41 cycle",
    ),
}


def listing() -> list[dict[str, str]]:
    return [{"name": n, "summary": s, "example": e} for n, (_, s, e) in HELPERS.items()]


def runner(name: str) -> Callable[[list[str]], int]:
    if name not in HELPERS:
        from bench_agent.nearmiss import closest

        known = ", ".join(HELPERS)
        close = closest(name, HELPERS)
        near = f"did you mean `panio helper {close}`? " if close else ""
        raise NotConfigured(f"no bundled helper {name!r} (helpers: {known})",
                            hint=f"{near}list them with `panio helper`", helper=name)
    import importlib

    return importlib.import_module(HELPERS[name][0]).run


def console_main(prog: str, run: Callable[[list[str]], int]) -> None:
    """Entry point of a helper's own console script: errors as one human line and one JSON line."""
    try:
        status = run(sys.argv[1:])
    except PanioError as err:
        status = _report(prog, err)
    except KeyboardInterrupt:
        status = 130
    except Exception as exc:  # noqa: BLE001 - as in panio's own main: a bug is reported, never a traceback
        import os

        if os.environ.get("PANIO_DEBUG"):
            import traceback

            traceback.print_exc()
        from bench_agent.errors import InternalError

        bug = InternalError(f"internal error: {type(exc).__name__}: {exc}",
                            hint=f"this is a bug in {prog}; rerun with PANIO_DEBUG=1 for the traceback")
        status = _report(prog, bug)
    sys.exit(status)


def _report(prog: str, err: PanioError) -> int:
    import json

    sys.stdout.flush()
    said = err.message if err.message.startswith(f"{prog}: ") else f"{prog}: {err.message}"  # argparse's has it
    sys.stderr.write(said + (f" ({err.hint})" if err.hint else "") + "\n")
    sys.stderr.write(json.dumps(err.to_json()) + "\n")
    return err.exit_status
