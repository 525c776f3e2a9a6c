"""The time each test module took, printed at the end of every run (slowest first, with the total): where
the suite's time goes, so the slow modules are the first to share clusters or lose duplicate work."""

from __future__ import annotations

from collections import defaultdict

import pytest

SHOWN = 15
"""Modules listed at most (the rest are summed in one line)."""

_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add a test's setup, call and teardown time (seconds) to its module's."""
    _seconds[report.nodeid.split("::", 1)[0]] += report.duration


def module_lines(seconds: dict[str, float], shown: int = SHOWN) -> list[str]:
    """``seconds`` per module as lines, slowest first: at most ``shown`` modules, then one line for the
    rest, then the total (seconds with one decimal, and minutes)."""
    ranked = sorted(seconds.items(), key=lambda kv: -kv[1])
    lines = [f"{s:9.1f} s  {name}" for name, s in ranked[:shown]]
    rest = ranked[shown:]
    if rest:
        lines.append(f"{sum(s for _, s in rest):9.1f} s  ({len(rest)} more modules)")
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
