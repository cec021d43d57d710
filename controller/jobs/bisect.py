"""Bisection: the first build of an ordered list that breaks a board, found by running one job on each build.

A build is a name and its artifacts (``name kernel=URL rootfs=PATH``); a probe is the job file with
``${build.ARTIFACT}`` (and ``${build}``: the name) replaced by that build's, run as an ordinary job
(``local.run_prepared``: lease, health, results). First the good build is run until it passes once (the
*reference*: what each failure is compared with), then the bad build ``repeat`` times: its failure (the failing
step and the first lines that diverge from the reference, ``bench_agent.triage.signature``) is *the* failure.
Then a binary search: a build is bad as soon as one run fails with that failure, good when ``repeat`` runs
passed; a run the lab failed (incomplete, canceled, timed out) or that failed some other way is not counted
and is run again, at most ``retries`` times a build. Every verdict and decision is written to the results
database before the next probe, so ``resume`` continues where a killed process stopped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from bench_agent.errors import Canceled, PanioError, UsageError

BUILD_VAR = re.compile(r"\$\{build(?:\.([A-Za-z_][A-Za-z0-9_]*))?\}")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,199}")


class Undecided(PanioError):
    """A build could not be judged: its probes kept failing for the lab's reasons or for another failure."""

    code, exit_status = "unreachable", 4
    lab = True


def parse_builds(path: Path) -> list[dict]:
    """The ordered builds of ``path``: TOML (``[[builds]] name = ..., ARTIFACT = ...``) or one a line
    (``NAME [ARTIFACT=VALUE ...]``, ``#`` comments)."""
    from controller.lab import tomlfile

    text = tomlfile.read(path, "builds list") if path.suffix == ".toml" else _read(path)
    builds = _from_toml(path, text) if path.suffix == ".toml" else _from_lines(path, text)
    seen: set[str] = set()
    for b in builds:
        if not NAME_RE.fullmatch(b["name"]):
            raise UsageError(f"{path}: {b['name']!r} is not a build name", hint="letters, digits and ._+~-")
        if b["name"] in seen:
            raise UsageError(f"{path}: build {b['name']!r} is listed twice", hint="one line a build, oldest first")
        seen.add(b["name"])
    if len(builds) < 2:
        raise UsageError(f"{path}: a bisection needs at least two builds, found {len(builds)}")
    return builds


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the builds list {path}: {exc}") from None


def _from_lines(path: Path, text: str) -> list[dict]:
    import shlex

    out = []
    for no, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise UsageError(f"{path}:{no}: {exc}") from None
        if not words:
            continue
        artifacts = {}
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise UsageError(f"{path}:{no}: {word!r} is not ARTIFACT=VALUE",
                                 hint="a line is: NAME kernel=PATH rootfs=URL ...")
            artifacts[key] = value
        out.append({"name": words[0], "artifacts": artifacts})
    return out


def _from_toml(path: Path, text: str) -> list[dict]:
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: {exc}") from None
    rows = data.get("builds")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("name"), str) for r in rows):
        raise UsageError(f"{path}: want [[builds]] tables, each with a name", hint='[[builds]] name = "v1" ...')
    return [{"name": r["name"], "artifacts": {k: str(v) for k, v in r.items() if k != "name"}} for r in rows]


def select(builds: list[dict], good: str, bad: str) -> list[dict]:
    """The builds from ``good`` to ``bad`` (both included), in the list's order."""
    names = [b["name"] for b in builds]
    for which, name in (("--good", good), ("--bad", bad)):
        if name not in names:
            raise UsageError(f"{which} {name!r} is not in the builds list",
                             hint=f"builds: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}")
    g, b = names.index(good), names.index(bad)
    if g >= b:
        raise UsageError(f"the good build {good!r} must come before the bad build {bad!r} in the list",
                         hint="list the builds oldest first")
    return builds[g:b + 1]


def job_for(text: str, path: str, build: dict) -> dict:
    """The job of ``build``: the job file's text with its ``${build...}`` replaced, parsed and checked."""
    from controller.jobs import spec

    def value(m: re.Match) -> str:
        if m.group(1) is None:
            return build["name"]
        if m.group(1) not in build["artifacts"]:
            raise UsageError(f"{path}: ${{build.{m.group(1)}}}: build {build['name']!r} has no artifact "
                             f"{m.group(1)!r} (it has: {', '.join(build['artifacts']) or 'none'})")
        return build["artifacts"][m.group(1)]

    return spec.parse(path, BUILD_VAR.sub(value, text))


