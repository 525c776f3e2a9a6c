"""The time-per-module summary printed at the end of a test run (the root ``conftest.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import module_lines

ROOT = Path(__file__).resolve().parents[2]


def test_every_e2e_module_is_listed_slowest_first_the_others_summed_per_folder_and_the_total() -> None:
    seconds = {"e2e/a.py": 10.0, "e2e/b.py": 100.0, "tests/c.py": 1.0, "tests/x/d.py": 20.0, "e2e/c.py": 0.5}
    assert module_lines(seconds) == [
        "    100.0 s  e2e/b.py",
        "     21.0 s  tests/ (2 modules)",
        "     10.0 s  e2e/a.py",
        "      0.5 s  e2e/c.py",
        "    131.5 s  total (2.2 min, 5 modules)",
    ]


def test_a_run_prints_the_time_of_its_modules() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/tooling/test_module_times.py::test_every_e2e_module_is_listed_slowest_first_the_others_summed_per_folder_and_the_total",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "time per module" in out.stdout
    assert "tests/ (1 module)" in out.stdout and "total (0.0 min, 1 modules)" in out.stdout
