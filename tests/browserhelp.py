"""Headless Chromium for the dashboard's browser tests (one place for its flags, paths and skip rule)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
needs_chromium = pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
                                    reason="chromium and chromium-driver (scripts/system-deps.sh installs them)")


def chromium(tmp_path: Path, size: str):
    """A headless Chromium driver with a private profile in ``tmp_path`` and a ``size`` (``W,H``) window; quit after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 f"--window-size={size}", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()
