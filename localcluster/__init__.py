"""A local Kubernetes control plane: real etcd and kube-* binaries, KWOK nodes (and, where the machine
allows it, real kubelet+containerd nodes: :mod:`localcluster.realnode`), built from the Go module proxy
by ``localcluster/build.sh`` into ``$TRAINER_CACHE`` (``~/.cache/trainer``).

``python -m localcluster up|down|status`` drives it from a shell; :class:`LocalCluster` from Python.
:class:`ExternalCluster` stands for a cluster run by someone else (e.g. kind). Beside it: the operator
as its own process (:mod:`localcluster.operator_process`), a client playing the user
(:mod:`localcluster.client`) and the demo (``python -m localcluster.demo``). The end-to-end tests
(``e2e/``) and the benchmarks (``bench/``) run on it.
"""

from pathlib import Path

from localcluster.binaries import ensure_binaries
from localcluster.cluster import LocalCluster
from localcluster.external import ExternalCluster

ROOT = Path(__file__).resolve().parent.parent
"""The repository: ``config/`` (CRDs, RBAC, samples) and the operator the cluster runs."""

__all__ = ["ROOT", "ExternalCluster", "LocalCluster", "ensure_binaries"]
