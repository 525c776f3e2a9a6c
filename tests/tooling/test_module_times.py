"""How a whole test run is laid out and told (the root ``conftest.py``): the lanes' groups and the
time-per-module summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REAL_NODES_GROUP, lane_group, module_lines

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


def test_every_module_that_runs_real_nodes_shares_one_lane_group_and_every_other_module_has_its_own() -> None:
    assert lane_group("e2e/test_real_pods.py::test_a") == REAL_NODES_GROUP
    assert lane_group("e2e/test_katib.py::test_b[x::y]") == REAL_NODES_GROUP
    assert lane_group("e2e/test_incluster.py::Test::test_c") == REAL_NODES_GROUP
    assert lane_group("e2e/test_cli.py::test_d") == "e2e/test_cli.py"  # it names "unavailable" in a string
    assert lane_group("e2e/test_cli.py::test_d[x::y]") == "e2e/test_cli.py"
    assert lane_group("tests/tooling/test_module_times.py::test_e") == "tests/tooling/test_module_times.py"
    assert lane_group("e2e/no_such_module.py::test_f") == "e2e/no_such_module.py"


def lanes_run(lanes: int, *args: str, env: dict[str, str] | None = None) -> str:
    """What ``pytest -v -n LANES -p no:cacheprovider ARGS...`` prints, run at the repository's root (it
    must pass)."""
    command = [sys.executable, "-m", "pytest", "-v", "-n", str(lanes), "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout


def test_a_run_in_two_lanes_runs_each_module_whole_in_one_lane_and_ends_with_its_wall_clock() -> None:
    stdout = lanes_run(2, "tests/tooling/test_module_times.py", "-k", "not two_lanes and not a_run_prints")
    lanes = {line.split("]", 1)[0] for line in stdout.splitlines() if line.startswith("[gw") and "PASSED" in line}
    assert len(lanes) == 1, stdout  # one module: one lane
    assert "scheduling tests via ModuleLanes" in stdout
    assert "2 passed" in stdout and "wall clock" in stdout
