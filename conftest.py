"""The time each test module took, printed at the end of every run (every e2e module, slowest first, the
others summed per folder, and the total): where the suite's time goes, so the slow modules are the first
to share clusters or lose duplicate work."""

from __future__ import annotations

from collections import defaultdict

import pytest

LISTED = "e2e/"
"""Modules under this folder are listed one by one; the others are summed per top-level folder."""

_seconds: defaultdict[str, float] = defaultdict(float)


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
    """Print :func:`module_lines` of this run."""
    if not _seconds:
        return
    terminalreporter.section("time per module")
    for line in module_lines(dict(_seconds)):
        terminalreporter.write_line(line)
