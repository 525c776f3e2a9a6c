"""The operator's own identity from ``config/``, on a test cluster: its Namespace, ServiceAccount and
RBAC installed from ``kubectl kustomize`` of an overlay (everything but the Deployment, the Service
and the CRDs), and a kubeconfig that authenticates as that ServiceAccount with a token from
``kubectl create token``, so an operator run out of cluster has exactly the in-cluster permissions.

Used by :mod:`localcluster.multicluster`, by ``e2e/test_operate.py`` and, with
``TRAINER_E2E_OPERATOR_SA=1``, by :func:`localcluster.operator_process.running_operator` (the
``operator`` fixture of ``e2e/conftest.py``) for the whole suite.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Protocol

import yaml

from localcluster import ROOT

NAMESPACE = "trainer-system"
SERVICE_ACCOUNT = "trainer-operator"
IDENTITY_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
OVERLAYS = {
    "none": "default",
    "volcano": "overlays/volcano",
    "kueue": "overlays/kueue",
    "scheduler-plugins": "overlays/scheduler-plugins",
    "workload": "overlays/workload",
}
"""The ``config/`` directory deploying each ``--gang-scheduler-name``."""


class Kubectl(Protocol):
    """A cluster with ``run_kubectl`` and its admin ``kubeconfig`` (LocalCluster, ExternalCluster)."""

    @property
    def kubeconfig(self) -> Path: ...

    def run_kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]: ...


def render(cluster: Kubectl, overlay: str) -> list[dict[str, Any]]:
    """``kubectl kustomize config/<overlay>`` as documents. Raises ``CalledProcessError``."""
    out = cluster.run_kubectl("kustomize", str(ROOT / "config" / overlay)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def install_identity(cluster: Kubectl, overlay: str, workdir: Path) -> list[dict[str, Any]]:
    """Apply (server-side) the Namespace, ServiceAccount and RBAC of ``overlay``; returns them."""
    docs = [doc for doc in render(cluster, overlay) if doc["kind"] in IDENTITY_KINDS]
    path = workdir / f"identity-{overlay.replace('/', '-')}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs))
    cluster.run_kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    return docs


def token_kubeconfig(cluster: Kubectl, path: Path, duration: str = "24h") -> Path:
    """Write at ``path`` a kubeconfig for ServiceAccount ``trainer-system/trainer-operator`` (a token
    from ``kubectl create token``, the admin kubeconfig's server and CA); returns ``path``."""
    token = cluster.run_kubectl(
        "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, f"--duration={duration}"
    ).stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    server = next(c for c in admin["clusters"] if c["name"] == context["cluster"])["cluster"]
    user = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": server}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "cluster", "user": user}}],
        "current-context": "operator",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def operator_kubeconfig(cluster: Kubectl, gang_scheduler: str, workdir: Path) -> Path:
    """Install the identity of the overlay for ``gang_scheduler`` and return a kubeconfig using it."""
    install_identity(cluster, OVERLAYS[gang_scheduler], workdir)
    return token_kubeconfig(cluster, workdir / "operator-sa.kubeconfig")
