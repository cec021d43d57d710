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

    # Without a broker nobody else can settle a job whose process died before it started.
    return Reconciler(store, backends.lease_store(), fail_unsendable=backends.broker_url() is None)


def list_settled(store, state: str | None = None, **filters) -> list[dict]:
    """``store.list_jobs`` with jobs whose runner died shown as what they are."""
    jobs = store.list_jobs(state=state, **filters)
    if any(j["state"] != "done" for j in jobs):
        jobs = [reconciled(store, j["id"], j) for j in jobs]
        jobs = [j for j in jobs if not state or j["state"] == state]
    return jobs


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
