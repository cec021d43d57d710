"""`panio job run|submit|status|list|artifacts|cancel` and `panio suite run` with `--controller URL`: the same
commands through the controller's HTTP API (``controller.api.client``), for CI and people who hold a token and
nothing else: no broker, results database, signing key or lab file in this process. Output and exit statuses are
the commands' own (``controller.cli.jobs.job``, ``controller.cli.jobs.suite``)."""

from __future__ import annotations

import argparse
import time

from controller.api import MAX_JOB_BYTES
from controller.cli.common import print_json, say

POLL_S = 0.5


def add_flag(c: argparse.ArgumentParser) -> None:
    c.add_argument("--controller", metavar="URL",
                   help="through the controller's HTTP API at URL (default $PANIO_CONTROLLER; token in "
                        "$PANIO_TOKEN); then this machine needs no broker, database or key (docs/ci.md)")


def controller(args: argparse.Namespace):
    """The ``Controller`` to talk to, or None when the command runs here as before."""
    from controller.api.client import Controller, url_of

    url = url_of(getattr(args, "controller", None))
    return None if url is None else Controller(url)


def submit(args: argparse.Namespace, api) -> None:
    from controller.lab import tomlfile

    if args.wait:
        from controller.jobs import report

        report.check_output(args.junit, "--junit")
        report.check_output(args.report, "--report")
    text = tomlfile.read(args.file, "job file")
    _bounded(args.file, text)
    body = {"toml": text, "file": str(args.file), "target": args.target, "deadline_s": args.deadline_s}
    queued = api.call("POST", "/jobs", body)
    if not args.wait:
        if args.json:
            print_json({"job_id": queued["job_id"], "target": queued["target"], "queue": queued["queue"]})
        else:
            say(f"queued job {queued['job_id']} ({queued['name']}) for {queued['target']} on {queued['queue']}")
        return
    if not args.json:
        say(f"queued job {queued['job_id']} for {queued['target']} on {queued['queue']}")
    job = follow(api, queued["job_id"], args.json, args.queue_timeout_s, queued.get("deadline_at"))
    finish(job, args)


def suite_run(args: argparse.Namespace, api, progress_for) -> tuple[str, list[dict]]:
    """`suite run --controller`: send the suite and the job files it names, follow every job to its verdict
    (each target's progress through ``progress_for(target)``); (the suite's name, its jobs, steps and all)."""
    from controller.jobs.remote import EXPIRE_GRACE_S

    text, texts = _suite_texts(args.file)
    queued = api.call("POST", "/suites", {"toml": text, "file": str(args.file), "jobs": texts,
                                          "deadline_s": args.deadline_s})
    for q in queued["jobs"]:
        progress_for(q["target"])("queued", q)
    waiting, done = {q["job_id"]: q["target"] for q in queued["jobs"]}, {}
    deadline_at = queued.get("deadline_at")
    while waiting:
        for job_id in list(waiting):
            job = api.call("GET", f"/jobs/{job_id}")
            if job["state"] == "done":
                progress_for(waiting.pop(job_id))("job_end", {"job_id": job_id, "health": job["health"],
                                                              "result": job["result"], "reason": job["reason"]})
                done[job_id] = job
        if waiting and deadline_at is not None and time.time() >= deadline_at + EXPIRE_GRACE_S:
            for job_id in waiting:
                api.call("POST", f"/jobs/{job_id}/cancel")
            done.update({i: api.call("GET", f"/jobs/{i}") for i in waiting})
            break
        if waiting:
            time.sleep(POLL_S)
    return queued["suite"], [done[q["job_id"]] for q in queued["jobs"]]


def _suite_texts(path) -> tuple[str, dict[str, str]]:
    """The suite file's text and its job files' by the names it gives them (a missing one left out: the controller
    says so, at the suite file's line)."""
    from bench_agent.errors import UsageError
    from controller.jobs import suite
    from controller.lab import tomlfile

    text = tomlfile.read(path, "suite file")
    texts = {}
    for rel in suite.parse(path, text)["jobs"]:
        try:
            texts[rel] = tomlfile.read(path.parent / rel, "job file")
        except UsageError:
            pass
    _bounded(path, text, *texts.values())
    return text, texts


def schedule_add(args: argparse.Namespace, api) -> dict:
    """`schedule add --controller`: the suite and its job files sent; the controller keeps and checks them."""
    text, texts = _suite_texts(args.suite)
    when = {"at": args.at} if args.at is not None else {"every": args.every}
    return api.call("POST", "/schedules", {"name": args.name, **when, "toml": text, "file": str(args.suite),
                                           "jobs": texts})


