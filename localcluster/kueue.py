"""Kueue's manager run out of cluster: its Configuration, certificates, flags, CRD conversion,
admission webhooks and readiness.

Checked against sigs.k8s.io/kueue@v0.19.2 (cmd/kueue/main.go, apis/config/v1beta2, pkg/config,
config/components/crd, config/components/webhook, pkg/controller/jobs/trainjob). The flags are
only ``--config``, ``--kubeconfig`` (controller-runtime's), ``--feature-gates`` and zap's
``--zap-*``; everything else is in the Configuration file, which is decoded strictly (an unknown
field fails the start).

- ``internalCertManagement.enable: false``: Kueue does not create its Secret nor patch webhook
  configurations; its webhook server serves ``tls.crt``/``tls.key`` from ``webhook.certDir``,
  written here with the cluster CA.
- Admission webhooks: Kueue's TrainJob ones (:data:`WEBHOOK_RESOURCES`, from its
  ``config/components/webhook/manifests.yaml``, ``webhooks/`` beside the CRDs) are installed
  pointing at this Kueue (:func:`webhook_configurations`), for the TrainJobs carrying a queue
  label only. Since v0.17 Kueue admits a TrainJob through its own ``runtimePatches`` entry
  (manager ``kueue.x-k8s.io/manager``), which its defaulting webhook adds at creation; without it
  Kueue never unsuspends the job ("kueue runtime patch not found"), and MultiKueue drops it from
  the copy it creates on a worker for the worker's webhook to add again. Kueue's other webhooks
  are not installed: a Job or MPIJob must be created with ``suspend: true`` and its
  ``kueue.x-k8s.io/queue-name`` label (and, for MultiKueue, its ``managedBy``).
- Kueue serves ``kueue.x-k8s.io`` v1beta1 and v1beta2 (stored from v0.17, what its controllers
  use); the CRDs its kustomization patches for conversion (``conversion/`` beside the CRDs, see
  ``localcluster/build.sh``) are applied here with ``conversion.strategy: Webhook`` pointing at this
  Kueue's webhook server (``https://127.0.0.1:<port>/convert``, the cluster CA as caBundle):
  :func:`write_crds`.
- With internal cert management off, Kueue *always* loads the metrics server's certificate from
  the hard-coded ``/etc/kueue/metrics/certs/tls.{crt,key}`` (not configurable) and exits if they
  are missing, so :func:`ensure_metrics_certs` creates them there when absent.
- ``VisibilityOnDemand`` (beta, on by default) would start an extra API server on a fixed
  port: switched off.
- ``waitForPodsReady`` is on by default from v0.19 (timeout 30 min, ``blockAdmission`` false):
  left at Kueue's defaults unless a test restarts Kueue with its own
  (:meth:`localcluster.LocalCluster.restart_kueue`, e.g. a 20 s timeout and a
  ``requeuingStrategy``; ``apis/config/v1beta2`` ``WaitForPodsReady``). Kueue reads a TrainJob's
  readiness from ``status.jobsStatus`` (``ready`` + ``succeeded`` of every replicated job against
  the Jobs its runtime makes).
- Integrations whose CRD is missing at start (e.g. TrainJob) are deferred by Kueue until the CRD
  appears; but the CRDs should be there first so that their controllers start at once.
"""

from __future__ import annotations

import base64
import datetime
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from localcluster.pki import Pki, write_serving_cert
from trainer.api.kinds import KUEUE_CLUSTER_QUEUES

KUEUE_API_VERSION = KUEUE_CLUSTER_QUEUES.api_version
"""The version of the Kueue objects written here (``kueue.x-k8s.io/v1beta2``, see trainer/api/kinds.py)."""
FRAMEWORKS = ("batch/job", "kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob")
NAMESPACE = "kueue-system"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The resources whose Kueue admission webhooks the cluster installs (see the module doc).
WEBHOOK_RESOURCES = ("trainjobs",)
# Hard-coded in cmd/kueue/main.go (v0.14.5 to v0.19.2) when internalCertManagement is disabled.
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")


@dataclass(frozen=True)
class KueuePorts:
    """The loopback ports of one Kueue process."""

    webhook: int
    metrics: int
    health: int


