"""Volcano's scheduler, controller manager and webhook manager in the local cluster: their config
file, flags and admission webhook configurations.

Checked against volcano.sh/volcano@v1.15.1 (cmd/scheduler, cmd/controller-manager,
cmd/webhook-manager, pkg/scheduler/cache/cache.go, pkg/controllers/queue, pkg/webhooks/admission,
installer/helm/chart/volcano/templates/webhooks.yaml). Of Volcano's admission webhooks only the
validating ones of :data:`ADMISSIONS` run (queues: the hierarchy rules; Volcano Jobs: leaf queues
only), so nothing defaults Volcano objects: write complete ones (e.g. a PodGroup's ``spec.queue``).

- vc-scheduler creates the ``default`` and ``root`` queues at start (pkg/scheduler/cache:
  newDefaultAndRootQueue) and schedules the pods whose ``spec.schedulerName`` is ``volcano``; the
  queue controller of vc-controller-manager then marks them ``status.state: Open`` and gives every
  queue without ``spec.parent`` the parent ``root``.
- vc-controller-manager runs every controller but sharding by default; :data:`CONTROLLERS` are
  the ones that need no admission webhook.
- vc-webhook-manager serves ``--enabled-admission`` on ``--listen-address``/``--port`` with
  ``--tls-cert-file``; it expects its webhook configurations installed (named
  ``volcano-admission-service-<path with - for />``, as the Helm chart names them), waits up to
  5 minutes for each and writes ``--ca-cert-file`` into their caBundle, and serves once its queue
  informer has synced. It is started once the ``root`` and ``default`` queues are Open (with
  ``failurePolicy: Fail`` a queue webhook that does not answer yet would refuse their creation).
- vc-scheduler watches the *directory* of ``--scheduler-conf`` and reloads the file when it
  changes, hence a directory of its own. Its metrics (``--enable-metrics``) and healthz
  (``--enable-healthz``) servers are off by default, so it listens on no TCP port; it does
  listen on a unix socket (klog level control) in ``$DEBUG_SOCKET_DIR`` (default
  ``/tmp/klog-socks``), moved into the state directory.
"""

from __future__ import annotations

import base64
import socket
from pathlib import Path
from typing import Any

import yaml

from localcluster.api import ApiClient

SCHEDULER_NAME = "volcano"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
# The queues whose status.state must be Open before Volcano counts as ready (see the module doc).
READY_QUEUES = (ROOT_QUEUE, DEFAULT_QUEUE)
QUEUES_PATH = "/apis/scheduling.volcano.sh/v1beta1/queues"
# Controllers that need no admission webhook (names from each controller's Name()); the jobflow
# and jobtemplate controllers are left out.
CONTROLLERS = ("queue-controller", "pg-controller", "gc-controller", "job-controller")

SCHEDULER_CONF: dict[str, Any] = {
    # reclaim: a queue below its weighted share takes back what others hold beyond theirs, so
    # weights hold however the pods arrived.
    "actions": "enqueue, allocate, backfill, reclaim",
    "tiers": [
        {"plugins": [{"name": name} for name in ("priority", "gang", "conformance")]},
        {
            "plugins": [
                # 1.5: room to enqueue more demand than the cluster holds, so that queue weights
                # (proportion) decide who runs; a gang larger than 1.5x the cluster stays Pending.
                {"name": "overcommit", "arguments": {"overcommit-factor": 1.5}},
                *({"name": name} for name in ("drf", "predicates", "proportion", "nodeorder", "binpack")),
                # A PodGroup's networkTopology (hard mode: the gang within one HyperNode of tier
                # highestTierAllowed or lower) is enforced by this plugin's HyperNode gradient in
                # the allocate action; without it allocate takes the whole cluster as one domain
                # (docs/user-guide/how_to_use_network_topology_aware_scheduling.md). Its
                # HyperNode-level bin packing of pods without a topology is off, so that jobs
                # without one are placed as before.
                {
                    "name": "network-topology-aware",
                    "arguments": {"weight": 10, "hypernode.binpack.normal-pod.enable": False},
                },
            ]
        },
    ],
}