class Bisection:
    """One bisection, driven from its record (``BisectStore``); ``show(line)`` hears its progress."""

    def __init__(self, store, results, lab, bisect_id: int, show: Callable[[str], None],
                 retries: int | None = None) -> None:
        self.store, self.results, self.lab, self.id, self.show = store, results, lab, bisect_id, show
        self.rec = store.get(bisect_id)
        self.retries = retries if retries is not None else 2 * self.rec["repeat"] + 2

    def run(self) -> dict:
        try:
            if self.rec["reference"] is None:
                self._reference()
            if self.rec["signature"] is None:
                self._bad_failure()
            while self.rec["bad"] - self.rec["good"] > 1:
                self._stopped()
                mid = (self.rec["good"] + self.rec["bad"]) // 2
                verdict = self._judge(mid)
                self._set(**({"bad": mid} if verdict == "bad" else {"good": mid}))
                self.show(f"bisect {self.id}: {self._name(mid)} is {verdict}; first bad is among "
                          f"{self._name(self.rec['good'] + 1)}..{self._name(self.rec['bad'])}")
        except Canceled:
            raise
        except PanioError as err:
            self._set(state="failed", reason=err.message)
            raise
        self._set(state="done", reason=f"first bad build: {self._name(self.rec['bad'])}")
        return self.rec

    def _set(self, **values: Any) -> None:
        self.store.update(self.id, **values)
        self.rec.update(values)

    def _name(self, idx: int) -> str:
        return self.rec["builds"][idx]["name"]

    def _stopped(self) -> None:
        state = self.store.get(self.id)["state"]
        if state == "stopped":
            raise Canceled(f"bisection {self.id} was stopped", hint=f"panio bisect resume {self.id}")

    def _probe(self, idx: int) -> dict:
        from controller.jobs import local, spec

        self._stopped()
        build = self.rec["builds"][idx]
        job = job_for(self.rec["job_text"], self.rec["job_path"], build)
        prepared = (job, spec.compile_steps(job), spec.select_targets(job, self.lab, self.rec["target"]))
        return local.run_prepared(prepared, self.lab, lambda event, data: None)

    def _record(self, idx: int, job: dict, verdict: str, why: str) -> None:
        self.store.add_probe(self.id, idx, job["id"], verdict, why)
        self.show(f"bisect {self.id}: {self._name(idx)}: job {job['id']} {verdict}: {why}")

    def _runs(self, idx: int) -> list[dict]:
        """This build's probes so far (a resumed bisection counts the ones made before it stopped)."""
        return [p for p in self.store.get(self.id)["probes"] if p["build"] == idx]

    def _reference(self) -> None:
        idx = 0
        while True:
            self._budget(idx)
            job = self._probe(idx)
            if _lab_failed(job):
                self._record(idx, job, "inconclusive", _lab_why(job))
                continue
            if job["result"] == "passed":
                self._record(idx, job, "reference", "passed: failures are compared with this run")
                self._set(reference=job["id"])
                return
            self._record(idx, job, "unrelated", f"the good build failed: {job['reason'] or ''}".strip())

    def _bad_failure(self) -> None:
        from bench_agent.triage import signature

        idx = len(self.rec["builds"]) - 1
        found = [signature.of(self.results, p["job_id"], self.rec["reference"])
                 for p in self._runs(idx) if p["verdict"] == "bad"]  # a resumed bisection's earlier runs
        while len(found) + sum(p["verdict"] == "pass" for p in self._runs(idx)) < self.rec["repeat"]:
            self._budget(idx)
            job = self._probe(idx)
            if _lab_failed(job):
                self._record(idx, job, "inconclusive", _lab_why(job))
            elif job["result"] == "passed":
                self._record(idx, job, "pass", "the bad build passed this run")
            else:
                found.append(signature.of(self.results, job["id"], self.rec["reference"]))
                self._record(idx, job, "bad", _words(found[-1]))
        if not found:
            raise UsageError(f"the bad build {self._name(idx)!r} passed {self.rec['repeat']} runs",
                             hint="give a --bad build that fails this job")
        # the failure most of its failing runs had (an unrelated flake among them does not decide)
        best = max(found, key=lambda s: sum(signature.same(s, o) for o in found))
        self._set(signature=best)

    def _judge(self, idx: int) -> str:
        from bench_agent.triage import signature

        while True:
            runs = self._runs(idx)
            if any(p["verdict"] == "bad" for p in runs):
                return "bad"
            if sum(p["verdict"] == "pass" for p in runs) >= self.rec["repeat"]:
                return "good"
            self._budget(idx)
            job = self._probe(idx)
            if _lab_failed(job):
                self._record(idx, job, "inconclusive", _lab_why(job))
            elif job["result"] == "passed":
                self._record(idx, job, "pass", "passed")
            else:
                sig = signature.of(self.results, job["id"], self.rec["reference"])
                if signature.same(self.rec["signature"], sig):
                    self._record(idx, job, "bad", _words(sig))
                else:
                    self._record(idx, job, "unrelated", f"another failure, not counted: {_words(sig)}")

    def _budget(self, idx: int) -> None:
        runs = self._runs(idx)
        wasted = sum(p["verdict"] in ("inconclusive", "unrelated") for p in runs)
        if wasted >= self.retries:
            raise Undecided(f"build {self._name(idx)!r} could not be judged: {wasted} probes were inconclusive "
                            f"or failed another way", hint=f"fix the lab, then `panio bisect resume {self.id}`",
                            bisect=self.id, build=self._name(idx))


def _lab_failed(job: dict) -> bool:
    return job["health"] != "complete"


def _lab_why(job: dict) -> str:
    return f"the lab's fault ({job['health']}: {job['reason'] or ''}), not counted".strip()


def _words(sig: dict) -> str:
    lines = "; ".join(sig.get("lines") or []) or "no divergent line"
    return f"step {sig.get('step')!r} failed: {lines}"


def report(rec: dict) -> dict:
    """What ``panio bisect status --json`` prints: the range, the first bad build (once done), each probe."""
    builds = rec["builds"]
    out = {k: rec[k] for k in ("id", "state", "target", "job_path", "repeat", "reason", "signature", "reference")}
    out["builds"] = [b["name"] for b in builds]
    out["good"], out["bad"] = builds[rec["good"]]["name"], builds[rec["bad"]]["name"]
    out["first_bad"] = out["bad"] if rec["state"] == "done" else None
    out["remaining"] = [b["name"] for b in builds[rec["good"] + 1:rec["bad"]]]
    out["probes"] = [{"build": builds[p["build"]]["name"], "job_id": p["job_id"], "verdict": p["verdict"],
                      "why": p["why"], "at": p["at"]} for p in rec["probes"]]
    refs = {0, len(builds) - 1}
    out["bisection_probes"] = len({p["build"] for p in rec["probes"]} - refs)
    return out
