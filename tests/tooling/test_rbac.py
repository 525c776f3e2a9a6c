"""The RBAC in config/ is exactly what the code uses: recomputed here from the code, compared with the
permissions the modules declare (which :mod:`trainer.render.rbac` renders into the manifests), and no wildcard
anywhere. Every module that declares is listed in :data:`trainer.render.rbac.DECLARING`, names what it declares,
and declares what its own ``kube`` calls ask.

What the code uses is derived, not listed: ``list``/``watch`` on the resource of every informer the
Manager starts (for each gang scheduler); every ``kube.<verb>(RESOURCE, ...)`` call site found in the
source (an AST scan); server-side apply (``create`` + ``patch``) on every resource whose informer maps
events to an owner (the children the reconcilers write); ``delete`` on what the gang plans delete;
``update`` on the owners' ``finalizers`` because the children's owner references block deletion.

Where and on what: the call sites of the Lease (``kube/leader.py``) and of the certificate Secrets
(``webhook/tls.py``, with the watch its keepers open by ``metadata.name``) go to the Roles of the
operator's namespace, the rest to the ClusterRole; a call whose name argument is a module constant (or
whose objects are named in :data:`NAMED`) is granted on those names only, except ``create``, which
RBAC cannot restrict by name.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from tests.kube_double import reader
from trainer.api.kinds import (
    COSCHEDULING_PODGROUPS,
    JOBS,
    JOBSETS,
    MPIJOBS,
    MUTATING_WEBHOOKS,
    PODS,
    TRAINJOBS,
    VALIDATING_WEBHOOKS,
    VOLCANO_PODGROUPS,
    Resource,
)
from trainer.framework.kube.client import Kube
from trainer.framework.owner import owner_reference
from trainer.framework.permissions import APPLY, Grant, Permission, grants
from trainer.framework.probes import METRICS_SECRET
from trainer.framework.tls import WebhookTLS
from trainer.jobs import gang
from trainer.jobs.gang.base import GangInput, PodSet
from trainer.render import rbac
from trainer.statusserver.server import StatusServerSettings
from trainer.trainjob.features import FEATURES
from trainer.trainjob.features.ttl import TTL_CHILDREN
from trainer.webhook import server as webhook
from trainer.wiring import Settings, new_manager

ROOT = Path(__file__).resolve().parents[2]
FEATURE_CHILDREN = {r for f in FEATURES for r in f.owns}
"""What the TrainJob features own (and delete once finished or no longer wanted)."""
NOT_OPERATOR = ("trainer/client/", "trainer/cli/", "trainer/dashboard/")
"""User-side tools (the SDK, the CLI, ``trainer dashboard``): their RBAC is the user's."""
VERBS = {
    "get": ("get",),
    "get_or_none": ("get",),
    "list": ("list",),
    "watch": ("watch",),
    "apply": APPLY,
    "patch_status": ("patch",),
    "merge_patch": ("patch",),
    "json_patch": ("patch",),
    "create": ("create",),
    "update": ("update",),
    "delete": ("delete",),
    "request": (),
}
"""What each :class:`~trainer.framework.kube.client.Kube` method asks of RBAC."""
DYNAMIC = {
    ("trainer/framework/kube/cache.py", "list"): "informers",
    ("trainer/framework/kube/cache.py", "watch"): "informers",
    ("trainer/jobs/child_writer.py", "apply"): "children",
    ("trainer/jobs/child_writer.py", "create"): "children",
    ("trainer/jobs/child_writer.py", "delete"): "deletes",
    ("trainer/jobs/child_writer.py", "merge_patch"): "patches",
    ("trainer/jobs/child_writer.py", "get"): "children",
    ("trainer/jobs/child_writer.py", "get_or_none"): "children",
    ("trainer/jobs/child_writer.py", "json_patch"): "children",
    ("trainer/jobs/status_writer.py", "patch_status"): "primaries",
    ("trainer/webhook/server.py", "get_or_none"): "webhook configurations",
    ("trainer/webhook/server.py", "json_patch"): "webhook configurations",
}
"""Call sites whose resource is a variable, and where the resources come from."""
IMPLIED = "trainer.framework.controller"
"""Where the permissions a controller's declaration implies are made."""
OWN_NAMESPACE = {"trainer/framework/kube/leader.py": "leader", "trainer/framework/tls.py": "certificates"}
"""Modules whose calls all go to the operator's own namespace, and the Role that grants them."""


