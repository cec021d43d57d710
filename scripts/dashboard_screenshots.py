"""Make the dashboard's screenshots in docs/img/ from its browser tests, so the docs show what the tests see.

    .venv/bin/python scripts/dashboard_screenshots.py

Runs tests/test_dashboard_browser.py (headless Chromium on a simulated bench: chromium and chromium-driver, see
scripts/system-deps.sh) with $PANIO_TEST_ARTIFACTS set to a scratch directory, then copies the screenshots the
docs use to docs/img/dashboard-NAME.png. Exit status: pytest's when the tests fail (nothing is copied), 0 otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"
SHOTS = {"board": "board", "job-definition": "job-definition", "serial-search": "serial-search",  # test's: docs'
         "triage-last-words": "triage-last-words", "02-job-running": "job-running", "bisect": "bisect"}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="panio-shots-") as scratch:
        env = {**os.environ, "PANIO_TEST_ARTIFACTS": scratch}
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "tests/test_dashboard_browser.py"], cwd=ROOT, env=env)
        if run.returncode != 0:
            return run.returncode
        OUT.mkdir(exist_ok=True)
        for shot, name in SHOTS.items():
            shutil.copy(Path(scratch) / "dashboard" / f"{shot}.png", OUT / f"dashboard-{name}.png")
            print(f"docs/img/dashboard-{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
