"""The RBAC in config/ is exactly what the code uses: recomputed here from the code, compared with the
table of :mod:`trainer.rbac` (which renders the manifests), and no wildcard anywhere.

What the code uses is derived, not listed: ``list``/``watch`` on the resource of every informer the
Manager starts (for each gang scheduler); every ``kube.<verb>(RESOURCE, ...)`` call site found in the
source (an AST scan); server-side apply (``create`` + ``patch``) on every resource whose informer maps
events to an owner (the children the reconcilers write); ``delete`` on what the gang plans delete;
``update`` on the owners' ``finalizers`` because the children's owner references block deletion.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from api.kinds import (
    COSCHEDULING_PODGROUPS,
    JOBS,
    MPIJOBS,
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    VOLCANO_PODGROUPS,
    Resource,
)
from tests.kube_double import reader
from trainer import gang, rbac
from trainer.builders.labels import owner_reference
from trainer.gang.base import GangInput, PodSet
from trainer.kube.client import Kube
from trainer.trainjob.controller import TTL_CHILDREN
from trainer.wiring import Settings, new_manager

ROOT = Path(__file__).resolve().parents[2]
NOT_OPERATOR = ("trainer/client/", "trainer/cli.py")
"""User-side tools: their RBAC is the user's."""
VERBS = {
    "get": ("get",),
    "get_or_none": ("get",),
    "list": ("list",),
    "watch": ("watch",),
    "apply": rbac.APPLY,
    "patch_status": ("patch",),
    "merge_patch": ("patch",),
    "json_patch": ("patch",),
    "create": ("create",),
    "update": ("update",),
    "delete": ("delete",),
    "request": (),
}
"""What each :class:`~trainer.kube.client.Kube` method asks of RBAC."""
DYNAMIC = {
    ("trainer/kube/cache.py", "list"): "informers",
    ("trainer/kube/cache.py", "watch"): "informers",
    ("trainer/reconciler/child_writer.py", "apply"): "children",
    ("trainer/reconciler/child_writer.py", "create"): "children",
    ("trainer/reconciler/child_writer.py", "delete"): "deletes",
    ("trainer/reconciler/child_writer.py", "merge_patch"): "patches",
    ("trainer/reconciler/child_writer.py", "get"): "children",
    ("trainer/reconciler/child_writer.py", "get_or_none"): "children",
    ("trainer/reconciler/child_writer.py", "json_patch"): "children",
    ("trainer/reconciler/status_writer.py", "patch_status"): "primaries",
    ("trainer/webhook/server.py", "apply"): "webhook configurations",
}
"""Call sites whose resource is a variable, and where the resources come from."""
Grant = tuple[str, str, str]


def _is_kube(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "kube") or (
        isinstance(node, ast.Attribute) and node.attr == "kube"
    )


