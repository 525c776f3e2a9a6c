"""The chart's data cache RBAC (``dataCache``): what the upstream dataset initializer of the
``torch-distributed-with-cache`` runtime (kubeflow/trainer KEP-2655) needs to run.

``helm template`` with ``dataCache.enabled`` renders ClusterRole ``kubeflow-trainer-cache-initializer``
and, in each namespace of ``dataCache.namespaces``, a ServiceAccount of that name bound to it; off by
default, as upstream's chart (``values.yaml`` ``dataCache.enabled: false``). The ClusterRole's rules are
checked against :data:`INITIALIZER_CALLS`, every request the upstream initializer makes, each with the
upstream source it comes from.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pytest
import yaml

from tests.conftest import SAMPLES
from tests.tooling.test_helm_chart import CHART, NAMESPACE, Doc, by_key, helm_template, key, run, tools

pytestmark = pytest.mark.builds("helm")

NAME = "kubeflow-trainer-cache-initializer"
CACHE_PY = "kubeflow/trainer pkg/initializers/dataset/cache.py (master 8c0f5059b; last change 53066b8f6)"


@dataclass(frozen=True)
class Call:
    """One request the initializer sends to the apiserver, as RBAC sees it."""

    verb: str
    group: str
    resource: str
    """``<plural>`` or ``<plural>/<subresource>``."""
    source: str
    """Where upstream makes it."""


INITIALIZER_CALLS = (
    Call(
        "get",
        "trainer.kubeflow.org",
        "trainjobs",
        f"{CACHE_PY}: CacheInitializer.download_dataset, custom_api.get_namespaced_custom_object(group="
        '"trainer.kubeflow.org", version="v1alpha1", plural="trainjobs"): its TrainJob, the owner of what it creates; '
        "upstream's ClusterRole lacks it, so upstream's initializer logs the 403 and returns without a cache",
    ),
    Call(
        "create",
        "",
        "serviceaccounts",
        f"{CACHE_PY}: core_v1.create_namespaced_service_account: ServiceAccount <trainjob>-cache (IRSA annotations)",
    ),
    Call(
        "create",
        "leaderworkerset.x-k8s.io",
        "leaderworkersets",
        f'{CACHE_PY}: custom_api.create_namespaced_custom_object(group="leaderworkerset.x-k8s.io", version="v1", '
        'plural="leaderworkersets"): LeaderWorkerSet <trainjob>-cache',
    ),
    Call(
        "create",
        "",
        "services",
        f"{CACHE_PY}: core_v1.create_namespaced_service: Service <trainjob>-cache-service, port 50051",
    ),
    Call(
        "get",
        "leaderworkerset.x-k8s.io",
        "leaderworkersets",
        f"{CACHE_PY}: custom_api.get_namespaced_custom_object every 5 s until condition Available is True",
    ),
    Call(
        "delete",
        "",
        "serviceaccounts",
        f"{CACHE_PY}: core_v1.delete_namespaced_service_account, the clean-up when a create fails",
    ),
    Call(
        "update",
        "trainer.kubeflow.org",
        "trainjobs/finalizers",
        f"{CACHE_PY}: the owner reference of the three objects sets blockOwnerDeletion: True, which the "
        "OwnerReferencesPermissionEnforcement admission plugin (kubernetes v1.37.2 "
        "plugin/pkg/admission/gc/gc_admission.go; off by default, on in e.g. OpenShift) allows only to whoever may "
        "update the owner's finalizers",
    ),
)

UPSTREAM_RULES = (
    ("leaderworkerset.x-k8s.io", "leaderworkersets", ("create", "get", "list", "watch")),
    ("", "services", ("create", "get", "list", "watch")),
    ("", "serviceaccounts", ("create", "delete", "get", "list", "watch")),
)
"""kubeflow/trainer ``manifests/overlays/data-cache/cluster_role.yaml`` and
``charts/kubeflow-trainer/templates/data-cache/cluster-role.yaml`` (master 8c0f5059b): kept whole, so that
list and watch stay granted for an initializer that watches instead of polling (kubeflow/trainer#3928)."""


def allows(rules: list[Doc], verb: str, group: str, resource: str) -> bool:
    """Whether RBAC ``rules`` grant ``verb`` on ``resource`` of API group ``group`` (any object name)."""
    return any(
        not rule.get("resourceNames")
        and (group in rule.get("apiGroups", []) or "*" in rule.get("apiGroups", []))
        and (resource in rule.get("resources", []) or "*" in rule.get("resources", []))
        and (verb in rule.get("verbs", []) or "*" in rule.get("verbs", []))
        for rule in rules
    )


def data_cache(*sets: str) -> dict[tuple[str, str, str], Doc]:
    """The objects named ``kubeflow-trainer-cache-initializer`` of ``helm template`` with ``sets``."""
    return {k: doc for k, doc in by_key(helm_template(*sets)).items() if k[1] == NAME}


ON = ("dataCache.enabled=true", "dataCache.namespaces={team-a,team-b}")


def test_off_by_default_as_upstream() -> None:
    assert data_cache() == {}
    assert data_cache("dataCache.namespaces={team-a}") == {}, "namespaces alone render nothing"


def test_on_renders_the_cluster_role_and_a_bound_service_account_per_namespace() -> None:
    objects = data_cache(*ON)
    assert sorted(objects) == [
        ("ClusterRole", NAME, ""),
        ("RoleBinding", NAME, "team-a"),
        ("RoleBinding", NAME, "team-b"),
        ("ServiceAccount", NAME, "team-a"),
        ("ServiceAccount", NAME, "team-b"),
    ]
    for ns in ("team-a", "team-b"):
        binding = objects[("RoleBinding", NAME, ns)]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]
    assert sorted(data_cache("dataCache.enabled=true")) == [("ClusterRole", NAME, "")]
    renamed = {key(doc) for doc in helm_template(*ON, release="other") if doc["metadata"]["name"] == NAME}
    assert renamed == set(objects), "one name whatever the release: the runtime asks for it by name"


