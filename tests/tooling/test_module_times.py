"""The time-per-module summary printed at the end of a test run (the root ``conftest.py``)."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import REAL_NODES_GROUP, module_lines, pytest_collection_modifyitems
from localcluster.realnode import node as realnode

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


class _Item:
    """What the lane hook reads of a collected test: its module, node id and the marks added."""

    def __init__(self, module: object, nodeid: str) -> None:
        self.module, self.nodeid, self.marks = module, nodeid, list[pytest.Mark]()

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.mark)


def test_modules_that_run_real_nodes_share_one_lane_group_and_every_other_module_has_its_own() -> None:
    real, kwok = types.ModuleType("e2e.test_real"), types.ModuleType("e2e.test_cli")
    real.WHY_NOT, real.unavailable = None, realnode.unavailable  # type: ignore[attr-defined]
    items = [
        _Item(real, "e2e/test_real_pods.py::test_a"),
        _Item(real, "e2e/test_torchtune_real.py::test_b"),
        _Item(kwok, "e2e/test_cli.py::test_c"),
        _Item(kwok, "e2e/test_cli.py::test_d[x::y]"),
        _Item(sys.modules[__name__], "tests/tooling/test_module_times.py::test_e"),
    ]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    groups = [[(m.name, m.args) for m in item.marks] for item in items]
    assert groups == [
        [("xdist_group", (REAL_NODES_GROUP,))],
        [("xdist_group", (REAL_NODES_GROUP,))],
        [("xdist_group", ("e2e/test_cli.py",))],
        [("xdist_group", ("e2e/test_cli.py",))],
        [("xdist_group", ("tests/tooling/test_module_times.py",))],
    ]
