"""How a whole test run is laid out and told:

- **Lanes.** ``make test`` runs the suite in two processes (pytest-xdist, ``-n 2``) with the scheduler
  :class:`ModuleLanes`: the end-to-end modules mostly wait on clusters and pods, so one lane alone keeps the
  2 cores about half busy. Each module runs whole in one lane (its module-scoped clusters and operator are
  made once), and every module that runs real nodes runs in one lane, one after the other, first
  (:data:`REAL_NODES_GROUP`; a machine has one pod network for real nodes). Each lane starts its own
  session cluster when a module needs it. Without ``-n`` a run is one process, as before.
- **Builds beside the run last.** On a machine where ``make test`` still builds components beside the run
  (:data:`localcluster.prebuild.BUILDING_BESIDE`), the modules that need one of them (their ``builds``
  mark; every e2e module waits for the session cluster's) run after the others, in the order those builds
  end (:func:`builds_last`), so a lane waits for a build only when nothing else is left to run.
- **Time per module**, printed at the end of every run (every e2e module, slowest first, the others summed
  per folder, the total and the wall clock), each with the CPU seconds its lane's processes used meanwhile
  (:func:`tree_cpu_seconds`): where the suite's time goes, so the slow modules are the first to share
  clusters or lose duplicate work; on a machine that still builds, where its CPU goes, which the builds
  beside the run wait for.
"""

from __future__ import annotations

import ast
import functools
import os
import time
from collections import defaultdict
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

from localcluster.prebuild import BUILDING_BESIDE, SESSION_CLUSTER

ROOT = Path(__file__).resolve().parent

REAL_NODES_GROUP = "real nodes"
"""The one lane group of every module that runs real nodes."""
REAL_NODES_MODULE, REAL_NODES_MARK = "localcluster.realnode.node", "unavailable"
"""A module runs real nodes when it imports this name from this module (every such module asks whether real
nodes can run here before it starts them)."""

E2E = "e2e/"
"""The end-to-end modules' folder: each of them starts the session cluster (so waits for its components while
they build), and each is listed one by one in the time per module (the others summed per top-level folder)."""

_seconds: defaultdict[str, float] = defaultdict(float)
_cpu: defaultdict[str, float] = defaultdict(float)
_started = time.monotonic()
_cpu_mark: list[float] = []
"""This lane's :func:`tree_cpu_seconds` at the end of its last module (before its first: after collecting)."""
CPU_SECONDS = "cpu_seconds"
"""The ``user_properties`` key of the CPU seconds a module's lane used from the end of its previous module."""


def machine_cpu_seconds() -> tuple[float, float]:
    """CPU seconds the machine has spent busy (every state of the first line of ``/proc/stat`` but idle and
    iowait) and in all, summed over its cores since boot; (0.0, 0.0) where ``/proc/stat`` cannot be read."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - ticks[3] - ticks[4]) / tick, sum(ticks) / tick


_machine_started = machine_cpu_seconds()


def tree_cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user and system) of process ``pid`` (this one by default), of the children it waited
    for, and of every live descendant with the children each waited for (Linux ``/proc/<pid>/stat``, fields
    ``ppid``, ``utime``, ``stime``, ``cutime``, ``cstime``). A descendant that left the tree before it ended
    (a daemon, re-parented to init) is counted no further. 0.0 where ``/proc`` cannot be read."""
    root = os.getpid() if pid is None else pid
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    own: dict[int, float] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return 0.0
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        parent[int(entry)] = int(fields[1])
        own[int(entry)] = sum(int(x) for x in fields[11:15]) / tick
    tree, frontier = {root}, [root]
    children: defaultdict[int, list[int]] = defaultdict(list)
    for p, pp in parent.items():
        children[pp].append(p)
    while frontier:
        for child in children[frontier.pop()]:
            if child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(own.get(p, 0.0) for p in tree)


