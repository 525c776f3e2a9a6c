"""The operator in the cluster, as users install it: ``helm install`` of ``charts/trainer`` with the image
built from the Dockerfile (:mod:`localcluster.operator_image`), on a local cluster with real nodes.

:class:`Release` imports the image into every real node's containerd, then installs, upgrades and
uninstalls the chart with the built helm. The operator's pods run on the real nodes: the apiserver calls
the webhooks through the chart's Service, training pods post progress to the status server through the
same Service, and metrics are read through the metrics Service (ClusterIPs, made real by kube-proxy:
:class:`localcluster.realnode.node.KubeProxy`). The cluster needs ServiceAccount admission (the pods'
tokens: ``LocalCluster(..., service_account_admission=True)``).

    release = Release(cluster, nodes)
    release.install()                      # image built (or found) and imported; helm upgrade --install --wait
    release.leader()                       # the pod holding the Lease
    release.install(tag="0.1.0-next")      # helm upgrade to the same image under a new tag: a rolling update
    release.uninstall()
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster.binaries import ensure
from localcluster.cluster import LocalCluster
from localcluster.operator_image import REPOSITORY, Built, chart_version, operator_image
from localcluster.realnode.images import manifest_digest
from localcluster.realnode.node import NODE_SELECTOR, RealNodes

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "trainer"
RELEASE = "trainer"
NAMESPACE = "trainer-system"
DEPLOYMENT = "trainer-operator"
LEASE = "trainer-operator"
"""The chart's Lease (``--leader-election-id`` default) in the release namespace."""
WEBHOOK_UNREACHABLE = "failed calling webhook"
"""What the apiserver says when it cannot call an admission webhook (its Service not reachable yet)."""


def _log(message: str) -> None:
    print(f"[incluster] {message}", file=sys.stderr, flush=True)


