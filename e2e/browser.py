"""A headless Chromium driven by Selenium for the end-to-end tests of the dashboard page: Debian's
``chromium`` and its ``chromedriver`` (``chromium-driver``, the same version), installed with apt-get
when missing, as :func:`localcluster.realnode.node.ensure_packages` installs containerd."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

PACKAGES = ("chromium", "chromium-driver")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def unavailable() -> str | None:
    """Why no browser can run here (one line), None when it can or apt-get can install it."""
    if all(os.path.exists(p) for p in (CHROMIUM, CHROMEDRIVER)):
        return None
    if not shutil.which("apt-get") or os.geteuid() != 0:
        return "chromium and chromium-driver are missing and cannot be installed (apt-get as root)"
    return None


def ensure_chromium() -> None:
    """Install Debian's packages of :data:`PACKAGES` that are missing."""
    missing = [p for p in PACKAGES if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if missing:
        print(f"[browser] apt-get install {' '.join(missing)}", file=sys.stderr, flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdout=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env, stdout=sys.stderr)


@contextmanager
def chromium(width: int = 1280, height: int = 1400) -> Iterator[webdriver.Chrome]:
    """A headless Chromium window of ``width`` x ``height`` pixels, closed after use."""
    ensure_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
