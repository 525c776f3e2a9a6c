"""The lanes run last what waits for a build beside them (root ``conftest.py``: ``builds`` marks,
:func:`builds_last`, :data:`localcluster.prebuild.BUILDING_BESIDE`)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from conftest import builds_last, module_builds, waits_for
from localcluster.binaries import _all_binaries
from localcluster.prebuild import BESIDE, BUILDING_BESIDE, SESSION_CLUSTER
from tests.tooling.test_module_times import lanes_run

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(str(p.relative_to(ROOT)) for folder in ("tests", "e2e") for p in (ROOT / folder).rglob("test_*.py"))
HELM, THIS = "tests/tooling/test_helm_data_cache.py", "tests/tooling/test_builds_last.py"
"""A module that waits for helm, and this one (not marked: the mark would make it wait for helm too)."""
CHEAP = "refused_by_the_schema or lint_strict or the_service_account_is or what_waits_for or what_is_built"
"""Three of :data:`HELM`'s quickest tests and two of this module's (none of the run below): the waiting module
is the larger of the two, as few seconds as a run takes."""


def group_of(*modules: str) -> dict[str, bool]:
    """The node ids of two tests of each of ``modules``, as a work queue's group holds them."""
    return {f"{m}::{t}": False for m in modules for t in ("test_a", "test_b")}


def queue(*modules: str) -> dict[str, dict[str, bool]]:
    """A work queue of one lane group per module, two tests each."""
    return {m: group_of(m) for m in modules}


def test_what_waits_for_a_build_runs_after_the_rest_the_later_build_the_later() -> None:
    building = ["helm", "prometheus", "upstream", "trainer_e2e", "kueue_e2e", "katib"]
    ordered = builds_last(
        queue("e2e/test_katib.py", "e2e/test_kueue_e2e.py", "tests/tooling/test_helm_chart.py", "e2e/test_trainjob.py"),
        building,
    )
    assert list(ordered) == [
        "e2e/test_trainjob.py",  # waits for nothing
        "tests/tooling/test_helm_chart.py",  # helm
        "e2e/test_kueue_e2e.py",  # trainer_e2e and kueue_e2e: the later
        "e2e/test_katib.py",  # trainer_e2e and katib
    ]
    assert ordered["e2e/test_katib.py"] == queue("e2e/test_katib.py")["e2e/test_katib.py"]


def test_a_group_of_several_modules_runs_each_whole_the_waiting_ones_last() -> None:
    group = group_of("e2e/test_observability_real.py", "e2e/test_real_pods.py")
    ordered = builds_last({"real nodes": group}, ["helm", "prometheus"])
    assert [n.split("::")[0] for n in ordered["real nodes"]] == ["e2e/test_real_pods.py"] * 2 + [
        "e2e/test_observability_real.py"
    ] * 2


def test_while_the_session_cluster_builds_the_unit_modules_come_first_then_the_real_nodes() -> None:
    real = group_of("e2e/test_katib.py", "e2e/test_checkpoints_real.py")
    work = {**queue("e2e/test_trainjob.py"), "real nodes": real, **queue("tests/trainjob/test_status.py")}
    ordered = builds_last(work, ["volcano", "kueue", "helm", "katib"])
    assert list(ordered) == ["tests/trainjob/test_status.py", "real nodes", "e2e/test_trainjob.py"]
    assert [n.split("::")[0] for n in ordered["real nodes"]][::2] == [
        "e2e/test_checkpoints_real.py",
        "e2e/test_katib.py",
    ]


def test_what_is_built_already_changes_nothing() -> None:
    work = queue("e2e/test_katib.py", "e2e/test_trainjob.py")
    assert list(builds_last(work, ["prometheus"])) == list(work)
    assert waits_for(("katib", "helm"), []) == -1 and waits_for(("katib", "helm"), ["helm", "katib"]) == 1


def test_every_mark_names_a_component_built_beside_the_run() -> None:
    marked = {m: module_builds(m) for m in MODULES if module_builds(m)}
    assert len(marked) >= 15, marked
    assert all(set(comps) <= set(BESIDE) - set(SESSION_CLUSTER) for comps in marked.values()), marked


def test_a_module_that_asks_for_a_binary_built_beside_the_run_names_its_component() -> None:
    owner = {name: component for name, (_, component) in _all_binaries().items()}
    for module in MODULES:
        tree = ast.parse((ROOT / module).read_text())
        asked = {
            owner[arg.value]
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ensure"
            for arg in node.args
            if isinstance(arg, ast.Constant) and arg.value in owner
        }
        beside = asked & (set(BESIDE) - set(SESSION_CLUSTER))
        assert beside <= set(module_builds(module)), f"{module} asks for {sorted(beside)}: mark it builds(...)"


def test_a_run_with_builds_beside_it_runs_the_module_that_waits_last() -> None:
    def order(env: dict[str, str]) -> list[str]:
        stdout = lanes_run(1, "-k", CHEAP, HELM, THIS, env=env)
        modules = [line.split(" PASSED ")[1].split("::")[0] for line in stdout.splitlines() if " PASSED " in line]
        return list(dict.fromkeys(modules))

    plain = {k: v for k, v in os.environ.items() if k != BUILDING_BESIDE}
    # pytest-xdist runs the larger module first; while helm builds, the module that needs it waits.
    assert order(plain) == [HELM, THIS]
    assert order({**plain, BUILDING_BESIDE: "helm prometheus"}) == [THIS, HELM]
