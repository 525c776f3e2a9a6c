"""A local Kubernetes control plane for e2e tests: real etcd and kube-* binaries, KWOK nodes.

``python -m e2e.cluster up|down|status`` drives it from a shell; :class:`LocalCluster` from Python.
:class:`ExternalCluster` stands for a cluster run by someone else (e.g. kind).
"""

from e2e.cluster.binaries import ensure_binaries
from e2e.cluster.cluster import LocalCluster
from e2e.cluster.external import ExternalCluster

__all__ = ["ExternalCluster", "LocalCluster", "ensure_binaries"]
