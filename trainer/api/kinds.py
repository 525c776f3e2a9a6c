"""Every kind the project reads or writes, declared once: group, version, kind, plural and scope.

The pure core (builders, gang modules, admission rules), the HTTP shell (:mod:`trainer.framework.kube.client`,
the informers), CRD generation (:mod:`trainer.api.crd`) and the webhook routes all take a kind's coordinates
from here, so a group, version or plural is spelled in one place only. Upstream sources of the
third-party kinds: volcano-sh/apis ``pkg/apis/scheduling/v1beta1`` (PodGroup, Queue),
kubernetes-sigs/scheduler-plugins ``apis/scheduling/v1alpha1`` (PodGroup), kubernetes-sigs/kueue
``apis/kueue/v1beta2`` (LocalQueue, ClusterQueue, ResourceFlavor, Workload, AdmissionCheck,
MultiKueueConfig, MultiKueueCluster; served from Kueue v0.15, stored from v0.17; Kueue converts
to and from v1beta1 in its webhook).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class Resource:
    """A kind and where its REST collection lives."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def scope(self) -> str:
        """``Namespaced`` or ``Cluster``, as a CRD spells it."""
        return "Namespaced" if self.namespaced else "Cluster"

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        """The REST path of the collection (``name`` None) or of one object, optionally a subresource."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name)}"
        if sub:
            base += f"/{sub}"
        return base


TRAINER_GROUP, TRAINER_VERSION = "trainer.kubeflow.org", "v1alpha1"
KUBEFLOW_GROUP, KUBEFLOW_VERSION = "kubeflow.org", "v2beta1"
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"

# Ours (CRDs generated from trainer/api/).
TRAINJOBS = Resource(TRAINER_GROUP, TRAINER_VERSION, "TrainJob", "trainjobs")
TRAINING_RUNTIMES = Resource(TRAINER_GROUP, TRAINER_VERSION, "TrainingRuntime", "trainingruntimes")
CLUSTER_TRAINING_RUNTIMES = Resource(
    TRAINER_GROUP, TRAINER_VERSION, "ClusterTrainingRuntime", "clustertrainingruntimes", namespaced=False
)
OPTIMIZATION_JOBS = Resource(TRAINER_GROUP, TRAINER_VERSION, "OptimizationJob", "optimizationjobs")
"""A hyperparameter search whose trials are TrainJobs (kubeflow/trainer KEP-3562,
:mod:`trainer.api.optimizationjob`)."""
MPIJOBS = Resource(KUBEFLOW_GROUP, KUBEFLOW_VERSION, "MPIJob", "mpijobs")

# Kubernetes.
JOBS = Resource("batch", "v1", "Job", "jobs")
SERVICES = Resource("", "v1", "Service", "services")
PODS = Resource("", "v1", "Pod", "pods")
EVENTS = Resource("", "v1", "Event", "events")
CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps")
SECRETS = Resource("", "v1", "Secret", "secrets")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
SERVICE_ACCOUNTS = Resource("", "v1", "ServiceAccount", "serviceaccounts")
NAMESPACES = Resource("", "v1", "Namespace", "namespaces", namespaced=False)
NODES = Resource("", "v1", "Node", "nodes", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "Lease", "leases")
CRDS = Resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False)
VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", False
)
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", False
)
TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", namespaced=False
)
"""Who may read ``/metrics`` under ``--metrics-secure`` (:mod:`trainer.framework.delegated_auth`)."""
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
"""A gang TrainJob's budget against voluntary evictions (:mod:`trainer.trainjob.features.disruption`)."""
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies")
"""A TrainJob's ingress policy under ``--trainjob-network-policy`` (:mod:`trainer.trainjob.features.network_policy`)."""
RESOURCE_CLAIM_TEMPLATES = Resource("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates")
"""DRA claim templates (kubernetes/kubernetes ``staging/src/k8s.io/api/resource/v1``): the devices a
TrainJob's ``resourceClaimsPerNode`` asks for per node (:mod:`trainer.trainjob.spec.devices`)."""

# Gang schedulers and queues.
VOLCANO_PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
VOLCANO_QUEUES = Resource("scheduling.volcano.sh", "v1beta1", "Queue", "queues", namespaced=False)
VOLCANO_COMMANDS = Resource("bus.volcano.sh", "v1alpha1", "Command", "commands")
VOLCANO_HYPERNODES = Resource("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes", namespaced=False)
COSCHEDULING_PODGROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")
WORKLOADS = Resource("scheduling.k8s.io", "v1beta1", "Workload", "workloads")
"""The Workload API (kubernetes/api ``scheduling/v1beta1``, Kubernetes 1.37): one per TrainJob whose runtime
sets ``spec.scheduling``, under ``--gang-scheduler-name=workload`` (:mod:`trainer.jobs.gang.workload`)."""
POD_GROUPS = Resource("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups")
"""The kube-scheduler's PodGroup, one per group of the Workload; Pods join it by ``spec.schedulingGroup``."""
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
"""JobSet (kubernetes-sigs/jobset ``api/jobset/v1alpha2``): what Kubeflow Trainer makes of a TrainJob; this
operator reads those a cluster switched from it still has (:mod:`trainer.trainjob.features.upstream_jobset`)."""
KUEUE_LOCAL_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "LocalQueue", "localqueues")
KUEUE_CLUSTER_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "ClusterQueue", "clusterqueues", namespaced=False)
KUEUE_RESOURCE_FLAVORS = Resource(KUEUE_GROUP, KUEUE_VERSION, "ResourceFlavor", "resourceflavors", namespaced=False)
KUEUE_WORKLOADS = Resource(KUEUE_GROUP, KUEUE_VERSION, "Workload", "workloads")
KUEUE_ADMISSION_CHECKS = Resource(KUEUE_GROUP, KUEUE_VERSION, "AdmissionCheck", "admissionchecks", namespaced=False)
KUEUE_MULTIKUEUE_CONFIGS = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "MultiKueueConfig", "multikueueconfigs", namespaced=False
)
KUEUE_MULTIKUEUE_CLUSTERS = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "MultiKueueCluster", "multikueueclusters", namespaced=False
)

ALL: tuple[Resource, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Resource))
"""Every kind above."""
_BY_TYPE = {(r.api_version, r.kind): r for r in ALL}


def resource_of(obj: dict[str, Any]) -> Resource:
    """The :class:`Resource` of an object by its ``apiVersion`` and ``kind``. Raises ``KeyError``
    naming them when the kind is not declared here."""
    try:
        return _BY_TYPE[(obj["apiVersion"], obj["kind"])]
    except KeyError:
        raise KeyError(
            f"kind {obj.get('kind')!r} of {obj.get('apiVersion')!r} is not declared in trainer/api/kinds.py"
        ) from None