def schedule_list(api) -> list[dict]:
    return api.call("GET", "/schedules")


def schedule_rm(args: argparse.Namespace, api) -> str:
    from urllib.parse import quote

    return api.call("DELETE", f"/schedules/{quote(args.name, safe='')}")["message"]


def lease_list(args: argparse.Namespace, api) -> list[dict]:
    return api.call("GET", "/leases" + ("?breaks=1" if args.breaks else ""))


def lease_break(args: argparse.Namespace, api) -> dict:
    from urllib.parse import quote

    return api.call("POST", f"/targets/{quote(args.target, safe='')}/break-lease")


def _bounded(path, *texts: str) -> None:
    """Refuse here what the controller would refuse (413) before reading it."""
    if sum(len(t.encode()) for t in texts) > MAX_JOB_BYTES:
        from bench_agent.errors import UsageError

        raise UsageError(f"{path} is over {MAX_JOB_BYTES} bytes (with its job files), more than the controller "
                         "takes", file=str(path))


def follow(api, job_id: int, quiet: bool, queue_timeout_s: float | None, deadline_at: float | None) -> dict:
    """Poll the job until it is done, showing each step as `job submit --wait` does; a job no worker took
    within ``queue_timeout_s`` is canceled and ``Unreachable``; past the deadline (and a grace) it is canceled."""
    from bench_agent.errors import Unreachable
    from controller.jobs import progress
    from controller.jobs.remote import EXPIRE_GRACE_S, _Shown

    shown = _Shown((lambda e, d: None) if quiet else progress.PlainProgress())
    since = time.monotonic()
    while True:
        job = api.call("GET", f"/jobs/{job_id}")
        waited_s = time.monotonic() - since
        shown.update(job, waited_s)
        if job["state"] == "done":
            return job
        if job["state"] == "queued" and queue_timeout_s is not None and waited_s >= queue_timeout_s:
            api.call("POST", f"/jobs/{job_id}/cancel")
            raise Unreachable(f"no worker started job {job_id} within {queue_timeout_s:g} s; it was canceled",
                              hint="is the target's host's worker running? ask the lab's operator", job=job_id)
        if deadline_at is not None and time.time() >= deadline_at + EXPIRE_GRACE_S:
            api.call("POST", f"/jobs/{job_id}/cancel")
            return api.call("GET", f"/jobs/{job_id}")
        time.sleep(POLL_S)


def finish(job: dict, args: argparse.Namespace, triage: dict | None = None) -> None:
    """What `job run` prints and writes for a finished job, here or through the controller; ``triage``: the notes
    of `--report` (the local road reads them from the database, the controller's road has none)."""
    from controller.jobs import report

    if getattr(args, "junit", None):
        report.write_junit(job, args.junit)
    if getattr(args, "report", None):
        report.write_text(args.report, report.markdown(job, title=f"job {job['id']} {job['name']}",
                                                       triage=triage))
    if args.json:
        print_json(report.brief(job))
    else:
        say("\n".join(report.summary_lines(job)))
        if getattr(args, "junit", None):
            say(f"JUnit XML written to {args.junit}")
    err = report.ci_error(job)
    if err is not None:
        raise err


def status(args: argparse.Namespace, api) -> None:
    from controller.jobs import overrides, report

    job = api.call("GET", f"/jobs/{args.id}")
    if args.json:
        print_json(report.brief(job))
    else:
        say("\n".join(report.summary_lines(job) + [overrides.line(o) for o in job.get("overrides", [])]))


def list_(args: argparse.Namespace, api) -> list[dict]:
    from urllib.parse import urlencode

    query = {"limit": args.limit, **{k: v for k, v in (("target", args.target), ("state", args.state)) if v}}
    return api.call("GET", f"/jobs?{urlencode(query)}")


def artifacts(args: argparse.Namespace, api) -> dict[str, bytes]:
    """Name -> size, and with ``--out`` each artifact written there."""
    from urllib.parse import quote

    items = api.call("GET", f"/jobs/{args.id}/artifacts")
    if args.out:
        from controller.jobs import report

        report.check_output(args.out, "--out", folder=True)
        for item in items:
            if "/" in item["name"] or item["name"].startswith("."):  # a name, never a path out of --out
                continue
            data = api.call("GET", f"/jobs/{args.id}/artifacts/{quote(item['name'])}", raw=True)
            (args.out / item["name"]).write_bytes(data)
    return {item["name"]: item["bytes"] for item in items}


def cancel(args: argparse.Namespace, api) -> None:
    say(api.call("POST", f"/jobs/{args.id}/cancel")["message"])
