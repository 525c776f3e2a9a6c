"""The Helm chart (``charts/trainer``) on the local cluster: ``helm install``, the sample TrainJob to
Complete under the chart's ServiceAccount and RBAC, through the chart's webhook configurations,
``helm uninstall``.

What this shows:

- every object the chart renders, its CRDs and webhook configurations included, passes a server-side
  dry run of the apiserver, and so does ``kubectl kustomize config/default`` (the same objects,
  ``tests/tooling/test_helm_chart.py``), whose ``kubectl delete -k`` therefore deletes its webhook
  configurations too;
- ``helm install`` (release ``e2e-helm`` in its own namespace, Deployment at 0 replicas) creates the
  ServiceAccount, ClusterRole and ClusterRoleBinding, the leader-election and certificate Roles and
  RoleBindings, both Services, the Deployment and the Validating/MutatingWebhookConfigurations
  ``trainer-webhook`` (no caBundle), and the release is ``deployed``;
- an operator holding nothing but a token of the chart's ServiceAccount (``kubectl create token``),
  electing itself leader on a Lease in the release namespace (the chart's Role), keeping its
  certificate Secret there (the chart's other Role) and patching only the caBundle of the chart's
  webhook configurations (the ClusterRole's ``resourceNames``), admits the sample TrainJob of
  ``config/samples`` through them, refuses an invalid one with the webhook's message, and runs the
  sample to ``Complete`` with no request refused;
- ``helm uninstall`` removes every object the release created, the webhook configurations included
  (a TrainJob is then admitted with no webhook serving), and leaves the CRDs (Helm's rule for a
  chart's ``crds/``).

What it does not show:

- the chart's Deployment running its image: KWOK nodes run no containers and the local cluster has
  no image registry, so the Deployment is installed with 0 replicas and the operator runs out of
  cluster (this module's ``operator`` fixture steps aside meanwhile), as ``python -m trainer``,
  which is the image's entrypoint (``e2e/test_operate.py`` runs it with the Deployment's arguments);
- the apiserver reaching the webhook through the chart's Service: the local apiserver has no network
  path to Services, so the test, as admin, points the installed configurations' clientConfig at the
  operator's port on 127.0.0.1 (the operator's caBundle patch is the same either way);
- Helm creating the CRDs: the session's cluster has those of ``config/crd/bases`` already, byte for
  byte the chart's ``crds/`` (``tests/tooling/test_helm_chart.py``), and Helm skips CRDs that exist;
- the gang schedulers other than ``none`` (their rules are compared with ``config/``'s in
  ``tests/tooling/test_helm_chart.py``);
- ``kubectl apply``/``delete -k config/default`` for real: it would replace the session's CRDs and the
  identity the suite's operators run as; the dry run and the render comparison stand in for it.
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

from e2e.helpers import ROOT, log_events, size, webhook_ca_patched
from e2e.test_trainjob import trainjob
from localcluster.binaries import ensure
from localcluster.client import Client, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from localcluster.operator_sa import NAMESPACE as OPERATOR_NAMESPACE
from trainer.api.kinds import MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.webhook.server import CONFIG_NAME

pytestmark = [pytest.mark.e2e, pytest.mark.builds("helm")]
CHART = ROOT / "charts" / "trainer"
RELEASE = "e2e-helm"
NAMESPACE = "trainer-helm-e2e"
PREFIX = f"{RELEASE}-trainer"  # the chart's names: release name + chart name
SERVICE_ACCOUNT = f"{PREFIX}-operator"
VALUES = ["replicas=0"]
"""The Deployment cannot run its image here (see the module docstring)."""
WEBHOOK_CONFIGURATIONS = {
    ("ValidatingWebhookConfiguration", CONFIG_NAME, ""),
    ("MutatingWebhookConfiguration", CONFIG_NAME, ""),
}
OBJECTS = {
    ("ServiceAccount", SERVICE_ACCOUNT, NAMESPACE),
    ("ClusterRole", f"{PREFIX}-operator", ""),
    ("ClusterRoleBinding", f"{PREFIX}-operator", ""),
    ("Role", f"{PREFIX}-leader-election", NAMESPACE),
    ("RoleBinding", f"{PREFIX}-leader-election", NAMESPACE),
    ("Role", f"{PREFIX}-webhook-certificates", NAMESPACE),
    ("RoleBinding", f"{PREFIX}-webhook-certificates", NAMESPACE),
    ("Service", f"{PREFIX}-operator-metrics", NAMESPACE),
    ("Service", f"{PREFIX}-webhook-service", NAMESPACE),
    ("Deployment", f"{PREFIX}-operator", NAMESPACE),
    # The Trainer version the kubeflow SDK reads, and who may read it (upstream's name, not the release's).
    ("ConfigMap", "kubeflow-trainer-public", NAMESPACE),
    ("Role", "kubeflow-trainer-public", NAMESPACE),
    ("RoleBinding", "kubeflow-trainer-public", NAMESPACE),
    *WEBHOOK_CONFIGURATIONS,
}
(PORT,) = reserved_ports(1)
"""The chart operator's webhook port on 127.0.0.1."""
CRDS = {
    "trainjobs.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
    "mpijobs.kubeflow.org",
    "optimizationjobs.trainer.kubeflow.org",
}


