"""panio recorder: record the control hosts' signed reports in the results database (issue 38)."""

from __future__ import annotations

import argparse

DETAILS = """\
Run this once per lab, on the controller (beside `panio schedule serve` and
the dashboard). A worker started without PANIO_RESULTS_URL holds no results
database: it reports the job it started, each step, its artifacts, its
verdict, heartbeats and the target's health on a Redis Stream of its own
(PREFIXreports:HOST), each report signed with the host's key. The recorder
reads every host's stream and records a report only if its signature is
the host's (a certificate named HOST in this machine's store, as `panio
setup` trusts it), the job was queued for that host, the job's target is
that host's in this lab file, its fencing token is the job's current one
and it was not recorded before. Anything else is refused, logged with the
host's name, and changes nothing. A report is acknowledged only once it is
committed: stop or kill the recorder at any time, the reports wait in Redis.

It also publishes what those hosts read instead of the database: each
target's health, the cancel of every job someone asked to cancel, and the
job id of a health check a host runs under a job's lease (made here from
the check the controller compiled into that job). And it reconciles every
half second, as a worker with the results database does for its host: a
job whose runner is proven dead is settled (or sent again if it had not
started), a job whose broker message vanished is sent again (the message
the controller sealed, never one the recorder signs), with this machine's
signing keys; without them it records and does not reconcile (said once).

Needs PANIO_BROKER (or PANIO_REDIS_URL), PANIO_REDIS_PREFIX as the workers',
PANIO_RESULTS_URL (default: SQLite in the state directory) and the trusted
certificates (PANIO_CERT_STORE, default STATE_DIR/keys/trusted). SIGTERM or
Ctrl-C stops it."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "Record the control hosts' signed reports in the results database.\n\n" + DETAILS
    p.epilog = ("example:\n  panio recorder --lab ~/.config/panio/lab.toml\n\n"
                "see also: panio worker, panio keys, docs/security.md (Hosts report, the controller records)")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--lab", metavar="PATH", default=argparse.SUPPRESS,
                   help="the lab file that says which host owns each target (default: $PANIO_LAB, else "
                        "~/.config/panio/lab.toml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    import signal
    import sys

    from bench_agent.errors import NotConfigured
    from bench_agent.jobs.signing import default_keys
    from controller import backends
    from controller.cli.common import load_lab
    from controller.jobs.recorder import Certificates, Recorder

    redis_url = backends.redis_url()
    if not redis_url:
        raise NotConfigured("the recorder reads the hosts' reports from the broker, and PANIO_BROKER is not set",
                            hint="set PANIO_BROKER=redis://HOST:6379/N (the workers' broker)")
    trusted = default_keys().store
    if not trusted.is_dir():
        raise NotConfigured(f"no trusted certificates at {trusted}: no host's report could be verified",
                            hint="`panio setup --host H` trusts each host's certificate; see `panio keys list`")
    import logging

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    lab = _LabHosts(args, load_lab(args))
    from bench_agent import outage

    # started while the results database is away: wait for it (said once), as the running recorder does
    store = outage.patiently(backends.results_store, outage.Outages(logging.getLogger("panio.recorder").warning,
                                                                    "recorder"))
    rec = Recorder(store, redis_url, backends.redis_prefix(), Certificates(trusted), lab.host_of)
    stop: list[bool] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))
    print(f"recorder: recording the reports of {backends.redis_prefix()}reports:* (lab {args.lab_path})",
          flush=True)
    _reconciling(lambda: bool(stop))
    rec.run(lambda: bool(stop))
    sys.stdout.write("recorder: stopped\n")


PACE = 4.0  # the controller's reconciler waits this many times its last pass before the next one


def _reconciling(stopped) -> None:
    """The controller's reconciler in a thread of its own, a pass every ``RECONCILE_S``: the reporting hosts'
    workers run none (they read no job rows)."""
    import logging
    import threading
    import time

    from bench_agent.errors import PanioError
    from bench_agent.jobs import signing
    from bench_agent.jobs.reconcile import RECONCILE_S
    from controller.jobs import remote

    log = logging.getLogger("panio.recorder")
    if signing.configured() is None:  # it could send no kept message again (it checks them against these)
        log.warning("recorder: not reconciling: no signing keys here (%s)", signing.HINT)
        return
    try:
        rec = remote.reconciler()
    except PanioError as err:
        log.warning("recorder: not reconciling: %s", err.message)
        return
    rec.log = lambda line: log.warning("reconcile: %s", line)

    from bench_agent import outage

    outages = outage.Outages(log.warning, "recorder: reconciler")  # one line when a service goes, one when back

    def loop() -> None:
        took = 0.0
        while not stopped():
            # a pass reads every job not done: with thousands waiting for the recorder (10,000 boards) it took a
            # quarter of the process's CPU at one pass every RECONCILE_S; paced, it takes at most a fifth
            time.sleep(outages.delay_s() if outages.down else max(RECONCILE_S, PACE * took))
            started = time.monotonic()
            try:
                rec.pass_()
            except Exception as exc:  # noqa: BLE001 - the database or the broker away: said once, tried again
                if not outages.failed(exc):
                    log.info("reconcile pass failed: %s: %s", type(exc).__name__, exc)
                continue
            finally:
                took = time.monotonic() - started
            if outages.down:
                outages.ok()

    threading.Thread(target=loop, name="panio-reconcile", daemon=True).start()


class _LabHosts:
    """Which host owns a target, from the lab file as it is now (re-read when it changes)."""

    def __init__(self, args: argparse.Namespace, lab) -> None:
        self.args, self.lab = args, lab
        self.stamp = self._stamp()

    def _stamp(self):
        import os

        try:
            st = os.stat(self.args.lab_path)
            return st.st_mtime_ns, st.st_size
        except OSError:
            return None

    def host_of(self, target: str) -> str | None:
        from bench_agent.jobs.host_config import LOCAL
        from controller.cli.common import load_lab

        stamp = self._stamp()
        if stamp != self.stamp:
            try:
                self.lab, self.stamp = load_lab(self.args), stamp
            except Exception:  # noqa: BLE001 - a lab file being edited: keep the last good one, say so
                import logging

                logging.getLogger("panio.recorder").warning("recorder: the lab file %s does not load; kept the "
                                                            "last good one", self.args.lab_path)
        table = self.lab.targets.get(target)
        return None if table is None else (table.get("host") or LOCAL)
