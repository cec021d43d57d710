"""What the controller API does with schedules and leases, below HTTP (``controller.dashboard.api``).

Schedules: any token lists them; a submitter adds one whose suite runs only on its allow list (an operator any),
and removes one whose suite does; a reader neither. A schedule's suite comes as text (the suite file and the job
files it names, as ``POST /api/v1/suites`` takes them) and is kept, checked, in the controller's state directory
(``STATE_DIR/schedules/NAME/``, 0700), which `panio schedule serve` reads when it fires: run the scheduler as the
dashboard's user. Leases: operators only, as `panio lease list` and `lease break` show and break them.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from bench_agent.errors import AlreadyExists, Refused, UsageError
from controller import backends
from controller.api import tokens as tk
from controller.api.jobs import may_submit

FOLDER = "schedules"


def _store():
    from controller.jobs.schedules import ScheduleStore

    return ScheduleStore(backends.results_url())


def listed() -> list[dict]:
    return _store().list()


def add(lab, token: dict, body: dict) -> dict:
    """Check the suite in ``body`` (``name``, ``at`` or ``every``, ``toml``, ``file``, ``jobs``) as `panio schedule add`
    does, refuse it outside the token's allow list, keep its files here and schedule it."""
    from bench_agent.errors import InvalidName
    from controller.jobs import schedules, suite
    from controller.lab.schema import NAME_RE, NAME_RULE

    may_submit(token)
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise UsageError("the body must be a JSON object with the schedule's \"name\"")
    name = body["name"]
    if not NAME_RE.match(name):
        raise InvalidName(f"{name[:80]!r} is not a valid schedule name: use {NAME_RULE}", kind="schedule", name=name)
    at, every = body.get("at"), body.get("every")
    if (at is None) == (every is None) or not isinstance(at if every is None else every, str):
        raise UsageError("give the schedule's \"at\" (HH:MM, daily) or its \"every\" (a duration like 6h), not both")
    at = schedules.parse_at(at) if at is not None else None
    every_s = schedules.parse_every(every) if every is not None else None
    text, file, texts = _suite_fields(body)
    data, entries = suite.matrix(Path(file), lab, (text, texts))
    _allowed(token, lab, entries, f"schedule {name} (suite {data['name']})")
    if any(r["name"] == name for r in _store().list()):
        raise AlreadyExists(f"schedule {name!r} exists", hint=f"remove it first (DELETE /api/v1/schedules/{name})",
                            schedule=name)
    path = _keep(name, Path(file).name, text, texts)
    try:
        row = _store().add(name, path, at, every_s)  # two adds of one name at once: one wins, here
    except Exception:
        shutil.rmtree(path.parent, ignore_errors=True)
        raise
    return {"name": name, "suite": data["name"], "jobs": len(entries), "at": at, "every_s": every_s,
            "next_due": row["next_due"]}


def remove(lab, token: dict, name: str) -> str:
    """Remove schedule ``name``: an operator's, or a submitter's whose allow list covers its suite's targets."""
    from bench_agent.errors import NotConfigured, PanioError
    from controller.jobs import suite

    may_submit(token)
    rows = {r["name"]: r for r in _store().list()}
    if name not in rows:
        raise NotConfigured(f"no schedule {name!r}", hint="see GET /api/v1/schedules", schedule=name)
    if token["scope"] != "operator":
        try:
            _, entries = suite.matrix(Path(rows[name]["suite"]), lab)
        except PanioError as err:
            raise Refused(f"schedule {name}'s suite does not load here ({err.message}): only an operator may "
                          "remove it", token=token["name"]) from None
        _allowed(token, lab, entries, f"schedule {name}")
    _store().remove(name)
    kept = Path(rows[name]["suite"]).parent
    if kept.parent == _folders():  # one this API kept (not a file an operator scheduled with the CLI)
        shutil.rmtree(kept, ignore_errors=True)
    return f"removed schedule {name}"


def leases(token: dict, lab_key, breaks: bool = False) -> list[dict]:
    """The held leases of the lab (``lab_key()``, asked only of an operator), or its recorded breaks, as `panio lease
    list` shows them: operators only."""
    only_operators(token, "list leases")
    store = backends.lease_store(lab_key())
    if breaks:
        return store.breaks() if hasattr(store, "breaks") else []
    return store.list()


def only_operators(token: dict, what: str) -> None:
    if token["scope"] != "operator":
        raise Refused(f"token {token['name']!r} is a {token['scope']}: only an operator may {what}",
                      hint="ask an operator, or for an operator token (`panio token add NAME --scope operator`)",
                      token=token["name"])


def _allowed(token: dict, lab, entries: list, what: str) -> None:
    outside = sorted({t for _, _, t in entries if not tk.allows(token, t, lab.target(t).get("tags", []))})
    if outside:
        raise Refused(f"token {token['name']!r} may submit only to {tk.allow_list(token)}; {what} runs on "
                      f"{', '.join(outside)} too", token=token["name"], targets=outside)


def _suite_fields(body: dict) -> tuple[str, str, dict[str, str]]:
    text, file, texts = body.get("toml"), body.get("file", "suite.toml"), body.get("jobs")
    if not isinstance(text, str) or not text.strip():
        raise UsageError("\"toml\" must be the suite file's text (TOML), as `panio suite check` reads it")
    if not isinstance(file, str) or not file or len(file) > 200 or not file.isprintable():
        raise UsageError("\"file\" must be the suite file's name (printable, at most 200 characters)")
    if not isinstance(texts, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in texts.items()):
        raise UsageError("\"jobs\" must map each job file the suite names to its text")
    for rel in texts:
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or "\\" in rel:
            raise UsageError(f"job file {rel[:80]!r}: a schedule's job files are named relative to its suite, "
                             "inside its folder (no absolute path, no ..)")
    return text, file, texts


def _folders() -> Path:
    from bench_agent.paths import state_dir
    from bench_agent.private import private_dir

    return Path(private_dir(state_dir() / FOLDER))


def _keep(name: str, suite_name: str, text: str, texts: dict[str, str]) -> Path:
    """The suite and its job files written into a new folder of ``name``'s (0700); the suite's path."""
    import secrets

    folder = _folders() / f"{name}.{secrets.token_hex(4)}"
    folder.mkdir(mode=0o700)
    for rel, job_text in texts.items():
        path = folder / rel
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text(job_text)
    (folder / suite_name).write_text(text)
    return folder / suite_name
