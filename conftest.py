"""How a whole test run is laid out and told:

- **Lanes.** ``make test`` runs the suite in two processes (pytest-xdist, ``-n 2 --dist loadgroup``): the
  end-to-end modules mostly wait on clusters and pods, so two lanes keep both cores busy. Each module runs
  whole in one lane (its module-scoped clusters and operator are made once), and every module that runs
  real nodes runs in one lane, one after the other (:data:`REAL_NODES_GROUP`): a machine has one pod
  network for real nodes. Such a module is known by asking whether real nodes can run here (it holds
  :func:`localcluster.realnode.node.unavailable`). Each lane starts its own session cluster when a module
  needs it.
- **Time per module**, printed at the end of every run (every e2e module, slowest first, the others summed
  per folder, the total and the wall clock): where the suite's time goes, so the slow modules are the
  first to share clusters or lose duplicate work.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from localcluster.realnode.node import unavailable

REAL_NODES_GROUP = "realnodes"
"""The lane group (``xdist_group``) of every module that runs real nodes."""

LISTED = "e2e/"
"""Modules under this folder are listed one by one; the others are summed per top-level folder."""

_seconds: defaultdict[str, float] = defaultdict(float)
_started = time.monotonic()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put each test in its lane group (see the module's docstring): :data:`REAL_NODES_GROUP` when its module
    runs real nodes, else its module's path. Only ``--dist loadgroup`` reads the groups."""
    for item in items:
        module = getattr(item, "module", None)
        real = module is not None and any(value is unavailable for value in vars(module).values())
        item.add_marker(pytest.mark.xdist_group(REAL_NODES_GROUP if real else item.nodeid.split("::", 1)[0]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add a test's setup, call and teardown time (seconds) to its module's."""
    _seconds[report.nodeid.split("::", 1)[0]] += report.duration


def module_lines(seconds: dict[str, float], listed: str = LISTED) -> list[str]:
    """``seconds`` per module as lines, slowest first: every module under ``listed`` (the end-to-end
    modules, where a cluster's time goes), one line per other top-level folder with its modules summed,
    then the total (seconds with one decimal, and minutes)."""
    shown: dict[str, float] = {}
    folders: defaultdict[str, list[float]] = defaultdict(list)
    for name, s in seconds.items():
        if name.startswith(listed):
            shown[name] = s
        else:
            folders[name.split("/", 1)[0] + "/" if "/" in name else name].append(s)
    for folder, times in folders.items():
        shown[f"{folder} ({len(times)} module{'s' if len(times) > 1 else ''})"] = sum(times)
    lines = [f"{s:9.1f} s  {name}" for name, s in sorted(shown.items(), key=lambda kv: -kv[1])]
    total = sum(seconds.values())
    lines.append(f"{total:9.1f} s  total ({total / 60:.1f} min, {len(seconds)} modules)")
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print :func:`module_lines` of this run and its wall clock (less than the total when lanes ran side
    by side)."""
    if not _seconds:
        return
    terminalreporter.section("time per module")
    for line in module_lines(dict(_seconds)):
        terminalreporter.write_line(line)
    wall = time.monotonic() - _started
    terminalreporter.write_line(f"{wall:9.1f} s  wall clock ({wall / 60:.1f} min)")