@functools.cache
def module_tree(module: str) -> ast.Module | None:
    """The syntax tree of the test module at ``module`` (a path relative to the repository's root, as a
    node id starts), parsed once: the scheduling process collects no test, so what it needs of a module
    it reads from its source. None for a path that is not a Python file here."""
    path = ROOT / module
    if path.suffix != ".py" or not path.is_file():
        return None
    return ast.parse(path.read_text(), str(path))


@functools.cache
def runs_real_nodes(module: str) -> bool:
    """Whether the test module at ``module`` imports :data:`REAL_NODES_MARK` from :data:`REAL_NODES_MODULE`
    (:func:`module_tree`; False for a path that is not a Python file here)."""
    tree = module_tree(module)
    return tree is not None and any(
        isinstance(node, ast.ImportFrom)
        and node.module == REAL_NODES_MODULE
        and any(alias.name == REAL_NODES_MARK for alias in node.names)
        for node in ast.walk(tree)
    )


def lane_group(nodeid: str) -> str:
    """The lane group of the test ``nodeid``: :data:`REAL_NODES_GROUP` when its module runs real nodes
    (:func:`runs_real_nodes`), else its module's path."""
    module = nodeid.split("::", 1)[0]
    return REAL_NODES_GROUP if runs_real_nodes(module) else module


BUILDS_MARK = "builds"
"""``@pytest.mark.builds("helm", ...)``: the ``localcluster/build.sh`` components a module needs beyond every
cluster's and the session cluster's (Volcano, Kueue)."""


def waits_for(components: Iterable[str], building: Sequence[str]) -> int:
    """The position in ``building`` (components built beside the run, in order) of the last of
    ``components`` it builds; -1 when it builds none of them."""
    return max((building.index(c) for c in components if c in building), default=-1)


@functools.cache
def module_builds(module: str) -> tuple[str, ...]:
    """The components the test module at ``module`` names in its ``pytest.mark.builds(...)`` marks
    (:func:`module_tree`; none for a path that is not a Python file here)."""
    tree = module_tree(module)
    return tuple(
        arg.value
        for node in (ast.walk(tree) if tree is not None else ())
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == BUILDS_MARK
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "mark"
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    )


def builds_last(workqueue: dict[str, dict[str, bool]], building: Sequence[str]) -> dict[str, dict[str, bool]]:
    """``workqueue`` (lane group -> its tests' node ids) ordered for a run with ``building`` built beside it: within
    each group, the tests whose module waits for a build (:func:`waits_for` of :func:`module_builds`, and of
    :data:`~localcluster.prebuild.SESSION_CLUSTER` for a module under ``e2e/``) after the others, the later the
    build the later; then the groups by their first test's wait, the real nodes' group first among equals (so the
    unit modules run on both lanes while the session cluster builds). Stable sorts: each module stays whole and
    equals keep their order."""

    def wait(nodeid: str) -> int:
        module = nodeid.split("::", 1)[0]
        implicit = SESSION_CLUSTER if module.startswith(E2E) else ()
        return waits_for((*implicit, *module_builds(module)), building)

    groups = {scope: dict(sorted(tests.items(), key=lambda kv: wait(kv[0]))) for scope, tests in workqueue.items()}

    def key(item: tuple[str, dict[str, bool]]) -> tuple[int, bool]:
        scope, tests = item
        return (min(map(wait, tests), default=-1), scope != REAL_NODES_GROUP)

    return dict(sorted(groups.items(), key=key))