def certificate_secrets() -> set[str]:
    """The Secrets the certificate keepers (:class:`WebhookTLS`) are made for: the webhook's (the
    default ``secret_name``), the status server's (:class:`StatusServerSettings`) and the secure
    metrics' (:data:`~trainer.framework.probes.METRICS_SECRET`)."""
    default = inspect.signature(WebhookTLS).parameters["secret_name"].default
    status = next(f.default for f in dataclasses.fields(StatusServerSettings) if f.name == "secret_name")
    return {default, str(status), METRICS_SECRET}


NAMED = {"trainer/framework/tls.py": certificate_secrets()}
"""Modules whose calls name their object with a variable, and the objects they can be."""


def _is_kube(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "kube") or (
        isinstance(node, ast.Attribute) and node.attr == "kube"
    )


NAME_ARG = {"get", "get_or_none", "patch_status", "merge_patch", "json_patch", "delete"}
"""Methods whose third argument is the object's name."""


def call_sites() -> list[tuple[str, str, Resource | None, str, str | None]]:
    """Every ``kube.<method>(first, ...)`` in the operator's modules: (file, method, resource when the
    first argument names a module-level Resource, else None, the first argument's source, the object's
    name when the name argument is a module-level string constant, else None)."""
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
            name_arg = node.args[2] if node.func.attr in NAME_ARG and len(node.args) > 2 else None
            name = getattr(module, name_arg.id, None) if isinstance(name_arg, ast.Name) else None
            source = ast.unparse(first) if first is not None else ""
            out.append((rel, node.func.attr, res, source, name if isinstance(name, str) else None))
    return out


def test_the_scan_sees_the_known_call_sites() -> None:
    sites = {(f, m, r.plural if r else None, n) for f, m, r, _, n in call_sites()}
    assert ("trainer/framework/kube/events.py", "create", "events", None) in sites
    assert ("trainer/jobs/child_writer.py", "patch_status", "jobs", None) in sites
    assert ("trainer/framework/kube/leader.py", "update", "leases", None) in sites
    assert ("trainer/webhook/server.py", "json_patch", None, "trainer-webhook") in sites


def gang_deletes(scheduler: str) -> set[Resource]:
    """What ``scheduler``'s plan deletes when a job finishes while its objects exist."""
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}
    owner["metadata"] = {"name": "j", "namespace": "n", "uid": "u"}  # type: ignore[assignment]
    job = GangInput(owner=owner, pod_sets=[PodSet("node", 1, 1, {"spec": {}})], finished=True, started=True)
    existing = {r: [{"metadata": {"namespace": "n", "name": "j"}}] for r in (VOLCANO_PODGROUPS, COSCHEDULING_PODGROUPS)}
    return {res for res, _, _ in gang.get(scheduler).plan(job, reader(existing)).delete}


