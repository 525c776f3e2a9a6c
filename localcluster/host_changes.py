"""What ``make demo`` does to the host outside the project's directories, and how to undo each, printed
before it does any of it (:func:`lines`) and listed in docs/development.md ("What the demo changes on
the host"), which ``tests/tooling/test_demo_host_changes.py`` checks against :func:`changes`.

With real nodes (root on Debian, :func:`localcluster.realnode.node.unavailable` is None):

- Debian packages: :data:`localcluster.realnode.node.PACKAGES` and
  :data:`localcluster.operator_image.PACKAGES` (buildah), ``apt-get install``-ed when missing only;
- ``containerd.service``: Debian's containerd package enables and starts it where systemd runs (the
  nodes run their own containerd processes, not that service);
- the network: the bridge :data:`~localcluster.realnode.node.BRIDGE` with the pod gateway's address,
  a route of the Service range into it, the pods' network namespaces, iptables chains (kubelet,
  kube-proxy, the CNI portmap plugin) and the sysctls of :data:`localcluster.realnode.host.SYSCTLS`;
- ``/var/log/containers``, ``/var/log/pods`` and buildah's image store (:func:`image_store`: containers
  storage's ``graphroot``, ``/var/lib/containers/storage`` for root unless configured);
- :data:`NODES_DIR`: the real nodes' own directories (each node's containerd store holds the imported
  training image: about 9 GiB for the two), kept by ``--down`` so that the next demo needs no import.

``python -m localcluster.demo --down`` puts back the network, the sysctls, the chains and the log
directories (:mod:`localcluster.realnode.host` recorded them before the first node started); packages,
the service and the caches stay until removed with the commands :func:`changes` gives. On KWOK nodes
only the cache and the cluster's processes (all on loopback ports) are the demo's.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcluster import operator_image
from localcluster.binaries import cache_dir
from localcluster.cluster import SERVICE_CIDR
from localcluster.realnode import host
from localcluster.realnode.node import BRIDGE, GATEWAY, OWNER, PACKAGES, POD_CIDR, installed

STORAGE_CONF = Path("/etc/containers/storage.conf")
"""containers-storage's configuration for root when ``CONTAINERS_STORAGE_CONF`` names none."""
GRAPHROOT = "/var/lib/containers/storage"
"""containers-storage's image store for root when no configuration sets ``graphroot``."""
NODES_DIR = Path("/tmp/trainer-demo-nodes")
"""The demo's real nodes' directories (:class:`localcluster.realnode.node.RealNodes`); short: containerd's
shim socket paths (under each node's state directory) must fit 107 bytes."""
DOWN = "python -m localcluster.demo --down"
"""The command that stops what the demo left running and puts back what its nodes changed."""


@dataclass(frozen=True)
class Change:
    """One thing the demo does to the host (``what``) and the command or step that undoes it (``undo``)."""

    what: str
    undo: str


def packages() -> tuple[str, ...]:
    """Every Debian package the demo installs when missing, in the order it installs them (the real
    nodes', then buildah)."""
    return (*PACKAGES, *operator_image.PACKAGES)


def image_store() -> str:
    """Where buildah keeps images: ``[storage] graphroot`` of the file ``CONTAINERS_STORAGE_CONF`` names,
    else of :data:`STORAGE_CONF`, else :data:`GRAPHROOT` (containers-storage's own order; an unreadable
    or malformed file counts as none)."""
    conf = Path(os.environ.get("CONTAINERS_STORAGE_CONF") or STORAGE_CONF)
    try:
        storage = tomllib.loads(conf.read_text()).get("storage") or {}
    except (OSError, tomllib.TOMLDecodeError):
        storage = {}
    return str(storage.get("graphroot") or GRAPHROOT)


def changes(real: bool, is_installed: Callable[[str], bool] = installed) -> list[Change]:
    """What the demo does to the host, each with its undo, in the order it happens: with real nodes
    (``real``) the packages of :func:`packages` not installed now (``is_installed``), the service, the
    network, sysctls, iptables and files; on KWOK nodes the cache and the processes only."""
    cache = cache_dir()
    out: list[Change] = []
    if real:
        missing = [p for p in packages() if not is_installed(p)]
        out.append(
            Change(
                f"Debian packages, apt-get install-ed when missing (with their dependencies): {', '.join(packages())}; "
                f"missing now: {', '.join(missing) or 'none'}",
                f"apt-get purge {' '.join(missing)} && apt-get autoremove --purge" if missing else "nothing to undo",
            )
        )
        out.append(
            Change(
                "containerd.service: Debian's containerd package enables and starts it where systemd runs, when "
                f"it installs it ({'now' if 'containerd' in missing else 'installed already: no change'}); the "
                "nodes run their own containerd processes, not this service",
                "systemctl disable --now containerd.service",
            )
        )
        built = f"localhost/{operator_image.REPOSITORY}:{operator_image.chart_version()}"
        sysctls = ", ".join(s.replace("/", ".") for s in host.SYSCTLS)
        out += [
            Change(
                f"network: bridge {BRIDGE} with {GATEWAY} ({POD_CIDR}, pods), route {SERVICE_CIDR} (Services) "
                "into it, a network namespace per pod",
                DOWN,
            ),
            Change(
                f"iptables ({', '.join(host.TABLES)}): chains KUBE-* (kubelet, kube-proxy) and CNI-* (portmap), "
                "rules jumping to them",
                f"{DOWN} (deletes the chains that were not there before)",
            ),
            Change(f"sysctls the kubelet and the bridge plugin set: {sysctls}", f"{DOWN} (puts back each value)"),
            Change(
                f"{', '.join(str(d) for d in host.LOG_DIRS)} (the kubelet's log links), {OWNER.parent}",
                DOWN,
            ),
            Change(
                f"buildah's image store ({image_store()}): {built}, {operator_image.BASE.name} and their "
                "cached build steps (untagged)",
                f"buildah rmi {built} {operator_image.BASE.name}",
            ),
            Change(
                f"{NODES_DIR}: the real nodes' directories, their containerd stores with the training image "
                "imported (about 9 GiB), kept for the next demo",
                f"{DOWN}, then rm -rf {NODES_DIR}",
            ),
        ]
    out.append(
        Change(
            f"{cache}: built binaries, images and the cluster's state; local processes (etcd, kube-apiserver, "
            "... on loopback ports"
            + (", kubelets, containerd, kube-proxy, CoreDNS" if real else "")
            + ") keep running",
            f"{DOWN}, then rm -rf {cache}",
        )
    )
    return out


def lines(real: bool, is_installed: Callable[[str], bool] = installed) -> list[str]:
    """:func:`changes` as the demo prints them: a line per change and its undo."""
    return [f"{c.what}\n    undo: {c.undo}" for c in changes(real, is_installed)]
