"""What the controller API does with jobs, below HTTP: submit (checked by ``controller.jobs.spec`` as `panio job
check` checks a file), read, cancel and list artifacts, each under a token's scope (``controller.api.tokens``).

A submitted job goes where `panio job submit` sends it: with ``PANIO_BROKER``, to the queue of the host that
owns its target; without one (the embedded default), it runs in the controller's own process, as `panio job
run` would run it (the same ``JobRunner``, leases and results database), on its target's thread
(``controller.api.embedded``).
"""

from __future__ import annotations

import contextlib

from bench_agent.errors import Refused, UsageError
from controller import backends
from controller.api import tokens as tk

EMBEDDED = "embedded"  # the queue of a job the controller runs itself (no broker)
HIDDEN_SPEC = ("target_config", "inputs")  # a target's hooks and table: the lab's, not a reader's


def may_submit(token: dict) -> None:
    if token["scope"] == "reader":
        raise Refused(f"token {token['name']!r} is a reader: it may read jobs, not submit or cancel them",
                      hint="ask an operator for a submitter token (`panio token add NAME --scope submitter ...`)",
                      token=token["name"])


def submit(lab, token: dict, body: dict) -> dict:
    """Check the job in ``body`` (``toml``: the job file's text, ``file``: its name, ``target``, ``deadline_s``)
    against ``lab``, refuse it outside the token's allow list, record and queue (or start) it."""
    from controller.jobs import local, spec

    may_submit(token)
    text, name, target, deadline_s = _fields(body)
    job = spec.parse(name, text)
    steps = spec.compile_steps(job)
    with _as_controllers(lab, token):
        targets = spec.select_targets(job, lab, target)
    allowed = [t for t in targets if tk.allows(token, t, lab.target(t).get("tags", []))]
    if not allowed:
        raise Refused(f"token {token['name']!r} may submit only to {tk.allow_list(token)}; "
                      f"this job is for {', '.join(targets)}", token=token["name"], targets=targets)
    store = backends.results_store()
    chosen = local.pick_target(backends.lease_store(lab.key), allowed)
    deadline_at = local.deadline_at(deadline_s)
    if backends.broker_url():
        from controller.jobs import remote

        app = backends.celery_app()
        payload = local.create(store, lab, job, steps, chosen, deadline_at, for_worker=True)
        queue = remote.publish(app, store, payload)
    else:
        from controller.api import embedded

        payload = local.create(store, lab, job, steps, chosen, deadline_at)
        embedded.runner().run(store, lab, [payload])
        queue = EMBEDDED
    return {"job_id": payload["job_id"], "name": payload["name"], "target": chosen, "queue": queue,
            "deadline_at": deadline_at}


def submit_suite(lab, token: dict, body: dict) -> dict:
    """Check the suite in ``body`` (``toml``, ``file``, ``jobs``: each job file's text by the name the suite gives
    it, ``deadline_s``) as `panio suite check` does; refuse it if any of its jobs falls outside the token's allow
    list; record every job and queue them (or run them here, a thread a target, as `panio suite run` would)."""
    from pathlib import Path

    from controller.jobs import local, suite

    may_submit(token)
    text, name, _, deadline_s = _fields(body)
    texts = body.get("jobs")
    if not isinstance(texts, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in texts.items()):
        raise UsageError("\"jobs\" must map each job file the suite names to its text")
    with _as_controllers(lab, token):
        data, entries = suite.matrix(Path(name), lab, (text, texts))
    outside = sorted({t for _, _, t in entries if not tk.allows(token, t, lab.target(t).get("tags", []))})
    if outside:
        raise Refused(f"token {token['name']!r} may submit only to {tk.allow_list(token)}; suite {data['name']} "
                      f"runs on {', '.join(outside)} too", token=token["name"], targets=outside)
    at, on_unhealthy = local.deadline_at(deadline_s), data.get("on_unhealthy") or suite.ON_UNHEALTHY
    store = backends.results_store()
    if backends.broker_url():
        from controller.jobs import remote

        payloads = local.create_many(store, lab, entries, at, for_worker=True, on_unhealthy=on_unhealthy,
                                     suite=data["name"])
        queues = remote.publish_all(backends.celery_app(), store, payloads)
    else:
        from controller.api import embedded

        payloads = local.create_many(store, lab, entries, at, on_unhealthy=on_unhealthy, suite=data["name"])
        embedded.runner().run(store, lab, payloads)
        queues = [EMBEDDED] * len(payloads)
    return {"suite": data["name"], "deadline_at": at,
            "jobs": [{"job_id": p["job_id"], "name": p["name"], "target": p["target"], "queue": q}
                     for p, q in zip(payloads, queues)]}