async def used(scheduler: str) -> dict[str, set[Grant]]:
    """What the code uses with ``--gang-scheduler-name=scheduler``, by where it is granted:
    ``cluster`` (the ClusterRole), ``leader`` and ``certificates`` (the Roles of the operator's
    namespace)."""
    kube = Kube(client.ApiClient())
    try:
        manager = new_manager(kube, Settings(gang_scheduler_name=scheduler))
        keepers = [WebhookTLS(kube, "ns", ["x"], ["127.0.0.1"], secret_name=n) for n in sorted(certificate_secrets())]
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
        # ttlSecondsAfterFinished), the JobSets Kubeflow Trainer made (a suspended TrainJob's, one past
        # its deadline: trainer/trainjob/features/upstream_jobset.py).
        # The worker Pods of MPIJobs mpi-operator started (trainer/mpijob/upstream.py).
        # A TrainJob's PodDisruptionBudget and NetworkPolicy once it finished (or no longer desired).
        # TrainJobs (their own or their runtime's runPolicy ttlSecondsAfterFinished, KEP-2899).
        "deletes": gang_deletes(scheduler)
        | {JOBS, MPIJOBS, TRAINJOBS, JOBSETS, PODS, *TTL_CHILDREN, *FEATURE_CHILDREN},
        # Jobs (cleanPodPolicy Running suspends the workers) and MPIJobs (the Kueue queue label).
        "patches": {JOBS, MPIJOBS},
        "webhook configurations": {VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS},
    }
    out: dict[str, set[Grant]] = {"cluster": set(), "leader": set(), "certificates": set()}
    for path, method, res, arg, name in call_sites():
        into = out[OWN_NAMESPACE.get(path, "cluster")]
        names = {name} if name else NAMED.get(path, {""})
        if res is None:
            origin = DYNAMIC.get((path, method))
            assert origin, (
                f"{path}: kube.{method}({arg}, ...) names no Resource constant; teach tests/tooling/test_rbac.py"
            )
            targets = found[origin]
        else:
            targets = {res}
        sub = "status" if method == "patch_status" else None
        for verb in VERBS[method]:
            on = {""} if verb == "create" else names  # RBAC cannot restrict create by name
            into |= {(r.group, r.plural + (f"/{sub}" if sub else ""), verb, n) for r in targets for n in on}
    for keeper in keepers:  # the certificate Secret's watch, by metadata.name
        field, _, secret = (keeper.informer.field_selector or "").partition("=")
        assert field == "metadata.name" and secret, keeper.informer.field_selector
        out["certificates"] |= {
            (keeper.informer.res.group, keeper.informer.res.plural, v, secret) for v in ("list", "watch")
        }
    if owner_reference({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x", "uid": "u"}})["blockOwnerDeletion"]:
        out["cluster"] |= {(r.group, f"{r.plural}/finalizers", "update", "") for r in owners}
    return out


@pytest.mark.parametrize("scheduler", sorted(gang.SCHEDULERS))
async def test_the_declarations_are_exactly_what_the_code_uses(scheduler: str) -> None:
    uses = await used(scheduler)
    for where, permissions in (
        ("cluster", rbac.operator() + rbac.gang_only(scheduler)),
        ("leader", rbac.in_role(rbac.LEADER_ELECTION_ROLE)),
        ("certificates", rbac.in_role(rbac.CERTIFICATES_ROLE)),
    ):
        declared = grants(permissions)
        assert sorted(uses[where] - declared) == [], (
            f"{where}: used by the code but not granted: declare it in the module's PERMISSIONS"
        )
        assert sorted(declared - uses[where]) == [], f"{where}: granted but unused: remove its Permission"


def _module_of(path: Path) -> str:
    return path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")


def _declares(tree: ast.Module) -> ast.stmt | None:
    """The module-level ``PERMISSIONS = ...`` of a module, or None."""
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "PERMISSIONS" for t in targets):
            return node
    return None


def test_the_declaring_modules_are_those_of_the_source_tree() -> None:
    found = {_module_of(p) for p in (ROOT / "trainer").rglob("*.py") if _declares(ast.parse(p.read_text()))}
    assert sorted(found) == sorted(rbac.DECLARING), (
        "list every module with a PERMISSIONS in trainer.render.rbac.DECLARING"
    )
    for module in rbac.DECLARING:  # a module that is gone cannot be imported: its declarations go with it
        assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module
        assert all(p.module == module for p in importlib.import_module(module).PERMISSIONS), module


@pytest.mark.parametrize("module", rbac.DECLARING)
def test_a_declaring_module_names_what_it_declares(module: str) -> None:
    """Every Permission names a resource (or an object) the module's own code names besides its declaration."""
    mod = importlib.import_module(module)
    tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
    declaration = _declares(tree)
    named = [
        getattr(mod, n.id, None)
        for top in tree.body
        if top is not declaration
        for n in ast.walk(top)
        if isinstance(n, ast.Name)
    ]
    for p in mod.PERMISSIONS:
        assert isinstance(p, Permission), p
        assert p.resource in named or set(p.names) & set(map(str, named)), f"{module} declares {p} but never names it"


def test_a_kube_call_is_declared_beside_it() -> None:
    """A ``kube`` call on a named resource is granted by its own module's PERMISSIONS, or by what the
    controllers' declarations imply (their informers and owned objects)."""
    implied = {p for s in gang.SCHEDULERS for p in rbac.needed(s) if p.module == IMPLIED}
    for path, method, res, _, _ in call_sites():
        if res is None:
            continue
        beside = {p for p in rbac.declared() if p.module == _module_of(ROOT / path)} | implied
        granted = {(g, r, v) for g, r, v, _ in grants(list(beside))}
        sub = "/status" if method == "patch_status" else ""
        for verb in VERBS[method]:
            assert (res.group, res.plural + sub, verb) in granted, f"{path}: kube.{method}({res.plural}) not declared"


def test_webhook_configurations_are_only_read_and_patched_by_name() -> None:
    rules = [r for r in rbac.cluster_role()["rules"] if r["apiGroups"] == ["admissionregistration.k8s.io"]]
    assert rules == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            "resourceNames": [webhook.CONFIG_NAME],
            "verbs": ["get", "patch"],
        }
    ]
    assert {c["metadata"]["name"] for c in webhook.configurations()} == {webhook.CONFIG_NAME}