def configuration(
    cert_dir: Path, ports: KueuePorts, wait_for_pods_ready: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Kueue ``Configuration`` object (``config.kueue.x-k8s.io/v1beta2``).

    ``wait_for_pods_ready`` is its ``waitForPodsReady`` (``timeout``, ``blockAdmission``,
    ``requeuingStrategy`` {timestamp, backoffLimitCount, backoffBaseSeconds, backoffMaxSeconds},
    ``recoveryTimeout``); ``None`` leaves Kueue's defaults (on, 30 min, from v0.19).
    """
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports.webhook, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.metrics}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.health}"},
        # The local API server takes much more than the default 20 QPS / burst 30.
        "clientConnection": {"qps": 100, "burst": 200},
        "featureGates": {"VisibilityOnDemand": False},
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }
    if wait_for_pods_ready is not None:
        config["waitForPodsReady"] = dict(wait_for_pods_ready)
    return config


def prepare(directory: Path, pki: Pki, ports: KueuePorts, wait_for_pods_ready: dict[str, Any] | None = None) -> Path:
    """Write the webhook certificate and the Configuration into ``directory``; return the config path.

    ``directory/webhook-certs/`` gets a fresh CA-signed serving certificate (SANs 127.0.0.1 and
    localhost) and ``directory/config.yaml`` the Configuration; the metrics certificates are made
    sure of (:func:`ensure_metrics_certs`). ``wait_for_pods_ready`` goes to :func:`configuration`.
    """
    cert_dir = directory / "webhook-certs"
    write_serving_cert(pki, cert_dir, "kueue-webhook", ("localhost",), ("127.0.0.1",))
    ensure_metrics_certs(pki)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(configuration(cert_dir, ports, wait_for_pods_ready), sort_keys=False))
    return path


def write_crds(source: Path, conversion: Path, dest: Path, ca_cert: Path, webhook_port: int) -> Path:
    """Copy the CRD manifests of ``source`` into ``dest`` (emptied first), with conversion by webhook.

    Every CRD named by a patch in ``conversion`` (Kueue's ``webhook_in_<plural>.yaml``: a CRD
    whose ``spec.conversion`` is ``Webhook`` through the ``/convert`` path of Kueue's webhook
    service) gets that conversion with ``clientConfig.url`` ``https://127.0.0.1:<webhook_port>/convert``
    and ``ca_cert`` (PEM) as caBundle, since Kueue runs outside the cluster. Returns ``dest``.
    Raises ``ValueError`` when a patch names a CRD ``source`` does not hold, ``OSError`` when a
    file cannot be read or written.
    """
    converted: dict[str, dict[str, Any]] = {}
    for patch_file in sorted(conversion.glob("*.yaml")) if conversion.is_dir() else []:
        patch = yaml.safe_load(patch_file.read_text())
        webhook = patch["spec"]["conversion"]["webhook"]
        converted[patch["metadata"]["name"]] = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {
                    "url": f"https://127.0.0.1:{webhook_port}{webhook['clientConfig']['service']['path']}",
                    "caBundle": base64.b64encode(ca_cert.read_bytes()).decode(),
                },
                "conversionReviewVersions": list(webhook["conversionReviewVersions"]),
            },
        }
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for manifest in sorted(source.glob("*.yaml")):
        crd = yaml.safe_load(manifest.read_text())
        name = (crd.get("metadata") or {}).get("name")
        if name in converted:
            crd["spec"]["conversion"] = converted.pop(name)
            (dest / manifest.name).write_text(yaml.safe_dump(crd, sort_keys=False))
        else:
            shutil.copyfile(manifest, dest / manifest.name)
    if converted:
        raise ValueError(f"conversion patches in {conversion} name CRDs missing from {source}: {sorted(converted)}")
    return dest


def webhook_configurations(
    manifest: Path, ca_cert: Path, webhook_port: int, resources: tuple[str, ...] = WEBHOOK_RESOURCES
) -> list[dict[str, Any]]:
    """Kueue's admission webhook configurations of ``manifest`` for ``resources``, served by this Kueue.

    ``manifest`` is Kueue's ``config/components/webhook/manifests.yaml`` (one
    MutatingWebhookConfiguration and one ValidatingWebhookConfiguration). Of each, the webhooks
    with a rule on one of ``resources`` are kept, their ``clientConfig`` a URL
    ``https://127.0.0.1:<webhook_port><path>`` with ``ca_cert`` (PEM) as caBundle, and an
    ``objectSelector`` on the queue label :data:`QUEUE_LABEL` (every other job in the cluster is
    left alone); each configuration is renamed ``kueue-<name>``, and one left without webhooks is
    dropped. Raises ``OSError`` when a file cannot be read, ``KeyError`` when a webhook names no
    service path.
    """
    ca_bundle = base64.b64encode(ca_cert.read_bytes()).decode()
    configurations: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(manifest.read_text()):
        if not doc:
            continue
        webhooks = []
        for webhook in doc.get("webhooks") or []:
            named = {r for rule in webhook.get("rules") or [] for r in rule.get("resources") or []}
            if not named & set(resources):
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{webhook_port}{path}", "caBundle": ca_bundle}
            webhook["objectSelector"] = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
            webhooks.append(webhook)
        if webhooks:
            meta = {"name": f"kueue-{doc['metadata']['name']}"}
            configurations.append({**doc, "metadata": meta, "webhooks": webhooks})
    return configurations


def write_webhooks(manifest: Path, dest: Path, ca_cert: Path, webhook_port: int) -> Path:
    """Write :func:`webhook_configurations` of ``manifest`` to the file ``dest``; return ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump_all(webhook_configurations(manifest, ca_cert, webhook_port), sort_keys=False))
    return dest