class Helm:
    """helm (built by ``localcluster/build.sh``) against the test cluster, its own state under the cluster's."""

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


def token_kubeconfig(
    cluster: Any, path: Path, service_account: str = SERVICE_ACCOUNT, namespace: str = NAMESPACE
) -> Path:
    """A kubeconfig at ``path`` that authenticates with a token of ``service_account`` in ``namespace``
    (by default the chart's operator ServiceAccount)."""
    token = cluster.run_kubectl("create", "token", service_account, "-n", namespace, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    server = next(c for c in admin["clusters"] if c["name"] == context["cluster"])["cluster"]
    user = f"system:serviceaccount:{namespace}:{service_account}"
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
        assert f"{qualified(kind)}/{name} serverside-applied (server dry run)" in result.stdout, (kind, result.stdout)


def qualified(kind: str) -> str:
    """How kubectl names ``kind`` in its output (``role.rbac.authorization.k8s.io``...)."""
    groups = {"Deployment": "apps", "ValidatingWebhookConfiguration": "admissionregistration.k8s.io"}
    groups["MutatingWebhookConfiguration"] = groups["ValidatingWebhookConfiguration"]
    groups |= dict.fromkeys(("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"), "rbac.authorization.k8s.io")
    return f"{kind.lower()}.{groups[kind]}" if kind in groups else kind.lower()


def test_the_kustomize_build_with_its_webhook_configurations_passes_a_server_side_dry_run(cluster: Any) -> None:
    """``kubectl apply -k config/default`` would create the webhook configurations, so ``kubectl delete
    -k`` deletes them (a dry run: applying it for real would replace what the session shares)."""
    # What goes in the namespace needs it to exist, even in a dry run (TRAINER_E2E_OPERATOR_SA made it).
    cluster.run_kubectl("create", "namespace", OPERATOR_NAMESPACE, check=False)
    result = cluster.run_kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-k",
        str(ROOT / "config" / "default"),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for kind, name, _ in sorted(WEBHOOK_CONFIGURATIONS):
        assert f"{qualified(kind)}/{name} serverside-applied (server dry run)" in result.stdout, result.stdout
    for kind, name in (("Role", "trainer-webhook-certificates"), ("RoleBinding", "trainer-webhook-certificates")):
        assert f"{qualified(kind)}/{name} serverside-applied (server dry run)" in result.stdout, result.stdout


def test_kubectl_delete_k_of_the_webhook_kustomization_leaves_no_webhook_configuration(cluster: Any) -> None:
    """``config/default`` includes ``config/webhook`` (dry run above): applied and then deleted for real
    with ``kubectl -k``, it leaves no webhook configuration behind (nothing else is touched)."""
    kustomization = str(ROOT / "config" / "webhook")
    applied = cluster.run_kubectl("apply", "--server-side", "-k", kustomization, check=False)
    try:
        assert applied.returncode == 0, applied.stderr
        for kind, name, _ in WEBHOOK_CONFIGURATIONS:
            assert exists(cluster, kind, name, ""), (kind, name)
    finally:
        deleted = cluster.run_kubectl("delete", "-k", kustomization, "--wait", check=False)
    assert deleted.returncode == 0, deleted.stderr
    for kind, name, _ in WEBHOOK_CONFIGURATIONS:
        assert not exists(cluster, kind, name, ""), f"{kind} {name} left behind by kubectl delete -k"


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


async def point_the_webhooks_at_127_0_0_1(client: Client) -> None:
    """As admin, replace the clientConfig of every installed webhook (the release's Service, which the
    local apiserver cannot reach) by ``https://127.0.0.1:<PORT><path>``, keeping the path."""
    for res in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS):
        config = await client.kube.get(res, None, CONFIG_NAME)
        ops: list[JSON] = []
        for i, hook in enumerate(config["webhooks"]):
            path = hook["clientConfig"]["service"]["path"]
            assert hook["clientConfig"]["service"]["name"] == f"{PREFIX}-webhook-service"
            assert "caBundle" not in hook["clientConfig"], "the chart sets no caBundle"
            ops.append(
                {
                    "op": "replace",
                    "path": f"/webhooks/{i}/clientConfig",
                    "value": {"url": f"https://127.0.0.1:{PORT}{path}"},
                }
            )
        await client.kube.json_patch(res, None, CONFIG_NAME, ops)