def call_sites() -> list[tuple[str, str, Resource | None, str]]:
    """Every ``kube.<method>(first, ...)`` in the operator's modules: (file, method, resource when the
    first argument names a module-level Resource, else None, the first argument's source)."""
    out = []
    for path in sorted((ROOT / "trainer").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(NOT_OPERATOR):
            continue
        tree = ast.parse(path.read_text())
        if path.name == "__main__.py":  # importing it would run the operator
            assert "kube" not in path.read_text(), rel
            continue
        module = importlib.import_module(rel[:-3].replace("/", ".").removesuffix(".__init__"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in VERBS or not _is_kube(node.func.value):
                continue
            first = node.args[0] if node.args else None
            value = getattr(module, first.id, None) if isinstance(first, ast.Name) else None
            res = value if isinstance(value, Resource) else None
            out.append((rel, node.func.attr, res, ast.unparse(first) if first is not None else ""))
    return out


def test_the_scan_sees_the_known_call_sites() -> None:
    sites = {(f, m, r.plural if r else None) for f, m, r, _ in call_sites()}
    assert ("trainer/kube/events.py", "create", "events") in sites
    assert ("trainer/reconciler/child_writer.py", "patch_status", "jobs") in sites
    assert ("trainer/kube/leader.py", "update", "leases") in sites


def gang_deletes(scheduler: str) -> set[Resource]:
    """What ``scheduler``'s plan deletes when a job finishes while its objects exist."""
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}
    owner["metadata"] = {"name": "j", "namespace": "n", "uid": "u"}  # type: ignore[assignment]
    job = GangInput(owner=owner, pod_sets=[PodSet("node", 1, 1, {"spec": {}})], finished=True, started=True)
    existing = {r: [{"metadata": {"namespace": "n", "name": "j"}}] for r in (VOLCANO_PODGROUPS, COSCHEDULING_PODGROUPS)}
    return {res for res, _, _ in gang.get(scheduler).plan(job, reader(existing)).delete}


async def used(scheduler: str) -> tuple[set[Grant], set[Grant]]:
    """(what the operator uses with ``--gang-scheduler-name=scheduler``, what leader election uses)."""
    kube = Kube(client.ApiClient())
    try:
        manager = new_manager(kube, Settings(gang_scheduler_name=scheduler))
    finally:
        await kube.close()
    informers = {i.res for i in manager.informers}
    children = {o.resource for c in manager.controllers for o in c.owns}
    owners = {c.for_ for c in manager.controllers}
    found: dict[str, set[Resource]] = {
        "informers": informers,
        "children": children,
        "primaries": owners,
        # The gang plan's deletions, Jobs (a finished TrainJob's active ones, restarts, cleanPodPolicy
        # All), MPIJobs (their ttlSecondsAfterFinished) and a TrainJob's other children (its runtime's
        # ttlSecondsAfterFinished).
        "deletes": gang_deletes(scheduler) | {JOBS, MPIJOBS, *TTL_CHILDREN},
        # Jobs (cleanPodPolicy Running suspends the workers) and MPIJobs (the Kueue queue label).
        "patches": {JOBS, MPIJOBS},
        "webhook configurations": {VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS},
    }
    operator: set[Grant] = set()
    leader: set[Grant] = set()
    for path, method, res, arg in call_sites():
        into = leader if path == "trainer/kube/leader.py" else operator
        if res is None:
            origin = DYNAMIC.get((path, method))
            assert origin, (
                f"{path}: kube.{method}({arg}, ...) names no Resource constant; teach tests/tooling/test_rbac.py"
            )
            targets = found[origin]
        else:
            targets = {res}
        sub = "status" if method == "patch_status" else None
        into |= {(r.group, r.plural + (f"/{sub}" if sub else ""), verb) for r in targets for verb in VERBS[method]}
    if owner_reference({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x", "uid": "u"}})["blockOwnerDeletion"]:
        operator |= {(r.group, f"{r.plural}/finalizers", "update") for r in owners}
    return operator, leader


@pytest.mark.parametrize("scheduler", sorted(gang.SCHEDULERS))
async def test_the_table_is_exactly_what_the_code_uses(scheduler: str) -> None:
    operator, leader = await used(scheduler)
    table = rbac.grants(rbac.OPERATOR + rbac.GANG[scheduler])
    assert sorted(operator - table) == [], "used by the code but not granted: add it to trainer/rbac.py"
    assert sorted(table - operator) == [], "granted but unused: remove it from trainer/rbac.py"
    assert leader == rbac.grants(rbac.LEADER_ELECTION)


def test_every_gang_scheduler_has_its_rules() -> None:
    assert set(rbac.GANG) == set(gang.SCHEDULERS)


@pytest.mark.parametrize("path", sorted(rbac.files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_checked_in_rbac_is_current(path: Path) -> None:
    assert path.exists(), f"{path} missing: run `python -m trainer.rbac`"
    assert path.read_text() == rbac.files()[path], f"{path} is stale: run `python -m trainer.rbac`"


def _roles_and_patches() -> list[tuple[Path, Any]]:
    out = []
    for path in sorted((ROOT / "config").rglob("*.yaml")):
        if path.parts[-2] in ("bases", "samples"):
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            out.append((path, doc))
    return out


def test_no_wildcard_in_any_role_or_patch() -> None:
    checked = 0
    for path, doc in _roles_and_patches():
        rules: list[Any] = []
        if isinstance(doc, dict) and doc.get("kind") in ("Role", "ClusterRole"):
            rules = doc.get("rules") or []
        elif isinstance(doc, list):  # a JSON patch of a role
            rules = [op["value"] for op in doc if isinstance(op, dict) and "rules" in str(op.get("path"))]
        for rule in rules:
            checked += 1
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in "".join(rule.get(field) or []), f"{path}: wildcard in {field}: {rule}"
            assert "nonResourceURLs" not in rule, path
    assert checked >= 10


def test_the_manifests_bind_the_roles_to_the_service_account() -> None:
    docs = {
        (d["kind"], d["metadata"]["name"]): d
        for _, d in _roles_and_patches()
        if isinstance(d, dict) and "metadata" in d
    }
    sa = docs[("ServiceAccount", "trainer-operator")]
    for kind, name, role_kind, role in (
        ("ClusterRoleBinding", "trainer-operator", "ClusterRole", rbac.CLUSTER_ROLE),
        ("RoleBinding", "trainer-leader-election", "Role", rbac.LEADER_ELECTION_ROLE),
    ):
        binding = docs[(kind, name)]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "trainer-system"}
        ]
    deployment = docs[("Deployment", "trainer-operator")]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
