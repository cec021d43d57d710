"""The jobs a control host has started, kept on the host: a job runs there at most once, whatever the database says.

The results database says whether a job started, and a reconciler sends a queued job's kept message again
(``bench_agent.jobs.sealed``): whoever can write that database could set a job that ran back to ``queued`` and
have the host run it again (issue 45). So the host keeps its own record, in the worker's state directory
(``STATE/worker-<host>/jobs-started/``, 0700, checked by ``bench_agent.private``): one empty file per job message,
``<job id>.<digest of the signed payload>``, created with ``O_EXCL`` just before the runner claims the job
(``JobRunner``'s ``once``), so among all the host's workers one claim is tried per message, and a restart
remembers. A message with a record is refused (``before``) before anything else happens, the lease and the
health gate included. The record is withdrawn only when the claim said the job was not this runner's (nothing
ran); a claim that fails half-way keeps it (the job then ends refused, never runs twice). A job whose worker died
while it waited for its lease has no record yet: sent again, it runs, once.

A host without a results database (``bench_agent.results.reporting``) decides its take, claim and verdict here
too, in the same folder: ``<job id>.taken`` while its runner waits for the lease, ``<job id>.started`` (``O_EXCL``:
one claim among all the host's workers, remembered across a restart), ``<job id>.done`` at its verdict
(``StartedJobs.mark``). One record, one folder, one pruning.

Bounded: a job message carries ``sealed_at``, when the controller sealed it, inside its signature
(``sealed.seal``), and a worker refuses one sealed more than ``WINDOW_S`` (30 days) ago (``too_old``). A record
is kept until its message's window is over (its mtime), and removed after (at most once a minute): by then the
message is refused by its signed time anyway. A job's marks are kept as long from when they are made (a message
is run only within its window of its sealing, and so before its marks are made). The files are not synced one by one: a host that loses power may
forget the jobs of its last seconds, as ``bench_agent.jobs.replay`` says of operations.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

WINDOW_S = 30 * 86400.0  # a job message is run at most this long after it was sealed; its record kept as long
SKEW_S = 86400.0  # kept this much longer: a host's clock may lag the controller's
PURGE_S = 60.0
MARKS = ("taken", "started", "done")  # a reporting host's own record of a job (``bench_agent.results.reporting``)


class AlreadyStarted(Exception):
    """This host started the job of this message before (raised from the claim; never a ``Refused``, which a
    lease store reads as "try again")."""


def too_old(payload: dict, now: float | None = None) -> str | None:
    """Why ``payload``'s message is past its window (or carries no sealed time), None if it may run."""
    at = payload.get("sealed_at")
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        return "its message carries no time of sealing (sealed_at): it was not queued by this panio's controller"
    age_s = (time.time() if now is None else now) - at
    if age_s > WINDOW_S:
        return (f"its message was sealed {age_s / 86400:.0f} days ago, past the {WINDOW_S / 86400:.0f} days a "
                "host runs a job message in (and remembers having started it)")
    return None


class StartedJobs:
    """The job messages this host started, one file each in ``folder``."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self._next_purge = 0.0
        self._ready = False

    def of(self, payload: dict) -> JobRecord:
        """The record of ``payload``'s message (as it came off the broker, before anything is added to it)."""
        return JobRecord(self, _name(payload), float(payload["sealed_at"]))

    def path(self, name: str) -> Path:
        if not self._ready:
            from bench_agent.private import private_dir

            private_dir(self.folder)  # this user's alone, or the record would be another user's to erase
            self._ready = True
        return self.folder / name

    def mark(self, job_id: int, what: str, exclusive: bool = False) -> bool:
        """Mark job ``job_id`` ``what`` (``MARKS``: a reporting host's take, claim and verdict), kept for the window
        like a record; whether it was made (``exclusive``: False when it was there already)."""
        if what not in MARKS:
            raise ValueError(f"not a mark: {what[:40]!r}")
        made = _create(self.path(f"{int(job_id)}.{what}"), time.time() + WINDOW_S + SKEW_S, exclusive)
        if made:
            self.purge()
        return made

    def marked(self, job_id: int, what: str) -> bool:
        return self.path(f"{int(job_id)}.{what}").exists()

    def purge(self) -> None:
        """Remove the records whose window is over (at most once every ``PURGE_S``)."""
        now = time.time()
        if now < self._next_purge:
            return
        self._next_purge = now + PURGE_S
        from bench_agent.jobs.replay import remove_older

        remove_older(self.folder, now)


class JobRecord:
    """One job message's record: ``before``, ``record``, ``forget``."""

    def __init__(self, jobs: StartedJobs, name: str, sealed_at: float) -> None:
        self.jobs, self.name, self.sealed_at = jobs, name, sealed_at

    def before(self) -> bool:
        """Whether this host started this message's job before."""
        return self.jobs.path(self.name).exists()

    def record(self) -> bool:
        """Record the job as started; whether it was new (False: started before)."""
        if not _create(self.jobs.path(self.name), max(time.time(), self.sealed_at) + WINDOW_S + SKEW_S, True):
            return False
        self.jobs.purge()
        return True

    def forget(self) -> None:
        """Withdraw the record of a job that was not claimed after all: nothing of it ran here."""
        try:
            os.unlink(self.jobs.path(self.name))
        except FileNotFoundError:
            pass


def _create(path: Path, until: float, exclusive: bool) -> bool:
    """Make ``path`` (0600, never through a link), kept until ``until`` (its mtime); False if ``exclusive`` and it
    was there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_EXCL if exclusive else 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        return False
    try:
        os.utime(fd, (until, until))
    finally:
        os.close(fd)
    return True


def _name(payload: dict) -> str:
    """``<job id>.<digest>``: the job, and which message of it (job 7 of another results database is another)."""
    job_id = payload.get("job_id")
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ValueError(f"not a job id: {str(job_id)[:40]!r}")
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{job_id}.{digest[:32]}"
