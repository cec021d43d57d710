"""The drift guard (``panio-eval --check``): references and SAFE keys vs the live tree.

* a reference command, flag or SAFE key that panio does not have, and that is
  not announced in ``catalog/_planned.toml``, is drift: the check fails;
* a scenario whose required reference needs an announced-but-absent command is
  *pending*, with the missing commands named: neither skipped nor passed;
* once the command appears in the live tree, its flags are checked too and the
  scenario is run like any other.
Helper pass-through arguments (``panio helper NAME ARGS…``) are opaque.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scenarios.safe import SAFE
from scenarios.scenario import Scenario, load_all
from scenarios.surface import Surface, parse, planned_spec

SEED_IDS = ([f"C{i}" for i in range(1, 9)] + [f"R{i}" for i in range(1, 11)]
            + [f"s{i}" for i in range(1, 12)] + [f"M{i}" for i in range(1, 6)])
PATTERN_KINDS = ("order", "sequence", "require")


@dataclass
class DriftReport:
    errors: list[str] = field(default_factory=list)
    pending: dict[str, list[str]] = field(default_factory=dict)  # scenario id -> missing commands
    waiting: dict[str, list[str]] = field(default_factory=dict)  # optional steps waiting on a command
    safe_pending: list[str] = field(default_factory=list)
    checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict:
        return {"ok": self.ok, "errors": self.errors, "pending": self.pending, "waiting": self.waiting,
                "safe_pending": self.safe_pending, "scenarios_checked": self.checked}


class Guard:
    def __init__(self, live: Surface | None = None) -> None:
        self.live = live or Surface.live()
        self.planned = self.live.overlay(planned_spec())

    def missing(self, argv: list[str]) -> str | None:
        """The announced command ``argv`` needs that the live tree lacks, else None."""
        p = parse(self.live, argv, strict=False)
        if p.status != "invented_command":
            return None
        q = parse(self.planned, argv, strict=False)
        return None if q.status == "invented_command" else q.command

    def check_line(self, where: str, pattern: list[str], full: bool, report: DriftReport) -> str | None:
        """Check one reference line; returns the missing announced command, if any."""
        argv = pattern[:-1] if pattern[-1:] == ["*"] else pattern
        p = parse(self.live, argv, strict=False)
        if p.status == "invented_command":
            q = parse(self.planned, argv, strict=False)
            if q.status == "invented_command":
                report.errors.append(f"{where}: `panio {p.missing}` is not a panio command (nor announced)")
                return None
            return q.command
        if p.status == "invented_flag" or (full and p.status in ("convention", "malformed")):
            report.errors.append(f"{where}: {p.problem}")
        return None

    def check_scenario(self, sc: Scenario, report: DriftReport) -> None:
        need: list[str] = []
        wait: list[str] = []
        for i, step in enumerate(sc.reference, 1):
            lines = [("cmd", step.argv)] + [("match", p) for p in (step.patterns()[:1] if step.match else [])]
            lines += [("alt", p) for p in step.patterns()[1:]]
            for label, argv in lines:
                miss = self.check_line(f"{sc.id} reference {i} ({label})", argv, label != "match", report)
                if miss:
                    (wait if step.optional or label == "alt" else need).append(miss)
            if step.tier == "t1" and sc.tier == "t1" and any(t.startswith("<") for t in step.argv):
                report.errors.append(f"{sc.id} reference {i}: a t1 step is executed and cannot hold placeholders")
        for trap in sc.traps:
            c = trap.check or {}
            if c.get("kind") in PATTERN_KINDS:
                for key in ("cmd", "first", "then"):
                    for pat in _as_list(c.get(key, [])):
                        from scenarios.matching import pattern_argv

                        miss = self.check_line(f"{sc.id} trap {trap.id}", pattern_argv(pat), False, report)
                        if miss:
                            wait.append(miss)
        for j, step in enumerate((sc.hardware or {}).get("steps", []), 1):
            import shlex

            argv = shlex.split(step["run"].replace("${target}", "board0"))
            argv = argv[1:] if argv[:1] == ["panio"] else argv
            miss = self.check_line(f"{sc.id} hardware step {j}", argv, True, report)
            if miss:
                wait.append(miss)
        if need:
            report.pending[sc.id] = sorted(set(need))
        if wait:
            report.waiting[sc.id] = sorted(set(wait) - set(need))
            if not report.waiting[sc.id]:
                del report.waiting[sc.id]

    def check_safe(self, report: DriftReport) -> None:
        for key in SAFE:
            argv = key.split()
            if self.live.find(argv) is not None:
                continue
            if self.planned.find(argv) is not None:
                report.safe_pending.append(key)
            else:
                report.errors.append(f"SAFE allowlist: `panio {key}` is not a panio command (nor announced)")

    def run(self, scenarios: list[Scenario] | None = None) -> DriftReport:
        report = DriftReport()
        if scenarios is None:  # the whole catalog: it must cover the seed
            scenarios = load_all()
            ids = {s.id for s in scenarios}
            report.errors += [f"catalog: seed scenario {sid} has no fixture" for sid in SEED_IDS if sid not in ids]
            self.check_equivalences(report)
        for sc in scenarios:
            self.check_scenario(sc, report)
            report.checked += 1
        self.check_safe(report)
        return report

    def check_equivalences(self, report: DriftReport) -> None:
        """catalog/_equivalences.toml: each `means` and step is a real command (issue 40)."""
        from scenarios.meaning import equivalences

        for eq in equivalences():
            for label, argv in [("means", list(eq.means))] + [("sequence", list(s)) for s in eq.sequence]:
                miss = self.check_line(f"equivalence {eq.id} ({label})", [t for t in argv if t != "*"], False, report)
                if miss:
                    report.errors.append(f"equivalence {eq.id}: `panio {miss}` has not landed")

    def groups(self) -> list[str]:
        """Commands with subcommands (live or announced): the shim needs them to find a path."""
        return sorted(name for name, node in self.planned.root.children.items() if node.children)


def _as_list(v) -> list[str]:
    return [v] if isinstance(v, str) else list(v)
