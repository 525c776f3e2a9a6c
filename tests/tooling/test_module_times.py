"""How a whole test run is laid out and told (the root ``conftest.py``): the lanes' groups and the
time-per-module summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REAL_NODES_GROUP, lane_group, machine_cpu_seconds, module_lines, tree_cpu_seconds

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


def test_with_cpu_seconds_each_line_has_its_modules_cpu_beside_its_time() -> None:
    seconds = {"e2e/a.py": 10.0, "tests/c.py": 1.0, "tests/x/d.py": 20.0}
    cpu = {"e2e/a.py": 4.0, "tests/c.py": 1.5, "tests/x/d.py": 30.0}
    assert module_lines(seconds, cpu=cpu) == [
        "     21.0 s       31.5 s CPU  tests/ (2 modules)",
        "     10.0 s        4.0 s CPU  e2e/a.py",
        "     31.0 s       35.5 s CPU  total (0.5 min, 3 modules)",
    ]


BURN = """
import sys, time
start = time.process_time()
while time.process_time() - start < 0.5:
    pass
print("burnt", flush=True)
time.sleep(60)
"""


def test_a_descendants_cpu_counts_while_it_runs_and_after_it_is_reaped() -> None:
    before = tree_cpu_seconds()
    # a grandchild: the shell between is its parent, this process its grandparent
    shell = subprocess.Popen(["sh", "-c", 'python3 -c "$0"; :', BURN], stdout=subprocess.PIPE, text=True)
    try:
        assert shell.stdout is not None and shell.stdout.readline().strip() == "burnt"
        running = tree_cpu_seconds()
        assert running - before >= 0.45
        assert 0.45 <= tree_cpu_seconds(shell.pid) < 1.5  # the shell's tree: the burner, not this process
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(shell.pid)], check=False)
        shell.wait()
    assert tree_cpu_seconds() >= running - 0.01  # reaped by the shell, then the shell by this process


def test_the_machine_is_busy_no_more_than_in_all() -> None:
    busy, total = machine_cpu_seconds()
    assert 0 < busy < total


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
    assert " s CPU  tests/ (1 module)" in out.stdout and "CPU of the machine meanwhile" in out.stdout


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
    stdout = lanes_run(
        2, "tests/tooling/test_module_times.py", "-k", "slowest_first or shares_one_lane_group or descendants_cpu"
    )
    lanes = {line.split("]", 1)[0] for line in stdout.splitlines() if line.startswith("[gw") and "PASSED" in line}
    assert len(lanes) == 1, stdout  # one module: one lane
    assert "scheduling tests via ModuleLanes" in stdout
    assert "3 passed" in stdout and "wall clock" in stdout
    line = next(x for x in stdout.splitlines() if x.endswith("tests/ (1 module)"))
    assert float(line.split(" s CPU")[0].split()[-1]) >= 0.45, line  # the burner's CPU, counted in its lane
