"""The chart's data cache RBAC (``dataCache``) on the local cluster: what the upstream dataset initializer
of ``torch-distributed-with-cache`` (kubeflow/trainer ``pkg/initializers/dataset/cache.py``) asks of the
apiserver, asked with a token of the chart's ServiceAccount ``kubeflow-trainer-cache-initializer``.

What this shows:

- ``helm template`` with ``dataCache.enabled`` and the test's namespace in ``dataCache.namespaces``
  renders objects the apiserver takes (applied as admin);
- with nothing but a token of that ServiceAccount, the initializer's requests, made as it makes them,
  succeed: read the TrainJob (suspended, on the ``torch-distributed-with-cache`` runtime, whose
  ``dataset-initializer`` Job's pods name that ServiceAccount), create ServiceAccount ``<tj>-cache`` and
  Service ``<tj>-cache-service`` owned by it (controller, ``blockOwnerDeletion``), delete the
  ServiceAccount (the initializer's clean-up); the apiserver's RBAC answers yes for what it asks of
  LeaderWorkerSets and for ``update trainjobs/finalizers`` (SelfSubjectAccessReview), no outside the
  listed namespaces and for what it never asks;
- the garbage collector deletes the Service with the TrainJob; the operator leaves it alone meanwhile
  (it carries none of the operator's labels).

What it does not show:

- the LeaderWorkerSet itself: the local cluster has no LeaderWorkerSet CRD or controller (docs/operating.md
  says how to install them), so its create and get are asked of the authorizer, not made;
- the OwnerReferencesPermissionEnforcement admission plugin: the local apiserver runs without it (it is off
  by default), so ``update trainjobs/finalizers`` is shown granted, not exercised;
- the initializer's image: KWOK nodes run no containers.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.helpers import ROOT
from e2e.test_helm import token_kubeconfig
from e2e.test_trainjob import trainjob
from localcluster.binaries import ensure
from localcluster.client import Client, wait_for
from trainer.framework.json_codec import JSON

pytestmark = [pytest.mark.e2e, pytest.mark.builds("helm")]
NAME = "kubeflow-trainer-cache-initializer"
RUNTIME = ROOT / "config" / "samples" / "upstream" / "torch-distributed-with-cache.yaml"


def render(ns: str) -> list[JSON]:
    """The chart's data cache objects for namespace ``ns``."""
    out = subprocess.run(
        [
            str(ensure("helm")["helm"]),
            "template",
            "trainer",
            str(ROOT / "charts" / "trainer"),
            "--namespace",
            "trainer-system",
            "--set",
            f"dataCache.enabled=true,dataCache.namespaces={{{ns}}}",
            "--show-only",
            "templates/data-cache.yaml",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


class As:
    """kubectl with a token of the cache initializer's ServiceAccount."""

    def __init__(self, cluster: Any, kubeconfig: Path) -> None:
        self.kubectl = str(getattr(cluster, "kubectl", "kubectl"))
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.kubectl, f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        proc = self(*args, stdin=stdin)
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout

    def can(self, verb: str, resource: str, ns: str) -> bool:
        """The apiserver's answer to a SelfSubjectAccessReview of ``verb`` on ``resource``
        (``<plural>[/<subresource>].<group>``, the core group without a dot) in namespace ``ns``."""
        plural, _, group = resource.partition(".")
        plural, _, subresource = plural.partition("/")
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": ns,
                    "verb": verb,
                    "group": group,
                    "resource": plural,
                    "subresource": subresource,
                }
            },
        }
        answer = json.loads(self.ok("create", "--validate=false", "-f", "-", "-o", "json", stdin=json.dumps(review)))
        return bool(answer["status"].get("allowed"))


@pytest.fixture
def cluster_role(cluster: Any) -> Iterator[None]:
    """The chart's ClusterRole, removed at the end (the namespaced objects go with the namespace)."""
    yield
    cluster.run_kubectl("delete", "clusterrole", NAME, "--ignore-not-found", check=False)


async def test_the_initializers_requests_succeed_with_the_charts_service_account(
    client: Client, cluster: Any, ns: str, cluster_role: None, tmp_path: Path
) -> None:
    objects = render(ns)
    assert sorted((d["kind"], d["metadata"].get("namespace", "")) for d in objects) == [
        ("ClusterRole", ""),
        ("RoleBinding", ns),
        ("ServiceAccount", ns),
    ]
    manifest = tmp_path / "data-cache.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    cluster.run_kubectl("apply", "--server-side", "-f", str(manifest))
    runtime = yaml.safe_load(RUNTIME.read_text()) | {"kind": "TrainingRuntime"}
    await client.apply(runtime, ns)
    await client.apply(trainjob("tj", "torch-distributed-with-cache", suspend=True), ns)

    async def initializer_jobs() -> list[JSON] | None:
        return [j for j in await client.jobs(ns, "tj") if j["metadata"]["name"] == "tj-dataset-initializer-0"] or None

    (job,) = await wait_for(initializer_jobs, "the suspended TrainJob's dataset-initializer Job")
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == NAME

    sa = As(cluster, token_kubeconfig(cluster, tmp_path / "cache.kubeconfig", NAME, ns))
    tj = json.loads(sa.ok("get", "trainjobs.trainer.kubeflow.org", "tj", "-n", ns, "-o", "json"))
    owner = {
        "apiVersion": tj["apiVersion"],
        "kind": tj["kind"],
        "name": "tj",
        "uid": tj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    meta = {"namespace": ns, "ownerReferences": [owner]}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tj-cache", **meta}}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "tj-cache-service", **meta},
        "spec": {
            "selector": {"app": "tj-cache-head"},
            "ports": [{"protocol": "TCP", "port": 50051, "targetPort": 50051}],
        },
    }
    sa.ok("create", "-f", "-", stdin=json.dumps(account))
    sa.ok("create", "-f", "-", stdin=json.dumps(service))
    sa.ok("delete", "serviceaccount", "tj-cache", "-n", ns)
    for verb in ("create", "get", "list", "watch"):
        assert sa.can(verb, "leaderworkersets.leaderworkerset.x-k8s.io", ns), verb
    assert sa.can("update", "trainjobs/finalizers.trainer.kubeflow.org", ns)
    for verb, resource, where in (
        ("get", "trainjobs.trainer.kubeflow.org", "default"),  # only the listed namespaces
        ("create", "services", "default"),
        ("update", "trainjobs.trainer.kubeflow.org", ns),  # never asked
        ("delete", "trainjobs.trainer.kubeflow.org", ns),
        ("delete", "services", ns),
        ("create", "pods", ns),
    ):
        assert not sa.can(verb, resource, where), (verb, resource, where)
    denied = sa("get", "trainjobs.trainer.kubeflow.org", "-n", "default")
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr

    assert await client.service(ns, "tj-cache-service") is not None, "the operator left it alone"
    cluster.run_kubectl("delete", "trainjob", "tj", "-n", ns, "--wait=true")

    async def collected() -> bool | None:
        return True if await client.service(ns, "tj-cache-service") is None else None

    assert await wait_for(collected, "the garbage collector to delete the Service with its TrainJob")
