"""The time-per-module summary printed at the end of a test run (the root ``conftest.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import module_lines

ROOT = Path(__file__).resolve().parents[2]


def test_modules_are_listed_slowest_first_with_the_rest_summed_and_the_total() -> None:
    lines = module_lines({"e2e/a.py": 10.0, "e2e/b.py": 100.0, "tests/c.py": 1.0, "tests/d.py": 2.0}, shown=2)
    assert lines == [
        "    100.0 s  e2e/b.py",
        "     10.0 s  e2e/a.py",
        "      3.0 s  (2 more modules)",
        "    113.0 s  total (1.9 min, 4 modules)",
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
            "tests/tooling/test_module_times.py::test_modules_are_listed_slowest_first_with_the_rest_summed_and_the_total",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "time per module" in out.stdout
    assert "tests/tooling/test_module_times.py" in out.stdout and "total (" in out.stdout
