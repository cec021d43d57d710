"""panio ping TARGET: a no-op round trip to the bench agent that owns a target."""

from __future__ import annotations

import argparse
import time

from controller.cli.common import add_json, add_target_positional, load_lab, non_negative_float, positive_int, print_json, say


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Check that the bench agent owning TARGET answers: each round trip goes\n"
        "through the same dispatch as every runtime command (in-process for a\n"
        "target on this machine, the host's agent otherwise) and prints its time."
    )
    p.epilog = "example:\n  panio ping pico --count 3\n\nsee also: panio target show, docs/jobs.md"
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    add_target_positional(p)
    p.add_argument("-c", "--count", type=positive_int, default=1, help="round trips to make (default 1)")
    p.add_argument("-i", "--interval", type=non_negative_float, default=0.0, metavar="S",
                   help="seconds to wait between round trips (default 0)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from controller import dispatch

    lab = load_lab(args)
    host = lab.target(args.target).get("host") or "local"
    times_ms = []
    for seq in range(1, args.count + 1):
        if seq > 1 and args.interval:
            time.sleep(args.interval)
        start = time.perf_counter()
        reply = dispatch.call(lab, args.target, "system.ping", {"payload": seq})
        times_ms.append(round((time.perf_counter() - start) * 1000, 3))
        if reply.get("pong") != seq:
            from bench_agent.errors import DeviceError

            raise DeviceError(f"{args.target}: ping {seq} answered {reply!r}", target=args.target)
        if not args.json:
            say(f"{args.target} ({host}): seq={seq} time={times_ms[-1]:.3f} ms")
    if args.json:
        print_json({"target": args.target, "host": host, "count": args.count, "times_ms": times_ms})