# Admission path -> (webhook name, rule): the validating webhooks of vc-webhook-manager run here
# (pkg/webhooks/admission/queues/validate and jobs/validate; the Helm chart's failurePolicy).
ADMISSIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "/queues/validate": (
        "validatequeue.volcano.sh",
        {
            "apiGroups": ["scheduling.volcano.sh"],
            "apiVersions": ["v1beta1"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["queues"],
        },
    ),
    "/jobs/validate": (
        "validatejob.volcano.sh",
        {
            "apiGroups": ["batch.volcano.sh"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["jobs"],
        },
    ),
}
WEBHOOK_CONFIG_PREFIX = "volcano-admission-service"
"""vc-webhook-manager's name of a configuration: this prefix, then the path with ``-`` for ``/``."""


def write_scheduler_conf(directory: Path) -> Path:
    """Write ``directory/scheduler.conf`` (only if its content changes: the scheduler reloads it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scheduler.conf"
    text = yaml.safe_dump(SCHEDULER_CONF, sort_keys=False)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def scheduler_args(kubeconfig: Path, scheduler_conf: Path, dump_dir: Path) -> list[str]:
    """The flags of vc-scheduler."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--scheduler-conf={scheduler_conf.resolve()}",
        f"--scheduler-name={SCHEDULER_NAME}",
        f"--default-queue={DEFAULT_QUEUE}",
        "--leader-elect=false",
        "--enable-metrics=false",
        "--enable-healthz=false",
        # Where SIGUSR2 dumps the scheduler cache (default /tmp).
        f"--cache-dump-dir={dump_dir}",
    ]


def env(kubeconfig: Path, socket_dir: Path) -> dict[str, str]:
    """Environment of both binaries.

    ``KUBECONFIG``: the device plugins' package (pkg/scheduler/api/devices, NewClient) builds a
    client of its own from ``$KUBECONFIG`` or ``~/.kube/config``, ignoring ``--kubeconfig``.
    ``DEBUG_SOCKET_DIR``: vc-scheduler's klog control socket goes to ``socket_dir``, not
    /tmp/klog-socks.
    """
    return {"KUBECONFIG": str(kubeconfig), "DEBUG_SOCKET_DIR": str(socket_dir)}


def controller_manager_args(kubeconfig: Path) -> list[str]:
    """The flags of vc-controller-manager."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--scheduler-name={SCHEDULER_NAME}",
        "--leader-elect=false",
        "--enable-healthz=false",
        f"--controllers={','.join(CONTROLLERS)}",
    ]


def webhook_configurations(ca_cert: Path, port: int) -> list[dict[str, Any]]:
    """One ValidatingWebhookConfiguration per :data:`ADMISSIONS` path, served at
    ``https://127.0.0.1:<port><path>`` with ``ca_cert`` (PEM) as caBundle. Raises ``OSError`` when
    ``ca_cert`` cannot be read."""
    ca_bundle = base64.b64encode(ca_cert.read_bytes()).decode()
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK_CONFIG_PREFIX + path.replace("/", "-")},
            "webhooks": [
                {
                    "name": name,
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle},
                    "failurePolicy": "Fail",
                    "matchPolicy": "Equivalent",
                    "sideEffects": "None",
                    "timeoutSeconds": 10,
                    "rules": [rule],
                }
            ],
        }
        for path, (name, rule) in ADMISSIONS.items()
    ]


def webhook_manager_args(kubeconfig: Path, cert_dir: Path, ca_cert: Path, port: int) -> list[str]:
    """The flags of vc-webhook-manager: :data:`ADMISSIONS` only, on 127.0.0.1:``port``, with
    ``cert_dir``'s ``tls.crt``/``tls.key``."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--tls-cert-file={cert_dir / 'tls.crt'}",
        f"--tls-private-key-file={cert_dir / 'tls.key'}",
        f"--ca-cert-file={ca_cert}",
        "--listen-address=127.0.0.1",
        f"--port={port}",
        f"--webhook-url=https://127.0.0.1:{port}",
        f"--enabled-admission={','.join(ADMISSIONS)}",
        f"--scheduler-name={SCHEDULER_NAME}",
        "--enable-healthz=false",
    ]


def serving(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def queues_open(api: ApiClient, names: tuple[str, ...] = READY_QUEUES) -> bool:
    """Whether every queue in ``names`` exists with ``status.state: Open``."""
    for name in names:
        try:
            status, body = api.get(f"{QUEUES_PATH}/{name}")
        except OSError:
            return False
        if status != 200 or (body.get("status") or {}).get("state") != "Open":
            return False
    return True
