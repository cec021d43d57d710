"""panio worker --host NAME: the bench worker of one control host (Celery, queue host.NAME)."""

from __future__ import annotations

import argparse

from controller.cli.common import check_name, positive_int

DETAILS = """\
Run this on each control host, as a service. It serves the Celery queue
host.NAME: jobs for targets whose host is NAME (`panio target add --host NAME`;
targets without a host go to `--host local`). Each job takes the target's lease
in Redis, runs its steps as local panio commands and records results in the
shared results database.

Needs PANIO_BROKER (redis://HOST:6379/N) and, so the controller sees the
results, the same PANIO_RESULTS_URL as the controller (PostgreSQL across
machines). PANIO_REDIS_PREFIX must match the controller's. Stop it with
SIGTERM (waits for running jobs) or Ctrl-C.

Every worker also reconciles: a job whose worker died while it waited for its
lease is sent again (it starts once the target is free), a job whose broker
message vanished with a Redis that lost its data is sent again, and a job whose
runner is proven dead ends incomplete. --events lets Flower see the workers."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "Run the bench worker of one control host.\n\n" + DETAILS
    p.epilog = ("example:\n  panio worker --host bench1\n  panio worker --host bench1 --events   # for Flower\n"
                "  # with PANIO_BROKER=redis://ctl:6379/0 and PANIO_RESULTS_URL=postgresql://panio@ctl/panio set\n\n"
                "see also: panio job submit, panio lease list, docs/jobs.md")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--host", required=True, metavar="NAME", help="the control host this worker serves")
    p.add_argument("--concurrency", type=positive_int, default=4, metavar="N",
                   help="jobs at once on this host, one per target (default 4)")
    p.add_argument("--events", action="store_true",
                   help="send Celery task events and worker heartbeats, for Flower (see docs/monitoring.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from bench_agent.jobs.worker import WorkerContext, run as serve
    from controller import backends
    from bench_agent.paths import state_dir

    check_name("host", args.host)
    app_check = backends.celery_app  # fails with not_configured when there is no broker
    app_check()
    ctx = WorkerContext(args.host, backends.results_url(), backends.redis_url(), backends.redis_prefix(),
                        state_dir() / f"worker-{args.host}")
    backends.results_store()  # fail now, not on the first job, if the database is unreachable
    from bench_agent.jobs.lease_guard import remember

    # This host checks this lease store for every side effect from now on, whatever a caller's environment says.
    remember(backends.redis_url(), backends.redis_prefix(), f"panio worker --host {args.host}")
    serve(ctx, backends.broker_url(), args.concurrency, backends.visibility_timeout_s(), args.events)