def read_ports(config: Path) -> KueuePorts | None:
    """The ports recorded in a Configuration written by :func:`prepare`, or ``None``."""
    try:
        data = yaml.safe_load(config.read_text())
        return KueuePorts(
            webhook=int(data["webhook"]["port"]),
            metrics=int(data["metrics"]["bindAddress"].rsplit(":", 1)[1]),
            health=int(data["health"]["healthProbeBindAddress"].rsplit(":", 1)[1]),
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, yaml.YAMLError):
        return None


def args(config: Path, kubeconfig: Path) -> list[str]:
    """The flags of the kueue manager."""
    return [f"--config={config}", f"--kubeconfig={kubeconfig}"]


def ensure_metrics_certs(pki: Pki, directory: Path = METRICS_CERT_DIR) -> None:
    """Create ``tls.crt``/``tls.key`` in ``directory`` unless a certificate valid for a day is there.

    The directory is shared by every local cluster on the machine (Kueue's path is fixed); the
    certificate is never checked by anyone, so any valid pair does, and an existing one is kept.
    """
    cert, key = directory / "tls.crt", directory / "tls.key"
    if key.exists():
        try:
            expiry = x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc
        except (OSError, ValueError):
            expiry = None
        if expiry and expiry > datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1):
            return
    try:
        write_serving_cert(pki, directory, "kueue-metrics", ("localhost",), ("127.0.0.1",))
    except PermissionError as err:
        raise RuntimeError(
            f"Kueue reads its metrics certificate from the fixed {directory}, "
            f"and that directory is not writable ({err}); create {cert} and {key} there once"
        ) from err


def ready(ports: KueuePorts) -> bool:
    """Whether the manager's ``/readyz`` answers 200 (its webhook server is up; controllers follow)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{ports.health}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


# --- Kueue objects (kueue.x-k8s.io/v1beta2, apis/kueue/v1beta2 of v0.19.2) --------------------


def resource_flavor(name: str, node_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A ResourceFlavor; ``node_labels`` select its nodes (Kueue writes them into admitted pods)."""
    spec: dict[str, Any] = {"nodeLabels": dict(node_labels)} if node_labels else {}
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster_queue(
    name: str,
    flavor: str,
    cpu: str,
    memory: str,
    namespaces: list[str] | None = None,
    admission_checks: list[str] | None = None,
) -> dict[str, Any]:
    """A ClusterQueue with one flavor's ``cpu`` and ``memory`` quota (Kubernetes quantities).

    ``namespaces`` limits it to those namespaces (default: every namespace); ``admission_checks``
    names AdmissionChecks every workload must pass (v1beta2 ``admissionChecksStrategy``).
    """
    selector: dict[str, Any] = {}
    if namespaces is not None:
        selector = {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)},
            ]
        }
    spec: dict[str, Any] = {
        "namespaceSelector": selector,
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}],
                    }
                ],
            }
        ],
    }
    if admission_checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check} for check in admission_checks]}
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cluster_queue_name: str) -> dict[str, Any]:
    """A LocalQueue ``name`` in ``namespace`` feeding ``cluster_queue_name``."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


# --- What Kueue writes to a TrainJob (pkg/controller/jobs/trainjob) ------------------------------

KUEUE_MANAGER = "kueue.x-k8s.io/manager"
"""The ``spec.runtimePatches[].manager`` of Kueue's own entry (``runtimePatchManagerName``)."""


def kueue_runtime_patch() -> dict[str, Any]:
    """The ``runtimePatches`` entry Kueue's defaulting webhook appends to a queued TrainJob at creation
    (``trainjob_webhook.go``, v0.17+): its manager and an empty JobSet spec patch, which admission fills."""
    return {"manager": KUEUE_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}


@dataclass(frozen=True)
class PodSetInfo:
    """What Kueue's admission assigns one pod set, a replicated job (``pkg/podset`` ``PodSetInfo``):
    the flavor's node labels and tolerations, and, under Topology Aware Scheduling, annotations and
    the ``kueue.x-k8s.io/topology`` scheduling gate."""

    name: str
    node_selector: dict[str, str]
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None
    scheduling_gates: list[str] | None = None