@contextlib.contextmanager
def _as_controllers(lab, token: dict):
    """A target the controller's lab does not have, said to an API client as what it is: the controller's lab
    (not "add it with `panio target add`" or "set $PANIO_LAB", which are the controller operator's, nor the lab
    file's path on the controller), listing only the targets the token may use."""
    from bench_agent.errors import NotConfigured

    try:
        yield
    except NotConfigured as err:
        wanted, tags = err.details.get("target"), err.details.get("tags")
        if isinstance(wanted, str) and isinstance(err.details.get("known"), list):
            what, said = f"the controller's lab has no target {wanted!r}", {"target": wanted}
        elif isinstance(tags, list) and wanted is None:
            what, said = f"no target of the controller's lab carries tags {', '.join(map(str, tags))}", {"tags": tags}
        else:
            raise
        usable = [t for t, conf in lab.targets.items() if tk.allows(token, t, conf.get("tags", []))]
        raise NotConfigured(what, hint=(f"targets token {token['name']!r} may use: {', '.join(usable)}" if usable
                                        else f"token {token['name']!r} may use no target of the controller's lab")
                            + "; targets and tags are the controller's to change", known=usable, **said) from None


def _fields(body: dict) -> tuple[str, str, str | None, float | None]:
    if not isinstance(body, dict):
        raise UsageError("the body must be a JSON object: {\"toml\": \"<the job file>\", \"file\": \"smoke.toml\"}")
    text, name = body.get("toml"), body.get("file", "job.toml")
    target, deadline_s = body.get("target"), body.get("deadline_s")
    if not isinstance(text, str) or not text.strip():
        raise UsageError("\"toml\" must be the job file's text (TOML), as `panio job submit` reads it")
    if not isinstance(name, str) or not name or len(name) > 200 or not name.isprintable():
        raise UsageError("\"file\" must be the job file's name (printable, at most 200 characters)")
    if target is not None and not isinstance(target, str):
        raise UsageError("\"target\" must be a target's name")
    if deadline_s is not None and (isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float))
                                   or not 0 < deadline_s < 10**9):
        raise UsageError("\"deadline_s\" must be a number of seconds above 0")
    return text, name, target, deadline_s


def readable(load_lab, token: dict) -> set[str] | None:
    """The targets whose jobs ``token`` may read (its allow list, its tags by the targets of ``load_lab()``, read
    only then); None: all."""
    if tk.reads(token, "", ()):
        return None
    targets = load_lab().targets
    return set(token["targets"]) | {t for t, table in targets.items() if tk.reads(token, t, table.get("tags", []))}


def may_read(load_lab, token: dict, target: str, what: str) -> None:
    """``Refused`` (403) when ``what`` (a job, on ``target``) is outside ``token``'s allow list."""
    allowed = readable(load_lab, token)
    if allowed is not None and target not in allowed:
        raise Refused(f"token {token['name']!r} may read only the jobs on {tk.allow_list(token)}; {what} is on "
                      f"{target}", token=token["name"], target=target)


def read(load_lab, token: dict, job_id: int) -> dict:
    """The job with its steps (their output too) and the overrides under its lease, as `panio job status`
    shows it; its spec without the target's configuration. Only on the token's allow list."""
    from controller.jobs import control, overrides

    store = backends.results_store()
    may_read(load_lab, token, store.job(job_id)["target"], f"job {job_id}")
    job = control.reconciled(store, job_id)
    job["overrides"] = overrides.for_job(job_id)
    if isinstance(job.get("spec"), dict):
        job["spec"] = {k: v for k, v in job["spec"].items() if k not in HIDDEN_SPEC}
    return job


def listed(load_lab, token: dict, target: str | None, state: str | None, limit: int) -> list[dict]:
    """The newest ``limit`` jobs (of ``target``, in ``state``) the token may read: a token with an allow list
    gets its targets' jobs only (one page a target, merged), and a target outside it is refused."""
    from controller.jobs.control import list_settled

    allowed = readable(load_lab, token)
    if target is not None:
        may_read(load_lab, token, target, "that list")
    store = backends.results_store()
    if allowed is None or target is not None:
        jobs = list_settled(store, state=state, target=target, limit=limit)
    else:
        pages = [list_settled(store, state=state, target=t, limit=limit) for t in sorted(allowed)]
        jobs = sorted((j for p in pages for j in p), key=lambda j: j["id"], reverse=True)[:limit]
    return [{k: v for k, v in j.items() if k not in ("spec", "steps")} for j in jobs]


def cancel(lab, token: dict, job_id: int) -> str:
    from controller.jobs import control

    may_submit(token)
    store = backends.results_store()
    target = store.job(job_id)["target"]
    tags = lab.targets.get(target, {}).get("tags", [])
    if not tk.allows(token, target, tags):
        raise Refused(f"token {token['name']!r} may cancel only jobs on {tk.allow_list(token)}; job {job_id} is "
                      f"on {target}", token=token["name"], job=job_id)
    return control.cancel(store, job_id)


def artifacts(load_lab, token: dict, job_id: int) -> dict[str, str | bytes]:
    """Name -> content of the job's artifacts, as `panio job artifacts` lists them (step logs, the results
    store's artifacts, its JUnit once done); only on the token's allow list."""
    from controller.jobs import report

    store = backends.results_store()
    job = store.job(job_id)
    may_read(load_lab, token, job["target"], f"job {job_id}")
    out: dict[str, str | bytes] = {f"step-{s['idx'] + 1:02d}.log": s["output"] for s in job["steps"] if s.get("output")}
    out.update(store.list_artifacts(job_id))
    if job["state"] == "done":
        out["junit.xml"] = report.junit(job)
    return out
