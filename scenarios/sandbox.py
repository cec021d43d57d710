"""A per-trial sandbox: its own HOME, cwd, lab file, state dir and a panio shim.

The shim is first on PATH. It records every panio argv and its exit status
(one JSON line each in ``argv.jsonl``), refuses anything outside the T1-safe
set when the trial is config-only (fail closed: exit 13, nothing run), and
otherwise execs the real panio. It is a measurement device, not a security
boundary: an agent that calls the real binary by absolute path escapes the log
(and the grader then sees no command at all).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SHIM = '''#!{python}
import json, os, subprocess, sys, time
conf = json.load(open({conf!r}))
argv = sys.argv[1:]
rec = {{"argv": argv, "t": time.time()}}
reason = None
if conf["safe_only"]:
    sys.path.insert(0, conf["pkg_root"])
    from scenarios.safe import classify
    reason = classify(argv, set(conf["groups"]), conf["lab"])
if reason:
    sys.stderr.write("panio: refused by panio-eval: " + reason + " (this trial is config-only)\\n")
    sys.stderr.write(json.dumps({{"error": "refused", "exit": 13, "message": reason}}) + "\\n")
    rec.update(exit=13, refused=reason)
    status = 13
else:
    try:
        status = subprocess.run([conf["real"], *argv]).returncode
    except KeyboardInterrupt:
        status = 130
    rec["exit"] = status
with open(conf["log"], "a") as f:
    f.write(json.dumps(rec) + "\\n")
sys.exit(status)
'''


def real_panio() -> str:
    """The panio executable under test: $PANIO_EVAL_PANIO, else beside this python, else on PATH."""
    env = os.environ.get("PANIO_EVAL_PANIO")
    if env:
        return env
    beside = Path(sys.executable).parent / "panio"
    if beside.exists():
        return str(beside)
    found = shutil.which("panio")
    if not found:
        raise FileNotFoundError("no panio executable found (set PANIO_EVAL_PANIO)")
    return found


@dataclass
class Sandbox:
    root: Path
    safe_only: bool = True
    cli: bool = True  # False (the mcp condition): no panio on PATH; the agent has `panio mcp` instead

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()  # PATH and PANIO_LAB must not depend on the agent's cwd

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def cwd(self) -> Path:
        return self.root / "work"

    @property
    def lab(self) -> Path:
        return self.root / "lab.toml"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def log(self) -> Path:
        return self.root / "argv.jsonl"

    def create(self, fixture_lab: str | None, groups: list[str]) -> "Sandbox":
        for d in (self.home, self.cwd, self.bin, self.root / "state"):
            d.mkdir(parents=True, exist_ok=True)
        real = real_panio()
        conf = {"real": real, "log": str(self.log), "pkg_root": str(Path(__file__).resolve().parent.parent),
                "safe_only": self.safe_only, "groups": groups, "lab": str(self.lab)}
        (self.root / "shim.json").write_text(json.dumps(conf))
        shim = self.bin / "panio"
        shim.write_text(SHIM.format(python=sys.executable, conf=str(self.root / "shim.json")))
        shim.chmod(0o755)
        self.log.touch()
        if fixture_lab is None:
            subprocess.run([real, "init"], env=self.env(), capture_output=True, check=True, timeout=30)
        else:
            self.lab.write_text(fixture_lab, encoding="utf-8")
        (self.root / "lab.seed.toml").write_text(self.lab.read_text(encoding="utf-8"), encoding="utf-8")
        self._login_profiles()
        return self

    def _login_profiles(self) -> None:
        """A login shell (Codex runs `bash -lc`) resets PATH in /etc/profile; put the shim's PATH back."""
        import shlex

        line = f"export PATH={shlex.quote(self.env()['PATH'])}\n"
        for name in (".profile", ".bash_profile", ".zprofile", ".bashrc", ".zshenv"):
            (self.home / name).write_text("# panio-eval: the trial's PATH, shim first\n" + line)

    def env(self, base: dict | None = None) -> dict:
        base = dict(os.environ if base is None else base)
        real_dir = str(Path(real_panio()).parent)
        path = [str(self.bin)] * self.cli + [p for p in base.get("PATH", "").split(os.pathsep) if p and p != real_dir]
        base.update(PATH=os.pathsep.join(path), HOME=str(self.home), PANIO_LAB=str(self.lab),
                    PANIO_STATE_DIR=str(self.root / "state"), XDG_CONFIG_HOME=str(self.home / ".config"),
                    XDG_STATE_HOME=str(self.home / ".local" / "state"))
        for k in ("PANIO_DEBUG", "PANIO_BROKER"):
            base.pop(k, None)
        return base

    def mcp_server(self) -> dict:
        """The stdio server the mcp condition registers: the real panio, this trial's lab and state (by flag and env)."""
        env = {k: v for k, v in self.env().items() if k.startswith("PANIO_") or k in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")}
        return {"command": real_panio(), "args": ["--lab", str(self.lab), "mcp"], "env": env}

    def run_panio(self, argv: list[str], timeout_s: float = 30) -> subprocess.CompletedProcess:
        """Run one panio command the way an agent would: through the shim, no shell."""
        for attempt in range(20):
            try:
                return subprocess.run([str(self.bin / "panio"), *argv], env=self.env(), cwd=self.cwd,
                                      capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
            except OSError as exc:
                # ETXTBSY: another thread forked while this shim was open for writing; the child closes
                # that inherited descriptor as soon as it execs, so a short retry is enough.
                if exc.errno != errno.ETXTBSY or attempt == 19:
                    raise
                time.sleep(0.05)
        raise AssertionError("unreachable")

    def records(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def seed_text(self) -> str:
        return (self.root / "lab.seed.toml").read_text(encoding="utf-8")