def _replicated_job_patch(info: PodSetInfo) -> dict[str, Any]:
    """One ``ReplicatedJobPatch`` as Kueue's typed struct serializes it (``omitempty``: an empty map or
    list is left out, the Pod template's ``metadata`` is always there)."""
    metadata = {k: dict(v) for k, v in (("labels", info.labels), ("annotations", info.annotations)) if v}
    spec: dict[str, Any] = {}
    if info.node_selector:
        spec["nodeSelector"] = dict(info.node_selector)
    if info.tolerations:
        spec["tolerations"] = [dict(t) for t in info.tolerations]
    if info.scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in info.scheduling_gates]
    return {"name": info.name, "template": {"spec": {"template": {"metadata": metadata, "spec": spec}}}}


def _with_kueue_entry(trainjob: dict[str, Any], replicated_jobs: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``spec.runtimePatches`` of ``trainjob`` whole, every other manager's entry as read, Kueue's with
    ``replicated_jobs`` (None: none, as ``RestorePodSetsInfo`` leaves it). Raises ``ValueError`` when the
    TrainJob has no Kueue entry ("kueue runtime patch not found")."""
    patches = [dict(p) for p in (trainjob.get("spec") or {}).get("runtimePatches") or []]
    for i, entry in enumerate(patches):
        if entry.get("manager") == KUEUE_MANAGER:
            spec = {"replicatedJobs": replicated_jobs} if replicated_jobs else {}
            patches[i] = {**entry, "trainingRuntimeSpec": {"template": {"spec": spec}}}
            return patches
    raise ValueError("kueue runtime patch not found")


def admission_patch(trainjob: dict[str, Any], podsets: list[PodSetInfo]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) by which Kueue starts an admitted ``trainjob``, as read: one
    request that carries ``spec.runtimePatches`` whole, Kueue's entry filled with each pod set's
    assignment, and ``spec.suspend: false``, with the resourceVersion read (kubernetes-sigs/kueue#14836:
    ``RunWithPodSetsInfo`` and the job reconciler's ``startJob`` patch with ``clientutil.Patch``, a
    ``client.MergeFrom`` whose original has its resourceVersion cleared; a merge patch replaces a list
    whole)."""
    patches = _with_kueue_entry(trainjob, [_replicated_job_patch(p) for p in podsets])
    return {
        "metadata": {"resourceVersion": _resource_version(trainjob)},
        "spec": {"runtimePatches": patches, "suspend": False},
    }


def _resource_version(trainjob: dict[str, Any]) -> str:
    return str((trainjob.get("metadata") or {}).get("resourceVersion") or "")


def suspend_patch(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch by which Kueue stops (evicts, preempts, deactivates) a running ``trainjob``,
    as read: ``spec.suspend: true`` alone, with the resourceVersion read (kubernetes-sigs/kueue#14836,
    ``Stop``). Kueue then waits until the TrainJob's ``status.jobsStatus`` counts no active pod and
    sends :func:`restore_patch`."""
    return {"metadata": {"resourceVersion": _resource_version(trainjob)}, "spec": {"suspend": True}}


def restore_patch(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch by which Kueue, having stopped ``trainjob`` (read once it has no active
    pod), takes its assignment back: ``spec.runtimePatches`` whole with Kueue's entry emptied
    (``RestorePodSetsInfo``), with the resourceVersion read (kubernetes-sigs/kueue#14836, ``Stop``)."""
    patches = _with_kueue_entry(trainjob, None)
    return {"metadata": {"resourceVersion": _resource_version(trainjob)}, "spec": {"runtimePatches": patches}}


def kueue_sees_runtime_patches(crd: dict[str, Any]) -> bool:
    """Whether Kueue integrates TrainJobs over the TrainJob CRD ``crd``: its check of the installed CRD
    (kubernetes-sigs/kueue#14886, ``pkg/controller/jobs/trainjob/crd_validation.go``,
    ``hasRuntimePatchesField``): some version of ``spec.versions`` whose ``served`` is the boolean true
    has ``runtimePatches`` among ``schema.openAPIV3Schema.properties.spec.properties``."""
    for version in crd.get("spec", {}).get("versions") or []:
        if not isinstance(version, dict) or version.get("served") is not True:
            continue
        props = version.get("schema", {}).get("openAPIV3Schema", {}).get("properties", {})
        if "runtimePatches" in props.get("spec", {}).get("properties", {}):
            return True
    return False
