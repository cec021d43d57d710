"""panio token add|list|rm: the controller API's tokens for people and CI (``controller.api.tokens``)."""

from __future__ import annotations

import argparse

from controller.cli.common import add_json, check_name, command, print_json, say, subcommands

ABOUT = """\
The controller's HTTP API (served by `panio dashboard`, under /api/v1/) takes
`Authorization: Bearer TOKEN`. Each person or CI project gets a token of its own:

  reader     reads jobs, their steps and artifacts (with --target/--tag: only
             the jobs on those targets)
  submitter  also submits and cancels jobs, only on its allow list: the targets
             named with --target, or carrying a tag named with --tag; it reads
             only their jobs
  operator   everything, on every target, leases and schedules too

The results database keeps only a SHA-256 of each token: the secret is printed
once, by `token add`, and never again. Run these commands on the controller (they
use its PANIO_RESULTS_URL). CI then needs only PANIO_CONTROLLER and PANIO_TOKEN:
see docs/ci.md."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "Tokens for the controller's HTTP API, per person or CI project.\n\n" + ABOUT
    sub = subcommands(p)
    c = command(sub, "add", "make a token and print its secret, once", func=add,
                example=["panio token add ci-firmware --scope submitter --tag pi5 --expires 90d",
                         "panio token add alice --scope operator",
                         "panio token add grafana --scope reader --json"],
                see_also="panio token list, panio token rm, docs/ci.md, docs/security.md",
                details="The secret (panio_...) is shown once: store it in your CI's secret variables\n"
                        "(PANIO_TOKEN). Lost it? `panio token rm NAME`, then add a new one.\n"
                        "A submitter needs an allow list (--target and/or --tag); a job for a target\n"
                        "outside it is refused with 403, and so is reading one. A reader may have one.")
    c.add_argument("name", metavar="NAME", help="who holds it: a person or a CI project (a-z, 0-9, - and _)")
    c.add_argument("--scope", required=True, choices=("reader", "submitter", "operator"), help="what it may do")
    c.add_argument("--target", action="append", default=[], metavar="T",
                   help="allow list: target T (a submitter submits to it and reads its jobs, a reader reads its "
                        "jobs); repeat for more")
    c.add_argument("--tag", action="append", default=[], metavar="T",
                   help="allow list: the targets tagged T (as --target); repeat for more")
    c.add_argument("--expires", metavar="DURATION", help="refused after this long: 90d, 12h, 30m (default: never)")
    add_json(c)
    c = command(sub, "list", "list the tokens: name, scope, allow list, expiry, last use (never a secret)",
                func=list_, example=["panio token list", "panio token list --all --json"],
                see_also="panio token add, panio token rm")
    c.add_argument("--all", action="store_true", help="revoked tokens too")
    add_json(c)
    c = command(sub, "rm", "revoke a token: the API refuses it from now on (403, saying so)", func=rm,
                example="panio token rm ci-firmware", see_also="panio token list, panio token add")
    c.add_argument("name", metavar="NAME")
    add_json(c)


def _store():
    from controller.api.tokens import TokenStore

    return TokenStore()


def add(args: argparse.Namespace) -> None:
    from controller.jobs.overrides import operator

    check_name("token", args.name)
    for t in args.target + args.tag:
        check_name("target" if t in args.target else "tag", t)
    expires_s = None
    if args.expires is not None:
        from controller.jobs.retention import parse_duration

        expires_s = parse_duration(args.expires, "--expires")
    secret, token = _store().add(args.name, args.scope, args.target, args.tag, expires_s, by=operator())
    if args.json:
        print_json({**token, "token": secret})
        return
    say(f"token {token['name']} ({_scope(token)}){_expiry(token)}:")
    say(secret)
    say("shown once: keep it in your CI's secret variables as PANIO_TOKEN (see docs/ci.md)")


def list_(args: argparse.Namespace) -> None:
    tokens = _store().list(revoked=args.all)
    if args.json:
        print_json(tokens)
        return
    if not tokens:
        say("no tokens yet (make one with `panio token add NAME --scope reader|submitter|operator`)")
    for t in tokens:
        used = f"last used {_when(t['last_used_at'])}" if t["last_used_at"] else "never used"
        revoked = f", revoked {_when(t['revoked_at'])}" if t["revoked_at"] else ""
        say(f"{t['name']:<20} {_scope(t)}{_expiry(t)}, {used}{revoked}")


def rm(args: argparse.Namespace) -> None:
    token = _store().revoke(args.name)
    if args.json:
        print_json(token)
    else:
        say(f"token {token['name']} revoked: the API refuses it from now on")


def _scope(token: dict) -> str:
    if not (token["targets"] or token["tags"]):
        return token["scope"]
    from controller.api.tokens import allow_list

    return f"{token['scope']} {'to' if token['scope'] == 'submitter' else 'of'} {allow_list(token)}"


def _expiry(token: dict) -> str:
    return f", expires {_when(token['expires_at'])}" if token["expires_at"] else ""


def _when(ts: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
