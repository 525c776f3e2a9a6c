"""The Helm chart (``charts/trainer``) on the local cluster: ``helm install``, the sample TrainJob to
Complete under the chart's ServiceAccount and RBAC, ``helm uninstall``.

What this shows:

- every object the chart renders, its CRDs included, passes a server-side dry run of the apiserver;
- ``helm install`` (release ``e2e-helm`` in its own namespace, Deployment at 0 replicas) creates the
  ServiceAccount, ClusterRole and ClusterRoleBinding, the leader-election Role and RoleBinding, both
  Services and the Deployment, and the release is ``deployed``;
- an operator holding nothing but a token of the chart's ServiceAccount (``kubectl create token``),
  electing itself leader on a Lease in the release namespace (the chart's Role), runs the sample
  TrainJob of ``config/samples`` to ``Complete`` with no request refused: the chart's RBAC is
  enough for the operator, as ``tests/tooling/test_helm_chart.py`` shows it equal to ``config/``'s;
- ``helm uninstall`` removes every object the release created and leaves the CRDs (Helm's rule for
  a chart's ``crds/``).

What it does not show:

- the chart's Deployment running its image: KWOK nodes run no containers and the local cluster has
  no image registry, so the Deployment is installed with 0 replicas and the operator runs out of
  cluster (this module's ``operator`` fixture steps aside meanwhile), as ``python -m trainer``,
  which is the image's entrypoint (``e2e/test_operate.py`` runs it with the Deployment's arguments);
- admission through the chart's webhook Service (the operator here serves no webhook);
- Helm creating the CRDs: the session's cluster has those of ``config/crd/bases`` already, byte for
  byte the chart's ``crds/`` (``tests/tooling/test_helm_chart.py``), and Helm skips CRDs that exist;
- the gang schedulers other than ``none`` (their rules are compared with ``config/``'s in
  ``tests/tooling/test_helm_chart.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.binaries import ensure
from e2e.helpers import ROOT, Client, log_events, size
from e2e.operator_process import Operator
from trainer.json_codec import JSON

pytestmark = pytest.mark.e2e
CHART = ROOT / "charts" / "trainer"
RELEASE = "e2e-helm"
NAMESPACE = "trainer-helm-e2e"
PREFIX = f"{RELEASE}-trainer"  # the chart's names: release name + chart name
SERVICE_ACCOUNT = f"{PREFIX}-operator"
VALUES = ["replicas=0"]
"""The Deployment cannot run its image here (see the module docstring)."""
OBJECTS = {
    ("ServiceAccount", SERVICE_ACCOUNT, NAMESPACE),
    ("ClusterRole", f"{PREFIX}-operator", ""),
    ("ClusterRoleBinding", f"{PREFIX}-operator", ""),
    ("Role", f"{PREFIX}-leader-election", NAMESPACE),
    ("RoleBinding", f"{PREFIX}-leader-election", NAMESPACE),
    ("Service", f"{PREFIX}-operator-metrics", NAMESPACE),
    ("Service", f"{PREFIX}-webhook-service", NAMESPACE),
    ("Deployment", f"{PREFIX}-operator", NAMESPACE),
}
CRDS = {
    "trainjobs.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
    "mpijobs.kubeflow.org",
}


class Helm:
    """helm (built by ``e2e/build.sh``) against the test cluster, its own state under the cluster's."""

    def __init__(self, cluster: Any) -> None:
        self.binary = ensure("helm")["helm"]
        self.kubeconfig = Path(cluster.kubeconfig)
        home = Path(cluster.state_dir) / "helm"
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        assert proc.returncode == 0 or not check, f"helm {' '.join(args)}: {proc.stderr}{proc.stdout}"
        return proc

    def template(self, *extra: str) -> list[JSON]:
        sets = [arg for value in VALUES for arg in ("--set", value)]
        out = self("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *sets, *extra).stdout
        return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def helm(cluster: Any) -> Iterator[Helm]:
    """helm, with no release of a previous run left; at the end none of this module's (a test that
    failed half-way may leave one) and not its namespace."""
    h = Helm(cluster)
    h("uninstall", RELEASE, "--namespace", NAMESPACE, "--ignore-not-found", "--wait")
    try:
        yield h
    finally:
        h("uninstall", RELEASE, "--namespace", NAMESPACE, "--ignore-not-found", "--wait", check=False)
        cluster.run_kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)


def key(doc: JSON) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace", "")


def exists(cluster: Any, kind: str, name: str, namespace: str) -> bool:
    args = ["get", kind.lower(), name, "-o", "name"] + (["-n", namespace] if namespace else [])
    proc = cluster.run_kubectl(*args, check=False)
    assert proc.returncode == 0 or "NotFound" in proc.stderr, proc.stderr
    return bool(proc.returncode == 0)


def token_kubeconfig(cluster: Any, path: Path) -> Path:
    """A kubeconfig at ``path`` that authenticates with a token of the chart's ServiceAccount."""
    token = cluster.run_kubectl("create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    server = next(c for c in admin["clusters"] if c["name"] == context["cluster"])["cluster"]
    user = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "cluster", "cluster": server}],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": "chart", "context": {"cluster": "cluster", "user": user}}],
                "current-context": "chart",
            }
        )
    )
    path.chmod(0o600)
    return path


