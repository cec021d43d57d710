"""What an operator does to jobs, shared by the CLI and the dashboard: read them settled, cancel them."""

from __future__ import annotations


def reconciled(store, job_id: int, job: dict | None = None) -> dict:
    """The job, after settling it if its runner is proven dead (a reader never overrules a live runner)."""
    job = job or store.job(job_id)
    if job["state"] == "done":
        return job
    return reader_reconciler(store).job(job)


def reader_reconciler(store):
    from bench_agent.jobs.reconcile import Reconciler
    from controller import backends
    from controller.jobs.lost_window import keeper

    # Without a broker nobody else can settle a job whose process died before it started. A job it settles as
    # lost keeps its capture's serial window then, the one write a settling does (never a page's GET itself).
    return Reconciler(store, backends.lease_store(), fail_unsendable=backends.broker_url() is None,
                      on_lost=keeper(store))


def settled(store, jobs: list[dict]) -> list[dict]:
    """``jobs`` (rows without their steps) after settling those whose runner is proven dead, in one pass: one
    read of the jobs not done and one lease read each, not three queries a job (a page of a busy lab's queue
    is hundreds of jobs; issue 25). A job settled meanwhile is read again."""
    ids = [j["id"] for j in jobs if j["state"] != "done"]
    if not ids:
        return jobs
    reader_reconciler(store).pass_(ids)
    still = {j["id"]: j for j in store.active_jobs(ids)}
    out = []
    for j in jobs:
        if j["state"] != "done":
            j = still.get(j["id"]) or {k: v for k, v in store.job(j["id"]).items() if k != "steps"}
        out.append(j)
    return out


def list_settled(store, state: str | None = None, **filters) -> list[dict]:
    """``store.list_jobs`` with jobs whose runner died shown as what they are."""
    jobs = store.list_jobs(state=state, **filters)
    if any(j["state"] != "done" for j in jobs):
        jobs = [j for j in settled(store, jobs) if not state or j["state"] == state]
    return jobs


def quick_list(url: str, **filters) -> list[dict] | None:
    """``list_settled``'s page read with the database's driver alone (``results_read.Reader``: no SQLAlchemy to
    import, a new process's largest cost; docs/scale.md) when every job on it is done, so nothing needs settling;
    None when the store has to answer."""
    from bench_agent.results.read import ACTIVE

    if filters.get("state") in ACTIVE:
        return None  # jobs not done, to settle: the store's way at once
    jobs = _quick(url, lambda reader: reader.list_jobs(**filters))
    return jobs if jobs is not None and all(j["state"] == "done" for j in jobs) else None


def quick_status(url: str, job_id: int) -> dict | None:
    """``reconciled``'s job with its ``overrides``, read with the driver alone when the job is done; None when
    the store has to answer (the job may need settling, or the database is not as this panio makes it)."""
    from controller.jobs import overrides

    def read(reader) -> dict | None:
        job = reader.job(job_id)
        return {**job, "overrides": overrides.for_job(job_id, reader)} if job["state"] == "done" else None

    return _quick(url, read)


def _quick(url: str, read):
    from bench_agent.results.read import Reader, Unanswered

    reader = Reader.open(url)
    if reader is None:
        return None
    with reader:
        try:
            return read(reader)
        except Unanswered:
            return None


def cancel(store, job_id: int) -> str:
    """Cancel a queued or running job; returns what happened, in words."""
    job = store.job(job_id)
    if job["state"] == "done":
        return f"job {job_id} already finished ({job['health']})"
    store.request_cancel(job_id)
    if job["state"] == "queued" and store.finish(job_id, "canceled", None, "canceled before it started",
                                                 {"error": "canceled", "exit": 15, "message": "canceled"}):
        return f"job {job_id} canceled before it started"
    return f"job {job_id}: cancel requested; its runner stops the running step"
