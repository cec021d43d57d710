"""panio worker --host NAME: the bench worker of one control host (Celery, queue host.NAME)."""

from __future__ import annotations

import argparse

from controller.cli.common import check_name, positive_int

DETAILS = """\
Run this on each control host, as a service. It serves the Celery queue
host.NAME: jobs for targets whose host is NAME (`panio target add --host NAME`;
targets without a host go to `--host local`). Each job takes the target's lease
in Redis, runs its steps (panio command lines) inside the worker's own process
and reports the results to the controller's `panio recorder` (with
PANIO_RESULTS_URL: writes them in that database itself; see below).

It serves only the targets of this host's own configuration: the lab file
given with --lab (what `panio setup` installs on the host, default
~/.config/panio/lab.toml or $PANIO_LAB), re-read when it changes. A message
for a target that file does not give this host is refused, and every hook,
action and device comes from that file, never from a message: a message whose
command or channel differs from it is refused.

Messages are signed: the worker signs with its key and accepts only messages
signed by a certificate in its store (PANIO_SIGNING_KEY, PANIO_SIGNING_CERT,
PANIO_CERT_STORE, default: STATE_DIR/keys, made by `panio keys init`). Without
keys it does not start; --insecure-unsigned runs it on plain JSON anyway, for
a private test broker only.

Needs PANIO_BROKER (redis://HOST:6379/N); PANIO_REDIS_PREFIX must match the
controller's. Without PANIO_RESULTS_URL (the way to run a host) the worker
holds no results database: it sends its steps, artifacts, verdicts, health
and heartbeats as reports signed with its own key (`panio keys init --name
NAME`) on the stream PREFIXreports:NAME, and the controller's `panio
recorder` records them; it keeps the jobs it took and the fencing marks in
its state directory. With PANIO_RESULTS_URL (the controller's database) it
writes the results itself, as before. Stop it with SIGTERM (waits for
running jobs) or Ctrl-C.

A worker with PANIO_RESULTS_URL also reconciles: a job whose worker died while it waited for its
lease is sent again (it starts once the target is free), so is a job whose
broker message vanished with a Redis that lost its data or was delivered to a
worker that never started it, and a job whose runner is proven dead ends
incomplete. What it sends again is the message the controller signed, kept
with the job in the results database, never one it signs itself: a queued job
without one is refused (it ends incomplete). --events lets Flower see the
workers."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "Run the bench worker of one control host.\n\n" + DETAILS
    p.epilog = ("example:\n  panio worker --host bench1 --lab ~/.local/share/panio/lab.toml\n"
                "  panio worker --host bench1 --events   # for Flower\n"
                "  # with PANIO_BROKER=redis://ctl:6379/0 and PANIO_RESULTS_URL=postgresql://panio@ctl/panio set\n\n"
                "see also: panio keys, panio setup, panio job submit, docs/security.md")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--host", required=True, metavar="NAME", help="the control host this worker serves")
    p.add_argument("--concurrency", type=positive_int, default=4, metavar="N",
                   help="jobs at once on this host, one per target")
    p.add_argument("--lab", metavar="PATH", default=argparse.SUPPRESS,
                   help="this host's own configuration (default: $PANIO_LAB, else ~/.config/panio/lab.toml)")
    p.add_argument("--events", action="store_true",
                   help="send Celery task events and worker heartbeats, for Flower (see docs/monitoring.md)")
    p.add_argument("--insecure-unsigned", action="store_true",
                   help="accept unsigned JSON messages (no keys): anyone who can publish to the broker drives "
                        "this host's targets; for a private test broker only")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench_agent.jobs.worker import WorkerContext, run as serve
    from controller import backends
    from bench_agent.paths import state_dir

    check_name("host", args.host)
    config = _host_config(args)
    app_check = backends.celery_app  # fails with not_configured when there is no broker (or no keys)
    app_check(insecure=args.insecure_unsigned)
    import os

    results_url = os.environ.get("PANIO_RESULTS_URL") or None  # none: the host reports to the recorder (issue 38)
    ctx = WorkerContext(args.host, results_url, backends.redis_url(), backends.redis_prefix(),
                        state_dir() / f"worker-{args.host}", config)
    ctx.stores()  # fail now, not on the first job, if the database is unreachable (or, reporting, there is no key)
    from bench_agent.leases.guard import remember

    # This host checks this lease store for every side effect from now on, whatever a caller's environment says.
    remember(backends.redis_url(), backends.redis_prefix(), f"panio worker --host {args.host}")
    return serve(ctx, backends.broker_url(), args.concurrency, backends.visibility_timeout_s(), args.events,
          args.insecure_unsigned)


def _host_config(args: argparse.Namespace):
    """The host's own configuration: the lab file must be there and readable before the worker starts."""
    import os

    from bench_agent.errors import NotConfigured
    from bench_agent.jobs.host_config import LOCAL, HostConfig, install_hint

    if not os.path.isfile(args.lab_path):
        hint = install_hint(args.host) + ("" if args.host == LOCAL else ", or pass --lab PATH")
        raise NotConfigured(f"no host configuration at {args.lab_path} ({args.lab_source}): the worker runs only "
                            "the hooks and actions of a lab file on this host", hint=hint, file=args.lab_path)
    config = HostConfig(args.lab_path, args.host)
    config.owned()  # a file that does not parse fails now, with its reason
    return config