def test_certificate_secrets_only_in_the_operators_namespace() -> None:
    cluster = grants(rbac.operator())
    # get (whose is a Secret named like a child, on a create's 409) reads no more than the informer's
    # list/watch already do; update is the certificates' only, in the operator's namespace.
    assert not {g for g in cluster if g[1] == "secrets" and g[2] == "update"}, "no cluster-wide update"
    certificates = rbac.in_role(rbac.CERTIFICATES_ROLE)
    role = grants(certificates)
    assert {g[3] for g in role if g[2] != "create"} == certificate_secrets()
    assert {g for g in role if g[2] == "create"} == {("", "secrets", "create", "")}
    for p in rbac.operator() + certificates:  # every cluster-wide Secret verb and the unnamed create say why
        if p.resource.plural == "secrets" and not p.names:
            assert "cannot" in p.why, p


@pytest.mark.parametrize("scheduler", sorted(gang.SCHEDULERS))
def test_a_gang_scheduler_adds_what_it_owns_and_watches(scheduler: str) -> None:
    declared = gang.SCHEDULERS[scheduler]
    expected = {o.resource for o in declared.owns} | set(declared.watches)
    assert {p.resource for p in rbac.gang_only(scheduler)} == expected
    for owns in declared.owns:
        verbs = {g[2] for g in grants(rbac.gang_only(scheduler)) if g[1] == owns.resource.plural}
        assert verbs == {"list", "watch", *owns.verbs}, owns


@pytest.mark.parametrize("path", sorted(rbac.files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_checked_in_rbac_is_current(path: Path) -> None:
    assert path.exists(), f"{path} missing: run `python -m trainer.render.rbac`"
    assert path.read_text() == rbac.files()[path], f"{path} is stale: run `python -m trainer.render.rbac`"


def test_the_docs_table_is_current() -> None:
    page = rbac.DOCS_PAGE.read_text()
    assert rbac.table() in page, "docs/operating.md's RBAC table is stale: run `python -m trainer.render.rbac`"
    for p in {p for s in gang.SCHEDULERS for p in rbac.needed(s)}:
        assert p.why.strip(), f"{p.module}: {p.name} {p.verbs} says not why"


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
        if isinstance(d, dict) and "name" in (d.get("metadata") or {})  # a sample may have a generateName
    }
    sa = docs[("ServiceAccount", "trainer-operator")]
    for kind, name, role_kind, role in (
        ("ClusterRoleBinding", "trainer-operator", "ClusterRole", rbac.CLUSTER_ROLE),
        ("RoleBinding", "trainer-leader-election", "Role", rbac.LEADER_ELECTION_ROLE),
        ("RoleBinding", "trainer-webhook-certificates", "Role", rbac.CERTIFICATES_ROLE),
    ):
        binding = docs[(kind, name)]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "trainer-system"}
        ]
    deployment = docs[("Deployment", "trainer-operator")]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
