"""localcluster.peers: what is changed in a peer's rendered manifests before they are applied."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.binaries import OPTIONAL_BINARIES, TOOLS, cache_dir
from localcluster.peers import JOBSET, KUEUE, Peer, placed
from localcluster.realnode.node import NODE_SELECTOR


def manifests() -> list[dict[str, Any]]:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [
                        {"name": "kube-rbac-proxy", "image": "proxy:1"},
                        {"name": "manager", "image": "registry.example/kueue:main", "imagePullPolicy": "Always"},
                    ],
                }
            }
        },
    }
    other = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "kueue-system"}}
    return [{"kind": "Namespace", "metadata": {"name": "kueue-system"}}, other, deployment]


def test_placed_sets_the_manager_image_and_a_real_node_and_nothing_else() -> None:
    docs = manifests()
    toleration = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    out = placed(docs, KUEUE, "localhost/kueue/kueue:v0.19.2", [toleration])
    spec = out[2]["spec"]["template"]["spec"]
    proxy, manager = spec["containers"]
    assert manager["image"] == "localhost/kueue/kueue:v0.19.2"
    assert manager["imagePullPolicy"] == "IfNotPresent"
    assert proxy == {"name": "kube-rbac-proxy", "image": "proxy:1"}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", **NODE_SELECTOR}
    assert spec["tolerations"] == [toleration]
    assert out[:2] == docs[:2]
    assert docs == manifests()  # the input is left as it was


def test_placed_refuses_manifests_without_the_deployment_or_its_container() -> None:
    with pytest.raises(ValueError, match="no Deployment kueue-system/kueue-controller-manager"):
        placed(manifests()[:2], KUEUE, "i")
    docs = manifests()
    docs[2]["spec"]["template"]["spec"]["containers"].pop()
    with pytest.raises(ValueError, match="no container 'manager'"):
        placed(docs, KUEUE, "i")


@pytest.mark.parametrize("peer", [KUEUE, JOBSET], ids=lambda peer: peer.name)
def test_render_first_builds_the_component_that_keeps_the_kustomization(peer: Peer) -> None:
    # A cold run rendered Kueue's kustomization before the kueue_e2e build that keeps it had run.
    built = {{**OPTIONAL_BINARIES, **TOOLS}[key][1] for key in peer.needs}
    where = peer.kustomization().relative_to(cache_dir())
    assert where.parts[0] in ("bin", "src")
    owner = where.parts[1].rsplit("-", 1)[0]
    assert owner in built, f"{peer.name}'s kustomization is in {owner}'s build, not one of {sorted(built)}"