class ModuleLanes(LoadScopeScheduling):  # type: ignore[misc]  # pytest-xdist ships no types
    """pytest-xdist's scope scheduler with :func:`lane_group` as the scope, the real nodes' group handed
    out first (it is the longest; the other lane takes every other module meanwhile); while components
    build beside the run (:data:`~localcluster.prebuild.BUILDING_BESIDE`), in the order of
    :func:`builds_last` instead."""

    def __init__(self, config: pytest.Config, log: Producer) -> None:
        super().__init__(config, log)
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return lane_group(nodeid)

    def _assign_work_unit(self, node: WorkerController) -> None:
        if not self._ordered:
            self._ordered = True
            if building := os.environ.get(BUILDING_BESIDE, "").split():
                ordered = builds_last(self.workqueue, building)
                self.workqueue.clear()
                self.workqueue.update(ordered)
            elif REAL_NODES_GROUP in self.workqueue:
                self.workqueue.move_to_end(REAL_NODES_GROUP, last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> ModuleLanes:
    """The scheduler of a run with ``-n`` (:class:`ModuleLanes`)."""
    return ModuleLanes(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """In the lane that runs the test, after the last test of a module (its module's fixtures torn down):
    the test's teardown report carries the CPU seconds the lane's processes used since the end of the lane's
    previous module (:data:`CPU_SECONDS`, in ``user_properties``)."""
    yield
    if nextitem is None or nextitem.path != item.path:
        now = tree_cpu_seconds()
        item.user_properties.append((CPU_SECONDS, now - _cpu_mark[-1] if _cpu_mark else 0.0))
        _cpu_mark[:] = [now]


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Mark the lane's CPU seconds before its first test, after collecting."""
    _cpu_mark[:] = [tree_cpu_seconds()]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add a test's setup, call and teardown time (seconds) and its lane's CPU seconds to its module's."""
    module = report.nodeid.split("::", 1)[0]
    _seconds[module] += report.duration
    for key, value in report.user_properties:
        if key == CPU_SECONDS and isinstance(value, float):
            _cpu[module] += value


def module_lines(seconds: dict[str, float], listed: str = E2E, cpu: dict[str, float] | None = None) -> list[str]:
    """``seconds`` per module as lines, slowest first: every module under ``listed`` (the end-to-end
    modules, where a cluster's time goes), one line per other top-level folder with its modules summed,
    then the total (seconds with one decimal, and minutes). With ``cpu`` (CPU seconds per module), each
    line has them beside its seconds."""
    shown: dict[str, list[str]] = {}
    folders: defaultdict[str, list[str]] = defaultdict(list)
    for name in seconds:
        if name.startswith(listed):
            shown[name] = [name]
        else:
            folders[name.split("/", 1)[0] + "/" if "/" in name else name].append(name)
    for folder, names in folders.items():
        shown[f"{folder} ({len(names)} module{'s' if len(names) > 1 else ''})"] = names

    def line(label: str, names: Iterable[str]) -> tuple[float, str]:
        s = sum(seconds[n] for n in names)
        used = "" if cpu is None else f"{sum(cpu.get(n, 0.0) for n in names):9.1f} s CPU  "
        return s, f"{s:9.1f} s  {used}{label}"

    lines = [text for _, text in sorted((line(label, names) for label, names in shown.items()), key=lambda x: -x[0])]
    total = sum(seconds.values())
    return [*lines, line(f"total ({total / 60:.1f} min, {len(seconds)} modules)", seconds)[1]]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print :func:`module_lines` of this run, its wall clock (less than the total when lanes ran side by
    side), and the CPU seconds the whole machine used meanwhile (:func:`machine_cpu_seconds`: the lanes', and
    what else ran, such as the builds beside them)."""
    if not _seconds:
        return
    terminalreporter.section("time per module")
    for line in module_lines(dict(_seconds), cpu=dict(_cpu)):
        terminalreporter.write_line(line)
    wall = time.monotonic() - _started
    terminalreporter.write_line(f"{wall:9.1f} s  wall clock ({wall / 60:.1f} min)")
    (busy_now, all_now), (busy_then, all_then) = machine_cpu_seconds(), _machine_started
    busy, total = busy_now - busy_then, all_now - all_then
    if total > 0:
        lanes = sum(_cpu.values())
        terminalreporter.write_line(
            f"{busy:9.1f} s  CPU of the machine meanwhile ({100 * busy / total:.0f} % of {os.cpu_count()} cores busy),"
            f" of which the lanes' {lanes:.1f} s"
        )