@dataclass
class Release:
    """The chart installed as ``release`` in ``namespace`` of ``cluster``, its pods on ``nodes``; ``values``
    are more ``--set`` pairs for every install and upgrade."""

    cluster: LocalCluster
    nodes: RealNodes
    release: str = RELEASE
    namespace: str = NAMESPACE
    values: dict[str, str] = field(default_factory=dict)
    image: Built | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``helm <args>`` against the cluster (the built helm); raises ``CalledProcessError`` with its output
        when ``check`` and it fails."""
        helm = ensure("helm")["helm"]
        result = subprocess.run(
            [str(helm), f"--kubeconfig={self.cluster.kubeconfig}", *args], capture_output=True, text=True
        )
        if check and result.returncode != 0:
            raise subprocess.CalledProcessError(result.returncode, result.args, result.stdout, result.stderr)
        return result

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.cluster.run_kubectl("-n", self.namespace, *args, check=check)

    def import_image(self, tag: str | None = None) -> Built:
        """Build (or find) the operator image tagged ``tag`` and import it into every real node."""
        t = time.monotonic()
        built = operator_image(tag)
        self.timings["image"] = round(time.monotonic() - t, 1)
        t = time.monotonic()
        self.nodes.import_archives([(built.name, built.archive)])
        self.timings["import"] = round(time.monotonic() - t, 1)
        return built

    def _set(self, tag: str) -> list[str]:
        assert self.image is not None
        pairs = {
            "image.repository": REPOSITORY,
            "image.tag": tag,
            "image.pullPolicy": "Never",  # imported into containerd; there is no registry
            # A rebuilt image under the same tag rolls the pods too (the annotation changes with it).
            "podAnnotations.image-digest": manifest_digest(self.image.archive),
            **{f"nodeSelector.{k}": v for k, v in NODE_SELECTOR.items()},
            **self.values,
        }
        return [f"--set={k}={v}" for k, v in pairs.items()]

    def install(self, tag: str | None = None, timeout: str = "300s") -> None:
        """Import the image, then ``helm upgrade --install --create-namespace --wait``: installs, or upgrades
        the installed release (a new ``tag`` rolls the pods; the same image and values leave it as it is);
        returns once the rollout is complete (:meth:`wait_ready`: every replica updated and available, no
        old one left; ``helm --wait`` returns once the new pods are ready, and the Deployment's
        ``minReadySeconds`` keeps an old pod a few seconds more) and admission answers. Raises
        ``CalledProcessError`` (with helm's output) when it is not within ``timeout``."""
        tag = tag or chart_version()
        self.image = self.import_image(tag)
        t = time.monotonic()
        args = ["upgrade", "--install", self.release, str(CHART), "-n", self.namespace, "--create-namespace"]
        args.append("--wait")
        self.helm(*args, f"--timeout={timeout}", *self._set(tag))
        self.wait_ready(timeout)
        self.timings["helm upgrade --install"] = round(time.monotonic() - t, 1)
        t = time.monotonic()
        self.wait_admission()
        self.timings["admission reachable"] = round(time.monotonic() - t, 1)
        _log(f"installed {self.release} in {self.namespace}; timings {self.timings}")

    def wait_admission(self, timeout: float = 60) -> None:
        """Until the apiserver reaches the chart's webhooks through their Service: a server-side dry run
        of a TrainJob is answered (admitted or refused) rather than failing with "failed calling webhook".
        ``helm --wait`` waits for ready pods only; a new Service's rules (kube-proxy) can come a moment
        later. Raises ``TimeoutError`` with the last error after ``timeout`` seconds."""
        probe = json.dumps(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "admission-probe", "namespace": "default"},
                "spec": {"runtimeRef": {"name": "torch-distributed"}},
            }
        )
        deadline = time.monotonic() + timeout
        while True:
            kubectl = [str(self.cluster.kubectl), f"--kubeconfig={self.cluster.kubeconfig}"]
            create = ["create", "--dry-run=server", "-o", "name", "-f", "-"]  # answered, written nowhere
            done = subprocess.run([*kubectl, *create], input=probe, capture_output=True, text=True)
            if WEBHOOK_UNREACHABLE not in done.stderr:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"admission not reachable after {timeout:.0f}s: {done.stderr.strip()}")
            time.sleep(0.5)

    def uninstall(self) -> None:
        """``helm uninstall --wait``."""
        self.helm("uninstall", self.release, "-n", self.namespace, "--wait", check=False)

    def wait_ready(self, timeout: str = "120s") -> None:
        """Wait until the release's operator Deployment (its name follows ``fullnameOverride``) has completed
        its rollout (``kubectl rollout status``: every replica updated and available, no old one left)."""
        selector = f"app.kubernetes.io/instance={self.release},app.kubernetes.io/component=operator"
        (name,) = self.kubectl("get", "deployment", "-l", selector, "-o", "name").stdout.split()
        self.kubectl("rollout", "status", name, f"--timeout={timeout}")

    def pods(self) -> list[dict[str, Any]]:
        """The operator's pods (the Deployment's) that are not being deleted, as JSON."""
        out = self.kubectl("get", "pods", "-o", "json").stdout
        return [
            p
            for p in json.loads(out)["items"]
            if p["metadata"]["name"].startswith(f"{DEPLOYMENT}-") and not p["metadata"].get("deletionTimestamp")
        ]

    def leader(self) -> str | None:
        """The name of the pod holding the Lease (its identity starts with the pod's hostname)."""
        out = self.kubectl("get", "lease", LEASE, "-o", "json", check=False)
        if out.returncode != 0:
            return None
        holder = str(json.loads(out.stdout).get("spec", {}).get("holderIdentity") or "")
        names = [p["metadata"]["name"] for p in self.pods()]
        return next((n for n in names if holder.startswith(n)), None)

    def logs(self, pod: str) -> str:
        return self.kubectl("logs", pod, "-c", "manager", check=False).stdout


@contextlib.contextmanager
def installed(
    cluster: LocalCluster,
    work: Path,
    images: tuple[str, ...] = ("busybox",),
    store: Path | None = None,
    values: dict[str, str] | None = None,
) -> Iterator[Release]:
    """Two real nodes for ``cluster`` under ``work`` with ``images`` (keys of
    :data:`localcluster.realnode.images.BUILDERS`; their containerd roots in ``store`` when given, as
    :class:`~localcluster.realnode.node.RealNodes` keeps them), and the chart installed on them
    (:meth:`Release.install`, with ``values`` as more ``--set`` pairs; ``timings["total"]``: its seconds).
    On the way out the release is uninstalled and the nodes stopped, whatever happened."""
    nodes = RealNodes(cluster, 2, work, images, store=store)
    nodes.start()
    try:
        release = Release(cluster, nodes, values=dict(values or {}))
        try:
            t = time.monotonic()
            release.install()
            release.timings["total"] = round(time.monotonic() - t, 1)
            yield release
        finally:
            release.uninstall()
    finally:
        nodes.stop()
