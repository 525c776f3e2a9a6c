"""A local Kubernetes control plane for e2e tests: real etcd and kube-* binaries, KWOK nodes.

``python -m e2e.cluster up|down|status`` drives it from a shell; :class:`LocalCluster` from Python.
"""

from e2e.cluster.binaries import ensure_binaries
from e2e.cluster.cluster import LocalCluster

__all__ = ["LocalCluster", "ensure_binaries"]
