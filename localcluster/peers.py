"""Kueue and JobSet in the cluster, deployed as their own projects deploy them for their e2e suites.

Each is its project's kustomization rendered by the built ``kubectl kustomize`` and applied server-side:
Kueue's ``test/e2e/config/extended`` (``config/default`` with the configuration its extended e2e suites
run on: every integration on, one replica) from the module copy ``localcluster/build.sh kueue_e2e`` keeps,
and JobSet's ``config/default`` at the version Kueue requires (``jobset-config/`` beside the suites).
Their manager images are the binaries ``localcluster/build.sh`` built from the same modules, each in an
image of its own (:func:`localcluster.realnode.images.binary_image`: ``/manager``, user 65532, as their
Dockerfiles' distroless bases run it), imported into the real nodes. Three things are set in the rendered
manifests, as Kueue's e2e scripts set the image with ``kustomize edit set image``: the manager
container's image, and a node selector and toleration that put the pod on a real node (no registry is
reached, and KWOK nodes run no containers).

    deploy(cluster, nodes, KUEUE, work)                 # rendered, image built and imported, applied, rolled out
    deploy(cluster, nodes, JOBSET, work, wait=False)    # ... applied; then, later:
    rolled_out(cluster, JOBSET)
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localcluster.binaries import cache_dir, component_dir, ensure, versions
from localcluster.cluster import LocalCluster
from localcluster.realnode.images import binary_image
from localcluster.realnode.node import NODE_SELECTOR, RealNodes


def _log(message: str) -> None:
    print(f"[peers] {message}", file=sys.stderr, flush=True)


def kueue_source() -> Path:
    """The writable copy of Kueue's module that ``localcluster/build.sh kueue_e2e`` keeps: its e2e suites run
    from it and its kustomizations are rendered from it."""
    return cache_dir() / "src" / f"kueue_e2e-{versions()['KUEUE_VERSION']}"


@dataclass(frozen=True)
class Peer:
    """A peer project's controller: its built manager binary (a key of :func:`localcluster.binaries.ensure`,
    which also builds it, with the kustomizations beside it), where its kustomization is and what version
    it is (functions of the build cache), and its Deployment."""

    name: str
    binary: str
    kustomization: Callable[[], Path]
    version: Callable[[], str]
    namespace: str
    deployment: str
    container: str = "manager"
    kustomization_from: str = ""
    """The key of :func:`localcluster.binaries.ensure` whose build keeps the kustomization, when not
    ``binary``'s."""

    @property
    def needs(self) -> tuple[str, ...]:
        """The keys of :func:`localcluster.binaries.ensure` that :func:`render` builds first."""
        return (self.binary, self.kustomization_from) if self.kustomization_from else (self.binary,)

    def image(self) -> tuple[str, Path]:
        """The manager image (name, archive), built when missing."""
        binary = ensure(self.binary)[self.binary]
        return binary_image(f"localhost/{self.name}/{self.name}:{self.version()}", f"peer-{self.name}", binary)


KUEUE = Peer(
    "kueue",
    "kueue",
    lambda: kueue_source() / "test/e2e/config/extended",
    lambda: versions()["KUEUE_VERSION"],
    "kueue-system",
    "kueue-controller-manager",
    kustomization_from="singlecluster-extended.test",  # kueue_source() is the kueue_e2e component's copy
)
JOBSET = Peer(
    "jobset",
    "jobset-manager",
    lambda: component_dir("kueue_e2e") / "jobset-config" / "default",
    lambda: (component_dir("kueue_e2e") / "JOBSET_VERSION").read_text().strip(),
    "jobset-system",
    "jobset-controller-manager",
)


def render(cluster: LocalCluster, peer: Peer) -> list[dict[str, Any]]:
    """The peer's manifests as its kustomization renders them (``kubectl kustomize``); builds the peer
    first when its binary or kustomizations are missing."""
    ensure(*peer.needs)
    out = cluster.run_kubectl("kustomize", str(peer.kustomization())).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def placed(
    docs: Sequence[dict[str, Any]], peer: Peer, image: str, tolerations: Sequence[dict[str, str]] = ()
) -> list[dict[str, Any]]:
    """``docs`` with the peer's Deployment set to run ``image`` (pull policy ``IfNotPresent``: it is
    imported) on a real node (:data:`NODE_SELECTOR`, ``tolerations``); raises ``ValueError`` when the
    manifests have no such Deployment or container."""
    out = copy.deepcopy(list(docs))
    for doc in out:
        meta = doc.get("metadata") or {}
        if doc.get("kind") != "Deployment" or (meta.get("namespace"), meta.get("name")) != (
            peer.namespace,
            peer.deployment,
        ):
            continue
        spec = doc["spec"]["template"]["spec"]
        containers = [c for c in spec["containers"] if c["name"] == peer.container]
        if not containers:
            raise ValueError(f"Deployment {peer.namespace}/{peer.deployment} has no container {peer.container!r}")
        containers[0]["image"] = image
        containers[0]["imagePullPolicy"] = "IfNotPresent"
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **NODE_SELECTOR}
        spec["tolerations"] = [*(spec.get("tolerations") or []), *tolerations]
        return out
    raise ValueError(f"the manifests of {peer.name} have no Deployment {peer.namespace}/{peer.deployment}")


def deploy(
    cluster: LocalCluster,
    nodes: RealNodes,
    peer: Peer,
    work: Path,
    tolerations: Sequence[dict[str, str]] = (),
    wait: bool = True,
) -> dict[str, float]:
    """Render, place (:func:`placed`), import the image into every node of ``nodes``, apply server-side
    and, when ``wait``, wait for the Deployment's rollout (:func:`rolled_out`); returns the seconds each
    step took. Raises ``CalledProcessError`` (kubectl's output) when a step fails."""
    timings: dict[str, float] = {}
    t = time.monotonic()
    name, archive = peer.image()
    timings["image"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    nodes.import_archives([(name, archive)])
    timings["import"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    docs = placed(render(cluster, peer), peer, name, tolerations)
    manifest = work / f"{peer.name}.yaml"
    manifest.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    cluster.run_kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    timings["apply"] = round(time.monotonic() - t, 1)
    if wait:
        timings["rollout"] = rolled_out(cluster, peer)
    _log(f"{peer.name} {peer.version()} applied ({peer.namespace}/{peer.deployment}); timings {timings}")
    return timings


def rolled_out(cluster: LocalCluster, peer: Peer, timeout: str = "300s") -> float:
    """Wait for the peer's Deployment to complete its rollout (``kubectl rollout status``); returns the
    seconds waited. Raises ``CalledProcessError`` when it is not done within ``timeout``."""
    t = time.monotonic()
    cluster.run_kubectl(
        "rollout", "status", f"deployment/{peer.deployment}", "-n", peer.namespace, f"--timeout={timeout}"
    )
    return round(time.monotonic() - t, 1)
