"""panio ping TARGET: a no-op round trip to the bench agent that owns a target."""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json, add_target_positional, non_negative_float, positive_int
from controller.cli.runtime import Step, runtime


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Check that the bench agent owning TARGET answers: each round trip goes\n"
        "through the same dispatch as every runtime command (in-process for a\n"
        "target on this machine, the host's agent otherwise) and prints its time."
    )
    p.epilog = "example:\n  panio ping pico --count 3\n\nsee also: panio target show, docs/jobs.md"
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    add_target_positional(p)
    p.add_argument("-c", "--count", type=positive_int, default=1, help="round trips to make")
    p.add_argument("-i", "--interval", type=non_negative_float, default=0.0, metavar="S",
                   help="seconds to wait between round trips")
    add_json(p)
    p.set_defaults(func=run)


@runtime
def run(args: argparse.Namespace, lab: Any) -> Step:
    return Step("system.ping", args.target, {"target": args.target, "host": lab.target(args.target).get("host"),
                                             "count": args.count, "interval_s": args.interval, "json": args.json})
