"""panio dashboard: serve the operator's web view (hosts, targets, jobs, schedules) on loopback."""

from __future__ import annotations

import argparse

from controller.cli.common import number, say
from controller.dashboard.auth import MAKE_ONE, MIN_TOKEN_CHARS

DETAILS = f"""\
Serves a small web app: control hosts and whether their workers answer,
targets with their lease holder, health and last job, the job queue and
history with filters, each job's steps, output, serial log, screenshots and
JUnit (live while it runs), schedules; operators can cancel jobs, break leases
and put targets in maintenance or lift it.

It reads the same results database and lease store as `panio job` (set
PANIO_RESULTS_URL / PANIO_BROKER as for the workers). Access tokens come from
the environment: PANIO_DASHBOARD_TOKEN (operator: may also act) and
PANIO_DASHBOARD_READ_TOKEN (read-only). Without a token it serves loopback only;
--bind beyond loopback without PANIO_DASHBOARD_TOKEN is refused (exit 3). A
token is at least {MIN_TOKEN_CHARS} printable ASCII characters, no whitespace: a variable set
to anything else (empty, blank, short) is refused at start (exit 3).
The same server answers the controller's HTTP API under /api/v1/ (jobs: submit,
status, list, cancel, artifacts) for tokens made with `panio token add`: CI then
runs `panio job run FILE --controller URL` with PANIO_TOKEN and nothing else
(docs/ci.md).
{MAKE_ONE[0].upper() + MAKE_ONE[1:]}"""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "Serve the operator's web dashboard (loopback by default).\n\n" + DETAILS
    p.epilog = ("example:\n  panio dashboard                      # http://127.0.0.1:8765/\n"
                "  PANIO_DASHBOARD_TOKEN=$(cat ~/.config/panio/dashboard-token) panio dashboard --bind 0.0.0.0 --port 8080\n\n"
                "see also: panio job list, panio lease list, panio schedule list, panio token, docs/dashboard.md, docs/ci.md")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                   help="address to listen on (default 127.0.0.1; anything else needs PANIO_DASHBOARD_TOKEN)")
    p.add_argument("--port", type=number(int, 0, 65535), default=8765, metavar="PORT",
                   help="TCP port; 0 = any free")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    import socket

    from bench_agent.errors import NotConfigured, Unreachable
    from controller.dashboard.auth import Auth, is_loopback

    auth = Auth.from_env()
    if not is_loopback(args.bind) and "operator" not in auth.tokens:
        raise NotConfigured(f"refusing to serve {args.bind} without a token: anyone who reaches it could "
                            "cancel jobs", hint="set PANIO_DASHBOARD_TOKEN, or keep the default --bind 127.0.0.1")
    try:  # bind here, so a taken port fails with panio's error, not a server traceback
        sock = socket.socket(socket.AF_INET6 if ":" in args.bind else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((args.bind, args.port))
        sock.listen(128)  # connections wait in the backlog from now on, before the URL is printed
    except OSError as exc:
        raise Unreachable(f"cannot listen on {args.bind}:{args.port}: {exc.strerror}",
                          hint="pick another --port") from None
    _serve(args, auth, sock)


def _serve(args: argparse.Namespace, auth, sock) -> None:
    import uvicorn

    from controller.cli.common import load_lab
    from controller.dashboard.app import build

    load_lab(args)  # a broken lab file fails now, not on the first page
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    say(f"panio dashboard on http://{shown}:{port}/ ({'no token: loopback only' if auth.open else 'token required'})")
    import sys

    sys.stdout.flush()
    config = uvicorn.Config(build(_LabWhileUnchanged(args, load_lab), auth), log_level="warning",
                            access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


class _LabWhileUnchanged:
    """The lab, loaded again only when its file changed (its inode, size or time of change): every API call and
    page asks for it, and a 10,000-board lab costs 30 ms of CPU to load even from its kept parse, more than the
    rest of a job's submission (docs/scale.md, "The controller under load")."""

    def __init__(self, args: argparse.Namespace, load) -> None:
        import threading

        self.args, self.load, self.lock, self.last = args, load, threading.Lock(), (None, None)

    def __call__(self):
        import os

        try:
            st = os.stat(self.args.lab_path)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = None  # gone: ``load`` says so
        with self.lock:
            if stamp is None or self.last[0] != stamp:
                self.last = (stamp, self.load(self.args))
            return self.last[1]