def test_the_rendered_chart_passes_a_server_side_dry_run(cluster: Any, helm: Helm, tmp_path: Path) -> None:
    docs = helm.template("--include-crds")
    assert {key(d) for d in docs} == OBJECTS | {("CustomResourceDefinition", name, "") for name in CRDS}
    # What goes in the namespace needs it to exist, even in a dry run; helm install reuses it.
    cluster.run_kubectl("create", "namespace", NAMESPACE, check=False)
    path = tmp_path / "chart.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    # --force-conflicts: the CRDs were applied by the session under kubectl's field manager.
    result = cluster.run_kubectl(
        "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", str(path), check=False
    )
    assert result.returncode == 0, result.stderr
    for kind, name, _ in sorted(OBJECTS):
        group = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
        prefix = f"{kind.lower()}.rbac.authorization.k8s.io" if kind in group else kind.lower()
        if kind == "Deployment":
            prefix = "deployment.apps"
        assert f"{prefix}/{name} serverside-applied (server dry run)" in result.stdout, (kind, result.stdout)


def test_helm_install_creates_the_release(cluster: Any, helm: Helm) -> None:
    sets = [arg for value in VALUES for arg in ("--set", value)]
    helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace", *sets, "--wait")
    status = json.loads(helm("status", RELEASE, "--namespace", NAMESPACE, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    for kind, name, namespace in OBJECTS:
        assert exists(cluster, kind, name, namespace), (kind, name, namespace)
    deployment = json.loads(
        cluster.run_kubectl("get", "deployment", f"{PREFIX}-operator", "-n", NAMESPACE, "-o", "json").stdout
    )
    assert deployment["spec"]["replicas"] == 0
    assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["--gang-scheduler-name=none", "--leader-elect"]


async def test_the_sample_trainjob_completes_under_the_charts_rbac(
    client: Client, cluster: Any, samples: None, ns: str, operator: Operator, tmp_path: Path
) -> None:
    assert exists(cluster, "ServiceAccount", SERVICE_ACCOUNT, NAMESPACE), "the release is not installed"
    kubeconfig = token_kubeconfig(cluster, tmp_path / "chart-sa.kubeconfig")
    kubectl = str(getattr(cluster, "kubectl", "kubectl"))  # an ExternalCluster's is on PATH
    for verb, resource, expected in [
        ("create", "namespaces", "no"),  # the token is the chart's ServiceAccount's, not admin's
        ("watch", "trainjobs.trainer.kubeflow.org", "yes"),
        ("create", "jobs.batch", "yes"),
    ]:
        can = subprocess.run(
            [kubectl, f"--kubeconfig={kubeconfig}", "auth", "can-i", verb, resource, "--all-namespaces"],
            capture_output=True,
            text=True,
        )
        assert can.stdout.strip() == expected, (verb, resource, can.stdout, can.stderr)

    operator.stop()  # the module's operator steps aside: one reconciler at a time
    chart_operator = Operator(
        kubeconfig,
        cluster.state_dir / "logs" / "operator-helm-chart-sa.log",
        ["--gang-scheduler-name=none", "--leader-elect", f"--leader-election-namespace={NAMESPACE}"],
    )
    offset = size(chart_operator.log_path)
    chart_operator.start()
    try:
        obj = yaml.safe_load((ROOT / "config" / "samples" / "trainjob.yaml").read_text())
        await client.apply(obj, ns)
        done = await client.wait_condition(ns, obj["metadata"]["name"], "Complete", timeout=120)
        assert [j["name"] for j in done["status"]["jobsStatus"]] == ["node"]

        events = log_events(chart_operator.log_path, offset)
        identity = next(e["identity"] for e in events if e.get("event") == "starting")
        lease = json.loads(
            cluster.run_kubectl("get", "lease", "trainer-operator", "-n", NAMESPACE, "-o", "json").stdout
        )
        assert lease["spec"]["holderIdentity"] == identity  # it led, on the chart's Role
        assert any(e.get("event") == "applied" for e in events)
        refused = [e for e in events if str(e.get("error", "")).startswith("403") or "forbidden" in str(e).lower()]
        assert not refused, refused[:3]
        warnings = [
            e
            for e in await client.events(ns, obj["metadata"]["name"])
            if e.get("type") == "Warning" and e.get("reportingComponent") == "trainer"
        ]
        assert not warnings, [e.get("message") for e in warnings]
    finally:
        chart_operator.stop()
        operator.start()


def test_helm_uninstall_removes_the_release(cluster: Any, helm: Helm) -> None:
    helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    assert RELEASE not in helm("list", "--namespace", NAMESPACE, "-q").stdout.split()
    left = [obj for obj in sorted(OBJECTS) if exists(cluster, *obj)]
    assert not left, left
    for name in CRDS:
        assert exists(cluster, "CustomResourceDefinition", name, ""), name