def test_the_service_account_is_the_one_the_runtimes_initializer_pods_run_as() -> None:
    runtime = yaml.safe_load((SAMPLES / "upstream" / "torch-distributed-with-cache.yaml").read_text())
    (rjob,) = [r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == "dataset-initializer"]
    assert rjob["template"]["spec"]["template"]["spec"]["serviceAccountName"] == NAME


@pytest.mark.parametrize("call", INITIALIZER_CALLS, ids=lambda c: f"{c.verb} {c.group or 'core'}/{c.resource}")
def test_the_cluster_role_allows_every_call_of_the_upstream_initializer(call: Call) -> None:
    rules = data_cache(*ON)[("ClusterRole", NAME, "")]["rules"]
    assert allows(rules, call.verb, call.group, call.resource), call.source


def test_the_cluster_role_keeps_upstreams_rules_and_adds_only_the_initializers_calls() -> None:
    rules = data_cache(*ON)[("ClusterRole", NAME, "")]["rules"]
    for group, resource, verbs in UPSTREAM_RULES:
        assert all(allows(rules, verb, group, resource) for verb in verbs), (group, resource)
    granted = {
        (verb, group, resource)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    upstream = {(verb, group, resource) for group, resource, verbs in UPSTREAM_RULES for verb in verbs}
    assert granted - upstream == {(c.verb, c.group, c.resource) for c in INITIALIZER_CALLS} - upstream
    assert not any("*" in rule[k] for rule in rules for k in ("apiGroups", "resources", "verbs"))


def test_a_rule_check_that_can_fail() -> None:
    """:func:`allows` refuses what upstream's ClusterRole lacks (the TrainJob read)."""
    upstream = [{"apiGroups": [g], "resources": [r], "verbs": list(v)} for g, r, v in UPSTREAM_RULES]
    missing = [c for c in INITIALIZER_CALLS if not allows(upstream, c.verb, c.group, c.resource)]
    assert [(c.verb, c.resource) for c in missing] == [("get", "trainjobs"), ("update", "trainjobs/finalizers")]


def test_helm_lint_strict_with_the_data_cache() -> None:
    run(str(tools()["helm"]), "lint", "--strict", str(CHART), "--namespace", NAMESPACE, "--set", ",".join(ON))


def test_a_namespace_that_is_not_a_name_and_upstreams_other_values_are_refused_by_the_schema() -> None:
    for bad in ("dataCache.namespaces={Team_A}", "dataCache.lws.install=true", "dataCache.cacheImage.tag=x"):
        proc = subprocess.run(
            [str(tools()["helm"]), "template", "trainer", str(CHART), "--set", "dataCache.enabled=true", "--set", bad],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode != 0 and "schema" in proc.stderr, (bad, proc.stderr)
