"""Bisection: the first build of an ordered list that breaks a board, found by running one job on each build.

A build is a name and its artifacts (``name kernel=URL rootfs=PATH``); a probe is the job file with
``${build.ARTIFACT}`` (and ``${build}``: the name) replaced by that build's, run as an ordinary job
(lease, health, results) on ``--target`` or on the boards of ``--tag``, side by side. First the good build
is run until it passes once on each board (the board's *reference*: what a failure there is compared with;
boards' consoles differ, in their names if nothing else), and the bad build ``repeat`` times: its failure (the
failing step and the first lines that diverge from the reference, ``bench_agent.triage.signature``) is *the*
failure. Then a search in rounds (a binary search on one board, a
split in ``m + 1`` parts on several): a build is bad as soon as one run fails with that failure, good when
``repeat`` runs passed; a run the lab failed (incomplete, canceled, timed out) or that failed some other way is
not counted and is run again (on another board), at most ``retries`` times a build. Each probe is recorded
when its job is made (``running``) and judged when it ends, so ``resume`` continues where a killed process
stopped.
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


COMMAND_TIMEOUT_S = 60.0


def parse_builds(path: Path) -> list[dict]:
    """The ordered builds of ``path``: TOML (``[[builds]] name = ..., ARTIFACT = ...``) or one a line
    (``NAME [ARTIFACT=VALUE ...]``, ``#`` comments)."""
    from controller.lab import tomlfile

    text = tomlfile.read(path, "builds list") if path.suffix == ".toml" else _read(path)
    return parse_text(str(path), text, path.suffix == ".toml")


def builds_from_command(command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> list[dict]:
    """The builds a command prints (``--builds-cmd``), parsed as a builds file is (TOML when a line is
    ``[[builds]]``). Run as a hook is: split into words (``shlex``), no shell, bounded in time; any failure
    (not found, non-zero exit, too slow, nothing printed) is one usage error: nothing starts."""
    from bench_agent import hooks

    try:
        out = hooks.run(command, name="--builds-cmd", timeout_s=timeout_s).stdout
    except PanioError as err:
        raise UsageError(err.message, hint="the command must print the builds, oldest first, and exit 0 "
                                           "(it runs without a shell: wrap a pipeline in `sh -c '...'`)") from None
    toml = any(line.strip() == "[[builds]]" for line in out.splitlines())
    return parse_text(f"--builds-cmd `{command}`", out, toml)


def parse_text(source: str, text: str, toml: bool) -> list[dict]:
    """The builds of a list's ``text`` (``source``: the file or command it came from, for errors)."""
    builds = _from_toml(source, text) if toml else _from_lines(source, text)
    seen: set[str] = set()
    for b in builds:
        if not NAME_RE.fullmatch(b["name"]):
            raise UsageError(f"{source}: {b['name']!r} is not a build name", hint="letters, digits and ._+~-")
        if b["name"] in seen:
            raise UsageError(f"{source}: build {b['name']!r} is listed twice", hint="one line a build, oldest first")
        seen.add(b["name"])
    if len(builds) < 2:
        raise UsageError(f"{source}: a bisection needs at least two builds, found {len(builds)}")
    return builds


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the builds list {path}: {exc}") from None


def _from_lines(path: str, text: str) -> list[dict]:
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


def _from_toml(path: str, text: str) -> list[dict]:
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
    """The job of ``build``: the job file with its ``${build...}`` replaced, parsed and checked.

    A value is put in the file's parsed strings, never pasted into its text: the file is rewritten by tomlkit
    (each string escaped as TOML wants it), and in a step's ``run`` each word is replaced alone and quoted if it
    must be, so a build's name or artifact with a space, a quote or a newline is one word of the step and can
    neither break the file nor add a key or a step to it."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from controller.jobs import spec

    def value(m: re.Match) -> str:
        if m.group(1) is None:
            return build["name"]
        if m.group(1) not in build["artifacts"]:
            raise UsageError(f"{path}: ${{build.{m.group(1)}}}: build {build['name']!r} has no artifact "
                             f"{m.group(1)!r} (it has: {', '.join(build['artifacts']) or 'none'})")
        return build["artifacts"][m.group(1)]

    if not BUILD_VAR.search(text):
        return spec.parse(path, text)
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError:
        return spec.parse(path, text)  # says what is wrong with the file, with its line and column
    _replace(doc, lambda s: BUILD_VAR.sub(value, s))
    return spec.parse(path, tomlkit.dumps(doc))


def _replace(node: Any, sub: Callable[[str], str]) -> None:
    """Every string of a tomlkit table or array passed through ``sub``; a ``run`` line word by word."""
    keys = node.keys() if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else ()
    for key in list(keys):
        item = node[key]
        if isinstance(item, str):
            new = _run_line(item, sub) if key == "run" else sub(item)
            if new != item:
                node[key] = new
        else:
            _replace(item, sub)


def _run_line(line: str, sub: Callable[[str], str]) -> str:
    """A step's command line with ``sub`` applied to each of its words, each a word still (quoted if it must be)."""
    import shlex

    from bench_agent import shellwords

    try:
        words = shellwords.split(line)
    except ValueError:
        return line  # the job file's check says what is wrong with it
    out = [sub(word) for word in words]
    if out == words:
        return line

    def said(word: str) -> str:  # the word itself where it splits back to itself, else quoted
        try:
            return word if shellwords.split(word) == [word] else shlex.quote(word)
        except ValueError:
            return shlex.quote(word)

    return " ".join(said(word) for word in out)


class Bisection:
    """One bisection, driven from its record (``BisectStore``); ``show(line)`` hears its progress.

    Its boards are ``--target`` or every board of ``--tag``. Work goes in *rounds*: each round probes some builds
    of the range, their runs side by side on the free boards (``picks``), and the range narrows as each build
    is decided (a build found bad above another found bad, or good below another found good, is dropped
    unprobed). A run whose board went bad (inconclusive) is run again on another board, and that board takes
    no more runs until its health is no longer bad or maintenance."""

    def __init__(self, store, results, lab, bisect_id: int, show: Callable[[str], None],
                 retries: int | None = None) -> None:
        from bench_agent.jobs.reconcile import Heartbeat
        from bench_agent.leases.base import holder_name

        self.store, self.results, self.lab, self.id, self.show = store, results, lab, bisect_id, show
        self.rec = store.get(bisect_id)
        self.retries = retries if retries is not None else 2 * self.rec["repeat"] + 2
        self.boards = boards(lab, self.rec)
        self.me = holder_name("panio bisect")
        self.heartbeat = Heartbeat(results)
        self.benched: set[str] = set()  # boards whose last run the lab failed: none until their health allows
        self.avoid: dict[int, set[str]] = {}  # the boards a build's run was inconclusive on
        self.refs: dict[str, int] = {}  # board -> its reference: a passing job of the good build there
        # the probes of an earlier run of this bisection: what the lab spoiled then was fixed before a resume
        # ("fix the lab, then resume"), so only this run's wasted probes count against a build's budget
        self.earlier = {p["id"] for p in self.rec["probes"]}
        self._passes: dict[int, set[str]] = {}  # a passing job -> its lines diverging from its reference
        for p in self.rec["probes"]:
            if p["verdict"] == "reference":  # (a probe recorded before probes had a board: the one target's)
                self.refs.setdefault(p.get("target") or self.rec["target"], p["job_id"])

    @property
    def last(self) -> int:
        return len(self.rec["builds"]) - 1

    def run(self) -> dict:
        try:
            self._settle()
            if self.rec["reference"] is None or self.rec["signature"] is None:
                self._round([0, self.last])  # the reference and the bad build's failure, side by side
                self._bad_failure()
            while self.rec["bad"] - self.rec["good"] > 1:
                self._stopped()
                self._round(self._picks())
        except Canceled:
            raise
        except PanioError as err:
            self._set(state="failed", reason=err.message)
            raise
        self._set(state="done", reason=f"first bad build: {self._name(self.rec['bad'])}")
        return self.rec

    def _settle(self) -> None:
        """The probes a dead process left running (their jobs never judged): each job settled as `panio job
        status` settles one (its runner proven dead: incomplete, worker lost), or waited for while its runner
        lives, then judged as any probe, before the search goes on."""
        for p in self.store.get(self.id)["probes"]:
            if p["verdict"] == "running":
                self._judge(p["build"], p.get("target"), p["id"], self._settled(p["job_id"]))

    def _settled(self, job_id: int) -> dict:
        import time

        from bench_agent.jobs.reconcile import dead_after_s
        from controller.jobs.control import reconciled

        job = reconciled(self.results, job_id)
        if job["state"] != "done":
            self.show(f"bisect {self.id}: job {job_id} of the stopped bisecting process is {job['state']}: "
                      f"waiting for it to end (or for its runner to be proven dead)")
        spec = job["spec"]
        runs_s = spec.get("timeout_s") or sum(float(s.get("timeout_s") or 60) for s in spec.get("steps", []))
        end = time.monotonic() + float(runs_s) + 3 * dead_after_s(spec) + 60  # its own time, then proven dead
        while job["state"] != "done":
            if time.monotonic() > end:
                raise Undecided(f"probe job {job_id} is still {job['state']}", bisect=self.id, job=job_id,
                                hint=f"`panio job cancel {job_id}`, then `panio bisect resume {self.id}`")
            time.sleep(0.5)
            job = reconciled(self.results, job_id)
        return job

    def _set(self, **values: Any) -> None:
        self.store.update(self.id, **values)
        self.rec.update(values)

    def _name(self, idx: int) -> str:
        return self.rec["builds"][idx]["name"]

    def _stopped(self) -> None:
        if self.store.get(self.id)["state"] == "stopped":
            raise Canceled(f"bisection {self.id} was stopped", hint=f"panio bisect resume {self.id}")

    def _picks(self) -> list[int]:
        """The builds of the next round: ``m`` builds that split the range in ``m + 1`` equal parts, where
        ``m`` is how many builds the boards can run ``repeat`` times at once (docs/bisect.md: why)."""
        return split(self.rec["good"], self.rec["bad"], len(self._ready()), self.rec["repeat"])

    def _ready(self) -> list[str]:
        """The boards that may take a probe: usable, and with a reference to compare their failures with."""
        return [b for b in self.boards if b in self.refs and self._usable(b)]

    def _ref(self, board: str | None) -> int | None:
        """What a failure on ``board`` is compared with: its reference (else the good build's first pass)."""
        return self.refs.get(board or "") or self.rec["reference"]

    def _needed(self, idx: int) -> int:
        """How many more runs build ``idx`` needs (its runs still going not subtracted)."""
        runs = self._runs(idx)
        if idx == 0 and self.rec["signature"] is None:  # a reference on each usable board (and a second pass)
            return sum((b not in self.refs or self._learns_noise(b)) and self._usable(b) for b in self.boards)
        if idx == self.last and self.rec["signature"] is None:
            return max(0, self.rec["repeat"] - sum(p["verdict"] in ("bad", "pass") for p in runs))
        if not self.rec["good"] < idx < self.rec["bad"] or any(p["verdict"] == "bad" for p in runs):
            return 0
        return max(0, self.rec["repeat"] - sum(p["verdict"] == "pass" for p in runs))

    def _learns_noise(self, board: str) -> bool:
        """With ``--repeat`` over 1 (a flaky board), whether ``board`` still wants a second pass of the good build
        after its reference: the lines every later boot differs from the board's first by (a prompt glued to the
        banner) are then known as noise before any failure there is judged, so a flake that comes before the
        board's first pass of another build is not taken for the bad build's failure by such a line."""
        return self.rec["repeat"] > 1 and board in self.refs and not any(
            p["build"] == 0 and p["verdict"] == "pass" and (p.get("target") or self.rec["target"]) == board
            for p in self.store.get(self.id)["probes"])

    def _round(self, picks: list[int]) -> None:
        """Run ``picks``' runs on the free boards until each is decided (or dropped from the range)."""
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

        running: dict = {}  # future -> (build, board, probe id, job id)
        with ThreadPoolExecutor(max_workers=len(self.boards), thread_name_prefix="panio-bisect") as pool:
            try:
                while True:
                    stopping = self.store.get(self.id)["state"] == "stopped"
                    if not stopping:
                        self._assign(picks, running, pool)
                    if not running:
                        self._stopped()
                        if any(self._needed(i) for i in picks):
                            raise Undecided(f"no board of tag {self.rec['tag']!r} is usable: "
                                            f"{', '.join(self.boards)} are bad, in maintenance or never "
                                            "passed the good build",
                                            hint=f"fix the lab, then `panio bisect resume {self.id}`",
                                            bisect=self.id)
                        return
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        idx, board, probe_id, _ = running.pop(fut)
                        self._judge(idx, board, probe_id, fut.result())
            except BaseException:
                for _, _, _, job_id in running.values():  # the pool waits for them: they stop at their next step
                    self.results.request_cancel(job_id)
                raise

    def _assign(self, picks: list[int], running: dict, pool) -> None:
        busy = {board for _, board, _, _ in running.values()}
        free = [b for b in self.boards if b not in busy and self._usable(b)]
        for idx in picks:
            want = self._needed(idx) - sum(i == idx for i, _, _, _ in running.values())
            while want > 0:
                # the good build on the boards without a reference yet; any other build on those with one
                fit = [b for b in free if (b not in self.refs or self._learns_noise(b)) == (idx == 0)]
                if not fit:
                    break
                self._budget(idx)
                board = next((b for b in fit if b not in self.avoid.get(idx, ())), fit[0])
                free.remove(board)
                probe_id, payload = self._launch(idx, board)
                running[pool.submit(self._probe, payload)] = (idx, board, probe_id, payload["job_id"])
                want -= 1

    def _usable(self, board: str) -> bool:
        if board not in self.benched:
            return True
        from bench_agent.health.state import HealthStore
        from controller import backends

        if HealthStore(backends.results_url()).get(board)["health"] in ("bad", "maintenance"):
            return False
        self.benched.discard(board)
        return True

    def _launch(self, idx: int, board: str) -> tuple[int, dict]:
        """Record build ``idx``'s job on ``board`` (held by this process, so a reader can tell when it died) and
        its probe, ``running`` until judged."""
        from controller.jobs import local, spec

        build = self.rec["builds"][idx]
        job = job_for(self.rec["job_text"], self.rec["job_path"], build)
        # on a tag a bad board's run ends at once (inconclusive) and goes to another board; one board: it waits
        skip = "skip" if len(self.boards) > 1 else None
        payload = local.create(self.results, self.lab, job, spec.compile_steps(job), board, on_unhealthy=skip)
        self.results.take(payload["job_id"], self.me, 0.0)
        self.heartbeat.add(payload["job_id"])
        probe_id = self.store.add_probe(self.id, idx, payload["job_id"], "running", f"running on {board}",
                                        target=board)
        self.show(f"bisect {self.id}: {build['name']}: job {payload['job_id']} on {board}")
        return probe_id, payload

    def _probe(self, payload: dict) -> dict:
        """Run a recorded probe job (in a thread of the round's pool); the finished job."""
        from bench_agent.jobs.runner import JobRunner
        from controller import backends
        from controller.jobs import local, spec

        runner = JobRunner(self.results, backends.lease_store(self.lab.key), self.me, lambda event, data: None,
                           self.heartbeat, local.dispatch_caller(self.lab), spec.planner(self.lab))
        try:
            runner.run(payload)
        finally:
            self.heartbeat.discard(payload["job_id"])
        return self.results.job(payload["job_id"])

    def _judge(self, idx: int, board: str | None, probe_id: int, job: dict) -> None:
        verdict, why = self._verdict(idx, job)
        if verdict == "inconclusive" and len(self.boards) > 1 and board:
            self.benched.add(board)
            self.avoid.setdefault(idx, set()).add(board)
            why += "; run again on another board"
        self.store.judge(probe_id, verdict, why)
        self.show(f"bisect {self.id}: {self._name(idx)}: job {job['id']}{f' on {board}' if board else ''} "
                  f"{verdict}: {why}")
        if verdict == "reference":
            self.refs[job["target"]] = job["id"]
            if self.rec["reference"] is None:
                self._set(reference=job["id"])
        elif 0 < idx < self.last:
            self._decide(idx)

    def _verdict(self, idx: int, job: dict) -> tuple[str, str]:
        from bench_agent.triage import signature

        passed, ref = job["result"] == "passed", self._ref(job["target"])
        if _lab_failed(job):
            return "inconclusive", _lab_why(job)
        if idx == 0 and self.rec["signature"] is None:
            if passed and job["target"] in self.refs:  # the second pass (``_learns_noise``)
                return "pass", "passed again: the lines it differs from the reference by are noise"
            if passed:
                return "reference", f"passed: failures on {job['target']} are compared with this run"
            return "unrelated", f"the good build failed: {job['reason'] or ''}".strip()
        if idx == self.last and self.rec["signature"] is None:
            if passed:
                return "pass", "the bad build passed this run"
            return "bad", _words(signature.of(self.results, job["id"], ref))
        if passed:
            return "pass", "passed"
        sig = signature.of(self.results, job["id"], ref)
        noise = self._noise(job["target"], ref)
        if signature.same(_without(self.rec["signature"], noise), _without(sig, noise)):
            return "bad", _words(sig)
        return "unrelated", f"another failure, not counted: {_words(sig)}"

    def _noise(self, board: str | None, ref: int | None) -> set[str]:
        """The lines by which a *passing* run on ``board`` diverges from its reference: no evidence of a failure
        (the reference was the board's first boot, with no earlier prompt glued to its banner; a timestamp the
        rules miss). A failure shares the bad build's only by another line."""
        from bench_agent.triage import signature

        out: set[str] = set()
        for p in self.store.get(self.id)["probes"]:
            if p["verdict"] not in ("pass", "reference") or (p.get("target") or self.rec["target"]) != board:
                continue
            if p["job_id"] not in self._passes:
                lines = set() if p["job_id"] == ref else set(signature.of(self.results, p["job_id"], ref)["lines"])
                self._passes[p["job_id"]] = lines | self._printed(p["job_id"])
            out |= self._passes[p["job_id"]]
        return out

    def _printed(self, job_id: int) -> set[str]:
        """Every line a passing job printed (its steps' output and its serial logs), normalised as a signature's
        lines are: a line a pass printed is no evidence of a failure, wherever a failing run's log happened to
        diverge by it (a firmware line the reference's window began after, under load: "Network boot:
        disabled", shared by the bad build's runs and a flake's, named a good build the first bad)."""
        from bench_agent.triage import compare, logalign

        job = self.results.job(job_id)
        rules = logalign.Rules((job["spec"].get("triage") or {}).get("ignore", ()))
        texts = [line for s in job["steps"] for line in compare.output_lines(s.get("output") or "")]
        arts = self.results.list_artifacts(job_id)
        texts += [compare.bare(line).strip() for name in arts if name.startswith("serial-") and name.endswith(".log")
                  for line in arts[name].splitlines()]
        return set(logalign.normalise([t.strip() for t in texts if t.strip()], rules))

    def _decide(self, idx: int) -> None:
        """Narrow the range once build ``idx`` is decided (``narrowed``)."""
        verdicts = [p["verdict"] for p in self._runs(idx)]
        good, bad = narrowed(self.rec["good"], self.rec["bad"], idx, verdicts, self.rec["repeat"])
        if (good, bad) == (self.rec["good"], self.rec["bad"]):
            return
        self._set(good=good, bad=bad)
        verdict = "bad" if bad == idx else "good"
        self.show(f"bisect {self.id}: {self._name(idx)} is {verdict}; first bad is among "
                  f"{self._name(self.rec['good'] + 1)}..{self._name(self.rec['bad'])}")

    def _runs(self, idx: int) -> list[dict]:
        """This build's judged probes so far (a resumed bisection counts the ones made before it stopped)."""
        return [p for p in self.store.get(self.id)["probes"] if p["build"] == idx and p["verdict"] != "running"]

    def _bad_failure(self) -> None:
        from bench_agent.triage import signature

        found = [signature.of(self.results, p["job_id"], self._ref(p.get("target")))
                 for p in self._runs(self.last) if p["verdict"] == "bad"]
        if not found:
            raise UsageError(f"the bad build {self._name(self.last)!r} passed {self.rec['repeat']} runs",
                             hint="give a --bad build that fails this job")
        # the failure most of its failing runs had (an unrelated flake among them does not decide), by the lines
        # all of those runs share: a line one run diverged by as it happened (a late capture, a slow boot under
        # load) is no part of the failure, and would match a flake that happened to diverge by it too
        best = max(found, key=lambda s: sum(signature.same(s, o) for o in found))
        agreeing = [set(s["lines"]) for s in found if signature.same(best, s)]
        core = set.intersection(*agreeing) if agreeing else set()
        self._set(signature={**best, "lines": sorted(core)} if core else best)

    def _budget(self, idx: int) -> None:
        runs = [p for p in self._runs(idx) if p["id"] not in self.earlier]
        wasted = sum(p["verdict"] in ("inconclusive", "unrelated") for p in runs)
        if wasted >= self.retries:
            raise Undecided(f"build {self._name(idx)!r} could not be judged: {wasted} probes were inconclusive "
                            f"or failed another way", hint=f"fix the lab, then `panio bisect resume {self.id}`",
                            bisect=self.id, build=self._name(idx))


def _without(sig: dict[str, Any], lines: set[str]) -> dict[str, Any]:
    return {**sig, "lines": [line for line in sig.get("lines") or [] if line not in lines]}


def narrowed(good: int, bad: int, idx: int, verdicts: list[str], repeat: int) -> tuple[int, int]:
    """The range (``good``, ``bad``) once build ``idx`` has the judged runs ``verdicts``: a build between the
    last good and the first bad is bad once one of its runs is, good once ``repeat`` of its runs passed; any
    other build (the good and the bad build's own runs, or one already outside the range) narrows nothing.
    The one rule the bisection decides by and the dashboard replays its steps with."""
    if not good < idx < bad:
        return good, bad
    if "bad" in verdicts:
        return good, idx
    if verdicts.count("pass") >= repeat:
        return idx, bad
    return good, bad


def split(good: int, bad: int, boards: int, repeat: int) -> list[int]:
    """The builds a round probes between ``good`` and ``bad``: ``m = boards // repeat`` of them (at least one),
    splitting the range in ``m + 1`` equal parts, so each has ``repeat`` boards and the round takes one probe's
    time (on one board: the middle one, a binary search)."""
    m = min(max(1, boards // repeat), bad - good - 1)
    return sorted({good + (bad - good) * j // (m + 1) for j in range(1, m + 1)} - {good, bad})


def boards(lab, rec: dict) -> list[str]:
    """The boards a bisection's probes run on: its target, or every target of its tag."""
    if not rec.get("tag"):
        lab.target(rec["target"])
        return [rec["target"]]
    found = sorted(name for name, t in lab.targets.items() if rec["tag"] in t.get("tags", []))
    if not found:
        from bench_agent.errors import NotConfigured

        raise NotConfigured(f"no target in {lab.path} carries tag {rec['tag']!r}",
                            hint="tag boards with `panio target set NAME --tag TAG`", tag=rec["tag"])
    return found


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
    out = {k: rec.get(k) for k in ("id", "state", "target", "tag", "job_path", "repeat", "reason", "signature",
                                   "reference")}
    out["builds"] = [b["name"] for b in builds]
    out["good"], out["bad"] = builds[rec["good"]]["name"], builds[rec["bad"]]["name"]
    out["first_bad"] = out["bad"] if rec["state"] == "done" else None
    out["remaining"] = [b["name"] for b in builds[rec["good"] + 1:rec["bad"]]]
    probes = [{"build": builds[p["build"]]["name"], "job_id": p["job_id"], "target": p.get("target"),
               "verdict": p["verdict"], "why": p["why"], "at": p["at"]} for p in rec["probes"]]
    out["probes"] = [p for p in probes if p["verdict"] != "running"]  # the evidence: judged probes
    out["running"] = [p for p in probes if p["verdict"] == "running"]  # probe jobs not judged yet
    refs = {0, len(builds) - 1}
    out["bisection_probes"] = len({p["build"] for p in rec["probes"]} - refs)
    return out
