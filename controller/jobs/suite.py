"""Suites: run job files over a matrix of targets, parallel across targets, one job at a time per target.

A suite file is TOML::

    name = "nightly"                      # default: the file's stem
    jobs = ["smoke.toml", "boot.toml"]    # job files, relative to the suite file
    targets = ["pico", "qemu"]            # or tags = ["pi5"] (every target carrying them);
                                          # neither: each job's own target / every target its tags match

Every job file and target is checked before anything runs. Without a broker
each target gets a thread that runs its jobs in order in this process; with
``PANIO_BROKER`` every job is queued to its host's worker and the target's
lease keeps them one at a time.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_agent.errors import ConfigInvalid, NotConfigured, PanioError, TestFailed
from controller import backends
from controller.jobs import local, report, spec
from controller.lab.model import Lab
from controller.lab.schema import (Field, Problem, TableSpec, _dotted, _nonempty_string, _one_of, _string, _string_list,
                                   check_table)


def _job_paths(path, value: Any) -> None:
    if not isinstance(value, list) or not value:
        raise Problem(path, f"{_dotted(path)} must be a non-empty list of job files")
    for i, item in enumerate(value):
        _nonempty_string(path + (i,), item)


SUITE = TableSpec({
    "name": Field(_nonempty_string), "description": Field(_string), "jobs": Field(_job_paths, required=True),
    "targets": Field(_string_list), "tags": Field(_string_list),
    "on_unhealthy": Field(_one_of(("wait", "skip"))),  # a job on a bad/maintenance target: wait for it, or skip it
}, "suite file")
# A suite (and so a schedule) skips the jobs of a bad or maintenance target unless its file says "wait": one bad
# board must never hold the others' night back (issue 27). The suite's choice applies to all of its jobs.
ON_UNHEALTHY = "skip"
_log = logging.getLogger("panio.jobs")


def load(path: Path) -> dict:
    from controller.lab import tomlfile

    return parse(path, tomlfile.read(path, "suite file"))


def parse(path: Path, text: str) -> dict:
    """A suite from its text (the controller API gets it with its file's name, ``path``, which errors name)."""
    from controller.lab import tomlfile

    data = tomlfile.parse(path, text, lambda d: check_table((), d, SUITE), "fix the suite file; nothing ran")
    data.setdefault("name", path.stem)
    return data


def _suite_targets(data: dict, lab: Lab) -> list[str] | None:
    if data.get("targets"):
        for t in data["targets"]:
            lab.target(t)
        return data["targets"]
    if data.get("tags"):
        tags = set(data["tags"])
        hits = [n for n, t in lab.targets.items() if tags <= set(t.get("tags", []))]
        if not hits:
            raise NotConfigured(f"no target carries tags {', '.join(sorted(tags))}", tags=sorted(tags))
        return hits
    return None


def matrix(path: Path, lab: Lab, texts: tuple[str, dict[str, str]] | None = None
           ) -> tuple[dict, list[tuple[dict, list[dict], str]]]:
    """(suite, [(job, steps, target)]): everything checked, nothing run. ``texts``: the suite's text and its job
    files' by the names its ``jobs`` gives them (the controller API's), instead of reading the files."""
    data = load(path) if texts is None else parse(path, texts[0])
    targets = _suite_targets(data, lab)
    entries = []
    for i, rel in enumerate(data["jobs"]):
        if texts is None:
            job = _load_job(path, i, (path.parent / rel).resolve())
        elif rel in texts[1]:
            job = spec.parse(path.parent / rel, texts[1][rel])
        else:
            raise _no_job_file(path, texts[0], i, path.parent / rel)
        steps = spec.compile_steps(job)
        for target in targets or spec.select_targets(job, lab, None):
            entries.append((job, steps, target))
    return data, entries


def _load_job(suite_path: Path, idx: int, job_path: Path) -> dict:
    """A job file the suite names; a missing one is the suite file's error (5, at its line), not the command line's."""
    from bench_agent.errors import UsageError

    try:
        return spec.load(job_path)
    except UsageError as err:
        if err.details.get("file") != str(job_path):
            raise
        raise _no_job_file(suite_path, suite_path.read_text(errors="replace"), idx, job_path) from None


def _no_job_file(suite_path: Path, text: str, idx: int, job_path) -> ConfigInvalid:
    """A job file the suite names is missing: the suite file's error (5, at its line)."""
    from controller.lab.locate import locate

    line, col = locate(text, ("jobs", idx))
    return ConfigInvalid(f"{suite_path}:{line}:{col}: jobs[{idx}]: no job file at {job_path}",
                         hint="job files are relative to the suite file; fix the suite file; nothing ran",
                         file=str(suite_path), line=line, column=col)


def run(path: Path, lab: Lab, progress_for, deadline_s: float | None = None, busy: dict[str, int] | None = None,
        created=None) -> tuple[dict, list[dict]]:
    """Run the suite; ``progress_for(target)`` gives the progress callback of one target's jobs.
    With ``deadline_s`` every job still queued then is withdrawn and a running one stopped (timed out).
    ``busy``: {target: job id} of a previous run still going (a schedule's, ``schedules.Scheduler``): those
    targets' parts end skipped at once, never a second job on a board. ``created(payloads)``: told the jobs as
    soon as they are recorded, before any runs."""
    data, entries = matrix(path, lab)
    at = local.deadline_at(deadline_s)
    run_ = _run_queued if backends.broker_url() else _run_here
    jobs = run_(lab, entries, progress_for, at, data.get("on_unhealthy") or ON_UNHEALTHY, data["name"],
                busy or {}, created)
    from bench_agent import outage

    # the database away as the suite ends (its triage notes read it): its verdict waits for it, it is not lost
    outages = outage.Outages(_log.warning, f"suite {data['name']}")
    outage.patiently(lambda: _tell(lab, data["name"], jobs, outages), outages, give_up_s=outage.PATIENCE_S)
    return data, jobs


def _tell(lab: Lab, name: str, jobs: list[dict], outages=None) -> None:
    """suite_finished, to the lab's [[notify]] channels (queued; never holds up the suite's verdict). A failed
    job's triage is read through ``outages`` (waited for while the database is away, said once): triage makes
    do with what it cannot read, so without the wait a verdict sent as the database went said "no triage"."""
    from bench_agent import outage
    from bench_agent.jobs import notify

    passed = [j for j in jobs if (j["health"], j["result"]) == ("complete", "passed")]
    # The verdict is the jobs that ran: a bad board's skipped jobs are its part, reported as skipped (issue 43),
    # not "the lab failed" for the whole suite.
    skipped = [j for j in jobs if (j["health"], j["result"]) == ("incomplete", "skipped")]
    ran = [j for j in jobs if j not in skipped]
    err = ci_error(name, ran)
    verdict = ("nothing ran" if not ran else "passed" if err is None
               else "the board failed" if isinstance(err, TestFailed) else "the lab failed")
    if err is not None:  # which boards: a night's operator reads the verdict line first (issue 43)
        fault = "board" if isinstance(err, TestFailed) else "lab"
        verdict += f" on {', '.join(sorted({j['target'] for j in ran if _fault(j) == fault}))}"
    if skipped:
        verdict += f"; {len(skipped)} skipped on {', '.join(sorted({j['target'] for j in skipped}))}"
    store = backends.results_store()
    if outages is not None:
        store = outage.Patient(store, outages)
    notes = report.triage_notes(store, jobs) if notify.wanted(lab.data.get("notify"), "suite_finished") else {}
    notify.send(lab.data.get("notify"), "suite_finished", {
        "suite": name, "verdict": verdict, "passed": len(passed), "total": len(jobs), "skipped": len(skipped),
        "jobs": [{"id": j["id"], "name": j["name"], "target": j["target"], "health": j["health"],
                  "result": j["result"], "fault": _fault(j), "reason": j.get("reason"), **notes.get(j["id"], {})}
                 for j in jobs]})


def _fault(job: dict) -> str | None:
    """Whose a job's failure is: "board" (complete, failed), "lab" (incomplete), "skipped" (its board was held:
    bad or in maintenance), None (passed)."""
    if (job["health"], job["result"]) == ("complete", "passed"):
        return None
    if job["result"] == "skipped":
        return "skipped"
    return "board" if (job["health"], job["result"]) == ("complete", "failed") else "lab"


def _run_here(lab: Lab, entries: list, progress_for, deadline_at: float | None,
              on_unhealthy: str | None = None, suite: str | None = None, busy: dict[str, int] | None = None,
              created=None) -> list[dict]:
    from bench_agent.leases.base import holder_name
    from bench_agent.jobs.reconcile import Heartbeat
    from bench_agent.jobs.runner import JobRunner

    store, me = backends.results_store(), holder_name("panio suite run")
    heartbeat = Heartbeat(store)
    by_target: dict[str, list[dict]] = {}
    # record every job as queued first (one commit): all of the suite is visible at once
    payloads = local.create_many(store, lab, entries, deadline_at, on_unhealthy=on_unhealthy, suite=suite)
    for payload in _skip_held(store, payloads, progress_for, busy, created):
        target = payload["target"]
        store.take(payload["job_id"], me, 0.0)  # held by this process: if it dies, a reader can tell
        heartbeat.add(payload["job_id"])
        by_target.setdefault(target, []).append(payload)
    lock = threading.Lock()

    def one_target(payloads: list[dict]) -> None:
        progress = _locked(progress_for(payloads[0]["target"]), lock)
        runner = JobRunner(store, backends.lease_store(lab.key), me, progress, heartbeat, local.dispatch_caller(lab),
                           spec.planner(lab))
        for payload in payloads:
            runner.run(payload)

    with ThreadPoolExecutor(max_workers=max(1, len(by_target))) as pool:
        for fut in [pool.submit(one_target, p) for p in by_target.values()]:
            fut.result()
    return _read_back(store, payloads, {}, suite)


def _read_back(store, payloads: list[dict], have: dict[int, dict], suite: str | None) -> list[dict]:
    """The suite's jobs as recorded (``have``: those read already), in its order. The results database away as
    the suite ends is waited for, said once (``bench_agent.outage``): the verdict comes after, nothing is lost."""
    from bench_agent import outage

    return outage.patiently(lambda: [have.get(p["job_id"]) or store.job(p["job_id"]) for p in payloads],
                            outage.Outages(_log.warning, f"suite {suite}"), give_up_s=outage.PATIENCE_S)


def _run_queued(lab: Lab, entries: list, progress_for, deadline_at: float | None,
                on_unhealthy: str | None = None, suite: str | None = None, busy: dict[str, int] | None = None,
                created=None) -> list[dict]:
    from controller.jobs import remote

    app, store = backends.celery_app(), backends.results_store()
    # every job recorded at once (one commit), then sent
    payloads = local.create_many(store, lab, entries, deadline_at, for_worker=True, on_unhealthy=on_unhealthy,
                                suite=suite)
    ids, sent = [], _skip_held(store, payloads, progress_for, busy, created)
    for payload, queue in zip(sent, remote.publish_all(app, store, sent) if sent else []):
        progress_for(payload["target"])("queued", {"job_id": payload["job_id"], "target": payload["target"],
                                                   "queue": queue})
        ids.append((payload["job_id"], payload["target"]))
    rec, watch = remote.reconciler(app), [i for i, _ in ids]
    ended = {i: remote.follow(i, lambda e, d, t=t: progress_for(t)(e, d) if e == "job_end" else None,
                              deadline_at=deadline_at, watch=watch, rec=rec) for i, t in ids}
    return _read_back(store, payloads, ended, suite)


def still(target: str, job_id: int, state: str | None) -> str:
    """How a board's unfinished job of a schedule's previous run is said: "board1 is still running job 12 of the
    previous run", or "board1 has job 12 of the previous run still queued" (waiting for its worker or lease)."""
    if state == "running":
        return f"{target} is still running job {job_id} of the previous run"
    if state == "queued":
        return f"{target} has job {job_id} of the previous run still queued"
    return f"{target} was busy with job {job_id} of the previous run"  # it ended since the board was found busy


def _skip_held(store, payloads: list[dict], progress_for, previous: dict[str, int] | None = None,
               created=None) -> list[dict]:
    """The suite's jobs to run or queue. One whose board is held (bad or in maintenance, its automatic re-check
    due or not: that is the scheduler's) in a suite that skips such boards ends skipped here, at once, as its
    runner would have ended it, and is never queued: the suite's verdict never waits for a worker slot or a lease
    that the bad board's re-check holds (issue 43; a night's healthy boards idled 13-26 s for it). So does one
    whose board still runs a job of its schedule's previous run (``previous``, {target: job id}), whatever the suite's
    ``on_unhealthy``: a slow board is never given a second job, and the others' slot is not skipped (issue 43)."""
    from bench_agent.errors import Busy
    from bench_agent.health.gate import HealthGate
    from bench_agent.jobs import notify
    from bench_agent.jobs.steps import command_line, known_variables
    from bench_agent.leases.base import holder_name

    previous = previous or {}
    if created is not None:  # told before any job is queued (the scheduler's next slot reads them)
        created(payloads)
    gate, held = HealthGate(backends.results_url(), holder_name("panio suite run"), lambda e, d: None), {}
    run = []
    for p in payloads:
        target = p["target"]
        if target not in held and target in previous:
            state = next((j["state"] for j in store.active_jobs([previous[target]])), None)  # its row, no steps
            held[target] = Busy(f"target {still(target, previous[target], state)}",
                                hint="the schedule fires faster than the board ends its jobs; its part of this "
                                     "run is skipped", target=target, job=previous[target])
        if p.get("on_unhealthy") != "skip" and target not in held:
            run.append(p)
            continue
        if target not in held:  # read once a target: the suite's jobs on it are judged alike
            held[target] = gate.blocked(p, 0.0, lambda: True)
        busy = held[target]
        if busy is None:
            run.append(p)
            continue
        variables = known_variables(p["job_id"], target)
        steps = [(i, {"name": s["name"], "command": command_line(s, variables), "status": "skipped"})
                 for i, s in enumerate(p["steps"])]
        summary = {"job_id": p["job_id"], "health": "incomplete", "result": "skipped", "reason": busy.message,
                   "error": busy.to_json()}
        if store.finish(p["job_id"], "incomplete", "skipped", busy.message, busy.to_json(), only_if_queued=True,
                        steps=steps):
            progress_for(target)("job_end", summary)
            notify.job_ended(p, {**summary, "gated": True})
    return run


def _locked(progress, lock: threading.Lock):
    def call(event: str, data: dict) -> None:
        with lock:
            progress(event, data)
    return call


def ci_error(name: str, jobs: list[dict]) -> PanioError | None:
    """Lab failures win over board failures: a CI gate must not call a broken lab a broken board."""
    errors = [(j, report.ci_error(j)) for j in jobs]
    lab = [(j, e) for j, e in errors if e is not None and not isinstance(e, TestFailed)]
    if lab:
        job, err = lab[0]
        err.message = f"suite {name}: {len(lab)} of {len(jobs)} jobs could not finish (the lab failed); " \
                      f"first: {err.message}"
        return err
    failed = [j for j, e in errors if e is not None]
    if failed:
        names = ", ".join(f"{j['name']}@{j['target']}" for j in failed)
        return TestFailed(f"suite {name}: the board failed {len(failed)} of {len(jobs)} jobs: {names}",
                          jobs=[j["id"] for j in failed])
    return None