async def test_the_sample_trainjob_completes_under_the_charts_rbac(
    client: Client, cluster: Any, ns: str, operator: Operator, tmp_path: Path
) -> None:
    assert exists(cluster, "ServiceAccount", SERVICE_ACCOUNT, NAMESPACE), "the release is not installed"
    kubeconfig = token_kubeconfig(cluster, tmp_path / "chart-sa.kubeconfig")
    kubectl = str(getattr(cluster, "kubectl", "kubectl"))  # an ExternalCluster's is on PATH
    for verb, resource, expected in [
        ("create", "namespaces", "no"),  # the token is the chart's ServiceAccount's, not admin's
        ("watch", "trainjobs.trainer.kubeflow.org", "yes"),
        ("create", "jobs.batch", "yes"),
        # Least privilege: the webhook configurations by name, only read and patched; no Secret update
        # cluster-wide (the certificate Secrets are the release namespace's Role's; reading a Secret named
        # like a job's child, to tell whose it is, reads no more than the owned Secrets' list/watch).
        ("create", "validatingwebhookconfigurations.admissionregistration.k8s.io", "no"),
        ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io", "no"),
        ("patch", f"mutatingwebhookconfigurations.admissionregistration.k8s.io/{CONFIG_NAME}", "yes"),
        ("get", f"validatingwebhookconfigurations.admissionregistration.k8s.io/{CONFIG_NAME}", "yes"),
        ("update", "secrets/someone-elses", "no"),
        ("update", "secrets/trainer-webhook-certs", "no"),
    ]:
        can = subprocess.run(
            [kubectl, f"--kubeconfig={kubeconfig}", "auth", "can-i", verb, resource, "--all-namespaces"],
            capture_output=True,
            text=True,
        )
        assert can.stdout.strip() == expected, (verb, resource, can.stdout, can.stderr)
    for verb, resource in (("update", "secrets/trainer-webhook-certs"), ("create", "secrets")):
        can = subprocess.run(
            [kubectl, f"--kubeconfig={kubeconfig}", "auth", "can-i", verb, resource, "-n", NAMESPACE],
            capture_output=True,
            text=True,
        )
        assert can.stdout.strip() == "yes", (verb, resource, can.stdout, can.stderr)

    await point_the_webhooks_at_127_0_0_1(client)
    operator.stop()  # the module's operator steps aside: one reconciler at a time
    chart_operator = Operator(
        kubeconfig,
        cluster.state_dir / "logs" / "operator-helm-chart-sa.log",
        [
            "--gang-scheduler-name=none",
            "--leader-elect",
            f"--leader-election-namespace={NAMESPACE}",
            # What the Deployment passes (its namespace, its Service), and the host the webhooks now call.
            f"--webhook-port={PORT}",
            "--webhook-host=127.0.0.1",
            f"--webhook-namespace={NAMESPACE}",
            f"--webhook-service={PREFIX}-webhook-service",
        ],
    )
    offset = size(chart_operator.log_path)
    chart_operator.start()
    try:
        await wait_for(lambda: webhook_ca_patched(client.kube), "the chart's webhook configurations patched")
        await client.apply_file(ROOT / "config" / "samples" / "torch-distributed.yaml")  # admitted by the webhook
        obj = yaml.safe_load((ROOT / "config" / "samples" / "trainjob.yaml").read_text())
        bad = {**obj, "metadata": {"name": "no-such-runtime"}, "spec": {**obj["spec"], "runtimeRef": {"name": "none"}}}
        with pytest.raises(ApiError) as denied:
            await client.apply(bad, ns)
        assert 'admission webhook "validate.trainjobs.trainer.kubeflow.org" denied' in denied.value.message, (
            denied.value
        )
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


async def test_helm_uninstall_removes_the_release(client: Client, cluster: Any, helm: Helm, ns: str) -> None:
    assert all(exists(cluster, *obj) for obj in WEBHOOK_CONFIGURATIONS), "installed with the release"
    helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    assert RELEASE not in helm("list", "--namespace", NAMESPACE, "-q").stdout.split()
    left = [obj for obj in sorted(OBJECTS) if exists(cluster, *obj)]
    assert not left, left
    for name in CRDS:
        assert exists(cluster, "CustomResourceDefinition", name, ""), name
    # No failurePolicy: Fail webhook is left calling nothing: with no webhook served, a write is admitted.
    await client.apply(trainjob("after-uninstall", "torch-distributed", "ClusterTrainingRuntime", suspend=True), ns)
