"""TrainJob, TrainingRuntime and ClusterTrainingRuntime, API group ``trainer.kubeflow.org/v1alpha1``.

Field for field with kubeflow/trainer ``pkg/apis/trainer/v1alpha1/trainjob_types.go`` and
``trainingruntime_types.go`` (release v2.0, whose override field is ``podSpecOverrides``), plus
``runtimePatches`` from v2.2+ so that Kueue >= 0.17 and the kubeflow SDK >= 0.4 can write it.
The runtime template embeds a JobSet spec (kubernetes-sigs/jobset ``api/jobset/v1alpha2``);
only the fields the operator honours are modelled, the Job template itself passes through.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, JsonValue, field_validator

from trainer.api.base import (
    Condition,
    EnvVar,
    IntOrStr,
    KubeObject,
    LocalObjectReference,
    Model,
    ObjectMeta,
    PodSchedulingGate,
    VolumeMount,
    atomic_list,
    cel,
    list_map,
    refused,
    resource_requirements,
)
from trainer.api.jobset_v1alpha2 import (
    JOBSET_SPEC_RULES,
    JobSetSpec,
)
from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, TRAINER_GROUP, TRAINER_VERSION, TRAINING_RUNTIMES, TRAINJOBS
from trainer.api.scheduling_v1beta1 import (
    MAX_POD_GROUP_RESOURCE_CLAIMS,
    MAX_POD_GROUP_TEMPLATES,
    ONE_CLAIM_SOURCE,
    ONE_MODE,
    ONE_SCHEDULING_POLICY,
    DisruptionMode,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
)

GROUP, VERSION = TRAINER_GROUP, TRAINER_VERSION
API_VERSION = f"{GROUP}/{VERSION}"

# Well-known names (kubeflow/trainer pkg/constants/constants.go).
MANAGED_BY_TRAINER = "trainer.kubeflow.org/trainjob-controller"
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
SUPPORT_LABEL = "trainer.kubeflow.org/support"
"""A runtime's support status; ``deprecated`` (:data:`SUPPORT_DEPRECATED`) earns admission warnings."""
SUPPORT_DEPRECATED = "deprecated"
RUNTIME_DEPRECATION_POLICY_URL = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)
STEP_DATASET_INITIALIZER = "dataset-initializer"
STEP_MODEL_INITIALIZER = "model-initializer"
STEP_TRAINER = "trainer"
NODE_CONTAINER = "node"

# Condition types and reasons (trainjob_types.go).
COND_SUSPENDED = "Suspended"
COND_COMPLETE = "Complete"
COND_FAILED = "Failed"
COND_RUNNING = "Running"
REASON_SUSPENDED = "Suspended"
REASON_RESUMED = "Resumed"
REASON_RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
REASON_RESOURCES_CREATION_FAILED = "ResourcesCreationFailed"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"


# --------------------------------------------------------------------------- TrainingRuntime


class JobSetTemplateSpec(Model):
    """The template of the Jobs a TrainJob expands into."""

    metadata: KubeObject | None = None
    """Labels and annotations merged into every child Job."""
    spec: JobSetSpec | None = cel(*JOBSET_SPEC_RULES, default=None)
    """The replicated jobs and how they run together."""


ELASTIC_METRICS_MESSAGE = (
    "mlPolicy.torch.elasticPolicy.metrics is not supported: remove it; scale an elastic TrainJob through its "
    "/scale subresource (kubectl scale trainjob/<name> --replicas=N, or a HorizontalPodAutoscaler whose "
    "scaleTargetRef is the TrainJob)"
)
"""Refusal of ``elasticPolicy.metrics`` (KEP-2903 leaves open how metrics scale a TrainJob)."""
ELASTIC_BOUNDS_RULE = "!has(self.minNodes) || !has(self.maxNodes) || self.minNodes <= self.maxNodes"
ELASTIC_BOUNDS_MESSAGE = "elasticPolicy.minNodes must be <= elasticPolicy.maxNodes: lower minNodes or raise maxNodes"
ELASTIC_MAX_RULE = "has(self.maxNodes)"
ELASTIC_MAX_MESSAGE = "elasticPolicy.maxNodes is required: set the most nodes the job may scale up to"


class TorchElasticPolicy(Model):
    """Elastic training settings for torchrun (kubeflow/trainer KEP-2903, ``TorchElasticPolicy`` of Trainer
    v2.0-v2.1): the trainer runs between ``minNodes`` and ``maxNodes`` nodes (``PET_NNODES=min:max``, c10d
    rendezvous), a member's failure is absorbed (torchrun restarts the workers on the remaining nodes)
    and ``spec.trainer.numNodes`` may change while the job runs (the TrainJob's ``/scale``)."""

    max_restarts: int | None = Field(default=None, ge=0)
    """How many times the workers may restart on a failure or a membership change (torchrun's
    ``--max-restarts``, ``PET_MAX_RESTARTS``; torchrun's default 0 when unset), and how many failed pods
    the trainer's Job tolerates (its ``backoffLimit``)."""
    min_nodes: int | None = Field(default=None, ge=1)
    """Fewest nodes the job runs on (default 1); the gang's ``minMember``."""
    max_nodes: int | None = Field(default=None, ge=1)
    """Most nodes the job may scale up to (required)."""
    metrics: list[KubeObject] | None = refused(ELASTIC_METRICS_MESSAGE)
    """Refused (``autoscaling/v2`` MetricSpecs in upstream): a HorizontalPodAutoscaler targeting the
    TrainJob's ``/scale`` scales it instead."""

    @property
    def lowest(self) -> int:
        """``minNodes``, 1 when unset."""
        return self.min_nodes if self.min_nodes is not None else 1


class EnvInjectionTarget(Model):
    """Containers of one replicated job that get torchrun's environment (Trainer ``EnvInjectionTarget``)."""

    job_name: str = Field(min_length=1, max_length=253)
    """Name of the replicated job."""
    container_names: list[str] = Field(
        min_length=1,
        max_length=8,
        json_schema_extra={
            "x-kubernetes-list-type": "set",
            "x-kubernetes-validations": [
                {
                    "rule": "!self.exists(c, c == 'node')",
                    "message": "containerNames must not include the main node container because PET_* envs are "
                    "always injected into it",
                }
            ],
        },
    )
    """Containers (or init containers) of that replicated job."""


class EnvInjection(Model):
    """Where torchrun's environment is injected besides the trainer (Trainer ``EnvInjection``)."""

    targets: list[EnvInjectionTarget] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["jobName"]},
    )
    """The containers, by replicated job."""


class TorchMLPolicySource(Model):
    """The torch ML policy: torchrun's ``PET_*`` environment."""

    num_proc_per_node: IntOrStr | None = cel(
        (
            "(type(self) == int) || self in ['auto', 'cpu', 'gpu']",
            "numProcPerNode must be an integer or one of auto, cpu, gpu",
        ),
        default="auto",
    )
    """Processes per node: ``auto``, ``cpu``, ``gpu`` or an integer. Defaults to ``auto``."""
    elastic_policy: TorchElasticPolicy | None = cel(
        (ELASTIC_MAX_RULE, ELASTIC_MAX_MESSAGE), (ELASTIC_BOUNDS_RULE, ELASTIC_BOUNDS_MESSAGE), default=None
    )
    """Elastic training (kubeflow/trainer KEP-2903): the node count may vary between its bounds."""
    env_injection: EnvInjection | None = None
    """Other containers that get the same ``PET_*`` environment as the trainer's ``node`` container
    (Trainer v2.3), e.g. an init container that waits for the master."""


MPI_PROCS_RULE, MPI_PROCS_MESSAGE = "self >= 1", "NumProcPerNode in mpiPolicy must be >= 1"
"""The CEL rule of ``mlPolicy.mpi.numProcPerNode`` and its message (kubeflow/trainer#3809)."""
TRAINER_PROCS_RULE = "type(self) != int || self >= 1"
"""The CEL rule of ``spec.trainer.numProcPerNode``: kubeflow/trainer#3809's ``self >= 1`` on its integers
(the field also takes v2.0-v2.1's ``auto``, ``cpu`` and ``gpu``)."""
TRAINER_PROCS_MESSAGE = "numProcPerNode must be greater than or equal to 1"
"""kubeflow/trainer#3809's message for ``spec.trainer.numProcPerNode`` below 1."""


def at_least_one(value: int | None, message: str) -> int | None:
    """``value`` when unset or at least 1 (a ``numProcPerNode`` rule read without an apiserver). Raises
    ``ValueError`` with ``message`` below 1."""
    if value is not None and value < 1:
        raise ValueError(message)
    return value


class MPIMLPolicySource(Model):
    """The MPI ML policy: hostfile, SSH keys and launcher environment."""

    num_proc_per_node: int | None = cel((MPI_PROCS_RULE, MPI_PROCS_MESSAGE), default=1)
    """Slots per node, at least 1 (the CRD's rule and message are kubeflow/trainer#3809's). Defaults to 1."""
    mpi_implementation: Literal["OpenMPI", "Intel", "MPICH"] | None = "OpenMPI"
    """MPI implementation. Defaults to OpenMPI."""
    ssh_auth_mount_path: str | None = "/root/.ssh"
    """Where the SSH keys are mounted. Defaults to /root/.ssh."""
    run_launcher_as_node: bool | None = False
    """Let the launcher also run training processes. Defaults to false."""

    @field_validator("num_proc_per_node")
    @classmethod
    def _slots_at_least_one(cls, value: int | None) -> int | None:
        """The CRD's rule, for manifests read without an apiserver. Raises ``ValueError`` below 1."""
        return at_least_one(value, MPI_PROCS_MESSAGE)


class JAXMLPolicySource(Model):
    """The JAX ML policy (no settings): ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID`` and
    ``JAX_COORDINATOR_ADDRESS`` on the trainer's ``node`` container."""


class XGBoostMLPolicySource(Model):
    """The XGBoost ML policy (no settings): the ``DMLC_*`` collective environment on the trainer's
    ``node`` container."""


FLUX_PROCS_RULE, FLUX_PROCS_MESSAGE = "self >= 1", "NumProcPerNode in fluxPolicy must be >= 1"
"""The CEL rule of ``mlPolicy.flux.numProcPerNode`` and its message (kubeflow/trainer#3809)."""


class FluxMLPolicySource(Model):
    """The Flux ML policy (kubeflow/trainer ``FluxMLPolicySource``, v2.3): a Flux broker per training node,
    the first running the TrainJob's command under ``flux run``
    (:mod:`trainer.trainjob.policies.flux`)."""

    num_proc_per_node: int | None = cel((FLUX_PROCS_RULE, FLUX_PROCS_MESSAGE), default=1)
    """Tasks per node, at least 1 (``flux run -n`` is it times the nodes); ``spec.trainer.numProcPerNode``
    wins. Defaults to 1."""

    @field_validator("num_proc_per_node")
    @classmethod
    def _tasks_at_least_one(cls, value: int | None) -> int | None:
        """The CRD's rule, for manifests read without an apiserver. Raises ``ValueError`` below 1."""
        return at_least_one(value, FLUX_PROCS_MESSAGE)


ONE_POLICY = (
    "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.flux)].filter(x, x).size() <= 1"
)


class MLPolicy(Model):
    """The ML framework settings of a runtime; at most one of torch, mpi, flux, jax and xgboost."""

    num_nodes: int | None = Field(default=1, ge=0)
    """Number of training nodes, 0 or more (0: the trainer's Job runs no pod and completes, as a JobSet
    replicated job of ``replicas: 0``; kubeflow/trainer#3809 bounds only the TrainJob's, this one not at
    all, and a negative count is refused here). Defaults to 1."""
    torch: TorchMLPolicySource | None = None
    """Settings for torch (torchrun)."""
    mpi: MPIMLPolicySource | None = None
    """Settings for MPI."""
    flux: FluxMLPolicySource | None = None
    """Settings for Flux (HPC: a Flux broker per node, the TrainJob's command under ``flux run``)."""
    jax: JAXMLPolicySource | None = None
    """Settings for JAX (``jax.distributed.initialize`` from the environment)."""
    xgboost: XGBoostMLPolicySource | None = None
    """Settings for XGBoost (the collective's tracker environment)."""


class CoschedulingPodGroupPolicySource(Model):
    """scheduler-plugins coscheduling settings."""

    schedule_timeout_seconds: int | None = Field(default=60, ge=0)
    """Seconds the gang may wait to be scheduled. Defaults to 60."""


class NetworkTopologySpec(Model):
    """Network topology constraint of a Volcano PodGroup: volcano.sh/apis
    ``pkg/apis/scheduling/v1beta1`` ``NetworkTopologySpec``, as kubeflow/trainer's runtime API embeds
    it (``pkg/apis/trainer/v1alpha1/trainingruntime_types.go``). Volcano's scheduler places the
    gang within the HyperNodes (``topology.volcano.sh/v1alpha1``) it allows when its
    ``network-topology-aware`` plugin is enabled."""

    mode: Literal["hard", "soft"] | None = "hard"
    """``hard``: every pod of the gang within one HyperNode of tier ``highestTierAllowed`` or lower,
    else none runs; ``soft``: within one HyperNode as far as possible. Defaults to hard."""
    highest_tier_allowed: int | None = Field(default=1, ge=0)
    """The highest HyperNode tier the gang may span (with ``hard``). Defaults to 1."""


class VolcanoPodGroupPolicySource(Model):
    """Volcano settings."""

    network_topology: NetworkTopologySpec | None = None
    """Network topology constraint of the PodGroup, carried to its ``spec.networkTopology``; works
    with Volcano's network topology feature and HyperNode objects."""


class PodGroupPolicy(Model):
    """Gang scheduling settings of a runtime; at most one of coscheduling and volcano."""

    coscheduling: CoschedulingPodGroupPolicySource | None = None
    """Use the scheduler-plugins coscheduling PodGroup."""
    volcano: VolcanoPodGroupPolicySource | None = None
    """Use the Volcano PodGroup."""


def _rule(pair: tuple[str, str]) -> dict[str, Any]:
    """A CEL rule as the CRD schema carries it."""
    return {"rule": pair[0], "message": pair[1]}


NO_MIN_COUNT = (
    "!has(self.gang) || !has(self.gang.minCount)",
    "gang.minCount is computed from numNodes and must not be set",
)
"""kubeflow/trainer KEP-3015: a gang's ``minCount`` is always the operator's, from the TrainJob."""
TARGETED_ONCE = (
    "self.all(e, self.filter(o, o.targetReplicatedJobs.exists(n, n in e.targetReplicatedJobs)).size() == 1)",
    "a ReplicatedJob must not be targeted by more than one replicatedJobs entry",
)


class JobScheduling(Model):
    """Level 3 of KEP-3015: every Job (replica) of the targeted replicated job is a group of its own,
    its gang sized to that Job's pods, so replicas are placed and preempted independently."""

    scheduling_policy: PodGroupSchedulingPolicy | None = cel(ONE_SCHEDULING_POLICY, NO_MIN_COUNT, default=None)
    """The policy of each Job's group. Defaults to gang."""
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    """Topology constraints of each Job's group."""
    disruption_mode: DisruptionMode | None = cel(ONE_MODE, default=None)
    """How each Job's Pods may be disrupted."""
    resource_claims: list[PodGroupResourceClaim] | None = Field(
        default=None,
        max_length=MAX_POD_GROUP_RESOURCE_CLAIMS,
        json_schema_extra={"x-kubernetes-list-type": "atomic", "x-kubernetes-validations": [_rule(ONE_CLAIM_SOURCE)]},
    )
    """ResourceClaims each Job's Pods share (one per Job from a template)."""


class ReplicatedJobScheduling(Model):
    """Level 2 of KEP-3015: the targeted replicated jobs, every replica of each, form one group."""

    target_replicated_jobs: list[str] = Field(
        min_length=1,
        max_length=8,
        json_schema_extra={"x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 253}},
    )
    """Names of the runtime template's replicated jobs this entry groups; each is targeted by one entry."""
    scheduling_policy: PodGroupSchedulingPolicy | None = cel(ONE_SCHEDULING_POLICY, NO_MIN_COUNT, default=None)
    """The group's policy. Defaults to gang."""
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    """The group's topology constraints."""
    disruption_mode: DisruptionMode | None = cel(ONE_MODE, default=None)
    """How the group's Pods may be disrupted."""
    job: JobScheduling | None = None
    """Level 3 instead: a group per Job of the (single) targeted replicated job."""


class Scheduling(Model):
    """Workload-aware scheduling of a runtime's TrainJobs by the kube-scheduler itself (the Workload API,
    ``scheduling.k8s.io``), as kubeflow/trainer KEP-3015 proposes (``proposals/3015-workload-aware-scheduling``,
    kubeflow/trainer#3219; not in a release): each TrainJob gets one ``Workload`` and a ``PodGroup`` per
    group, created before any Pod; its Pods name their group in ``spec.schedulingGroup``. Either level 1
    (the fields below but ``replicatedJobs``: one group of every Pod) or level 2/3 (``replicatedJobs``,
    naming every replicated job once); the two mix only with CompositePodGroups, not built here."""

    scheduling_policy: PodGroupSchedulingPolicy | None = cel(ONE_SCHEDULING_POLICY, NO_MIN_COUNT, default=None)
    """Level 1: the policy of the TrainJob's one group. Defaults to gang (``minCount``: every Pod)."""
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    """Level 1: topology constraints of the TrainJob's group."""
    disruption_mode: DisruptionMode | None = cel(ONE_MODE, default=None)
    """Level 1: how the TrainJob's Pods may be disrupted."""
    replicated_jobs: list[ReplicatedJobScheduling] | None = Field(
        default=None,
        max_length=MAX_POD_GROUP_TEMPLATES,
        json_schema_extra={"x-kubernetes-list-type": "atomic", "x-kubernetes-validations": [_rule(TARGETED_ONCE)]},
    )
    """Levels 2 and 3: a group per entry (or per Job of its replicated job)."""


class RunPolicy(Model):
    """Lifecycle defaults of every TrainJob of a runtime, each overridden by the TrainJob's field of the
    same name (KEP-2899 ``RunPolicy``, proposed in kubeflow/trainer#3824, tracked by kubeflow/trainer#4052)."""

    active_deadline_seconds: int | None = Field(default=None, ge=1)
    """Seconds a TrainJob that sets no ``spec.activeDeadlineSeconds`` may be active (from
    ``status.startTime``) before it fails with reason ``DeadlineExceeded``."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Seconds after a TrainJob that sets no ``spec.ttlSecondsAfterFinished`` finished (Complete or Failed)
    that the TrainJob itself is deleted, its children with it; 0: at once."""


SCHEDULING_EXCLUSIVE = (
    "!(has(self.scheduling) && has(self.podGroupPolicy))",
    "scheduling and podGroupPolicy are mutually exclusive",
)
"""KEP-3015: a runtime asks for the Workload API or for a PodGroup plugin, not both."""


class TrainingRuntimeSpec(Model):
    """Specification of a (Cluster)TrainingRuntime."""

    ml_policy: MLPolicy | None = cel((ONE_POLICY, "Only one of the policy can be configured"), default=None)
    """ML framework settings."""
    pod_group_policy: PodGroupPolicy | None = cel(
        (
            "!(has(self.coscheduling) && has(self.volcano))",
            "podGroupPolicy: set only one of coscheduling and volcano",
        ),
        default=None,
    )
    """Gang scheduling settings."""
    scheduling: Scheduling | None = None
    """Gang scheduling by the kube-scheduler through the Workload API (KEP-3015, ahead of upstream); needs
    ``--gang-scheduler-name=workload`` and a cluster serving ``scheduling.k8s.io/v1beta1``."""
    template: JobSetTemplateSpec
    """The replicated jobs every TrainJob of this runtime expands into."""
    run_policy: RunPolicy | None = None
    """Deadline and TTL defaults of the runtime's TrainJobs (KEP-2899, kubeflow/trainer#3824)."""


class _RuntimeBase(Model):
    api_version: str = API_VERSION
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec = cel(SCHEDULING_EXCLUSIVE)


class TrainingRuntime(_RuntimeBase):
    """A namespaced blueprint of training jobs that TrainJobs in its namespace reference."""

    KIND: ClassVar[str] = TRAINING_RUNTIMES.kind
    PLURAL: ClassVar[str] = TRAINING_RUNTIMES.plural
    kind: str = TRAINING_RUNTIMES.kind


class ClusterTrainingRuntime(_RuntimeBase):
    """A cluster-wide blueprint of training jobs that TrainJobs in every namespace may reference."""

    KIND: ClassVar[str] = CLUSTER_TRAINING_RUNTIMES.kind
    PLURAL: ClassVar[str] = CLUSTER_TRAINING_RUNTIMES.plural
    kind: str = CLUSTER_TRAINING_RUNTIMES.kind


# --------------------------------------------------------------------------- TrainJob


class RuntimeRef(Model):
    """A reference to the runtime a TrainJob uses."""

    name: str = Field(min_length=1)
    """Name of the runtime. A TrainingRuntime must be in the TrainJob's namespace."""
    api_group: str | None = cel(
        (f"self == '{GROUP}'", f"apiGroup: unsupported runtime group; runtimes are {GROUP} (the default)"),
        default=GROUP,
    )
    """API group of the runtime. Defaults to ``trainer.kubeflow.org``."""
    kind: Literal["TrainingRuntime", "ClusterTrainingRuntime"] | None = "ClusterTrainingRuntime"
    """Kind of the runtime. Defaults to ClusterTrainingRuntime."""


class DatasetInitializer(Model):
    """Dataset initializer settings; applied to the container ``dataset-initializer``."""

    storage_uri: str | None = None
    """URI the dataset is downloaded from; becomes env ``STORAGE_URI``."""
    env: list[EnvVar] | None = list_map("name")
    """Environment merged into the initializer container."""
    secret_ref: LocalObjectReference | None = None
    """Secret with credentials, loaded as environment."""


class ModelInitializer(Model):
    """Model initializer settings; applied to the container ``model-initializer``."""

    storage_uri: str | None = None
    """URI the model is downloaded from; becomes env ``STORAGE_URI``."""
    env: list[EnvVar] | None = list_map("name")
    """Environment merged into the initializer container."""
    secret_ref: LocalObjectReference | None = None
    """Secret with credentials, loaded as environment."""


class Initializer(Model):
    """Dataset and model initialization."""

    dataset: DatasetInitializer | None = None
    """Dataset initializer settings."""
    model: ModelInitializer | None = None
    """Model initializer settings."""


# --------------------------------------------------------------------------- DRA (KEP-2782)

DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""An RFC 1123 label, as ``+kubebuilder:validation:Pattern`` writes it (a Pod's claim name is one)."""
MAX_CLAIMS = 32
"""At most this many claims per list (KEP-2782's ``MaxItems=32`` on ``resourceClaimsPerNode`` and
``PodSpecPatch.resourceClaims``)."""
CLAIMS_IN_RESOURCES_RULE = "!has(self.claims)"
"""CEL on ``spec.trainer.resourcesPerNode``: its ``claims`` are refused (KEP-2782 Validation)."""
CLAIMS_IN_RESOURCES_MESSAGE = (
    "resourcesPerNode.claims is not supported: request DRA devices with spec.trainer.resourceClaimsPerNode "
    "(name and resourceClaimTemplateName); the node container's resources.claims are wired from it"
)


class TrainerResourceClaim(Model):
    """One DRA claim of every training node (kubeflow/trainer KEP-2782 ``TrainerResourceClaim``,
    ``proposals/2782-dra-support/README.md``): each trainer pod gets its own ResourceClaim made from the
    template by the kube-controller-manager, bound to the pod and deleted with it."""

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)
    """Name of the claim inside the Pod (an RFC 1123 label): the Pod's ``spec.resourceClaims[].name`` and
    the ``node`` container's ``resources.claims[].name``."""
    resource_claim_template_name: str = Field(min_length=1, max_length=253)
    """Name of a ResourceClaimTemplate (``resource.k8s.io/v1``) in the TrainJob's namespace."""


class PodResourceClaim(Model):
    """A Pod's reference to a ResourceClaim or a ResourceClaimTemplate (``corev1.PodResourceClaim``), as
    ``runtimePatches`` carry it (KEP-2782 ``PodSpecPatch.resourceClaims``)."""

    name: str = Field(min_length=1)
    """Name of the claim inside the Pod; containers reference it in ``resources.claims``."""
    resource_claim_name: str | None = None
    """A ResourceClaim in the Pod's namespace, shared by every Pod that names it."""
    resource_claim_template_name: str | None = None
    """A ResourceClaimTemplate in the Pod's namespace: each Pod gets its own claim made from it."""


class Trainer(Model):
    """Trainer settings, applied to the container ``node`` of the replicated job labelled
    ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``."""

    image: str | None = None
    """Image of the training container."""
    command: list[str] | None = atomic_list()
    """Entrypoint of the training container."""
    args: list[str] | None = atomic_list()
    """Arguments to the entrypoint."""
    env: list[EnvVar] | None = list_map("name")
    """Environment merged into the training container."""
    num_nodes: int | None = Field(default=None, ge=0)
    """Number of training nodes, 0 or more (kubeflow/trainer#3809: ``Minimum=0``, as JobSet's replicas;
    0: the trainer's Job runs no pod and completes); overrides the runtime's ``mlPolicy.numNodes``."""
    resources_per_node: KubeObject | None = resource_requirements(
        (CLAIMS_IN_RESOURCES_RULE, CLAIMS_IN_RESOURCES_MESSAGE)
    )
    """Compute resources of each node (``corev1.ResourceRequirements``); the schema checks its quantities
    and refuses ``claims`` (KEP-2782: DRA claims go in ``resourceClaimsPerNode``)."""
    resource_claims_per_node: list[TrainerResourceClaim] | None = Field(
        default=None,
        max_length=MAX_CLAIMS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """DRA claims of each training node (KEP-2782): added by name to the trainer pods' ``resourceClaims``
    (replacing a runtime's or a runtime patch's of the same name) and to the ``node`` container's
    ``resources.claims``. Needs a cluster that serves ``resource.k8s.io/v1``."""
    num_proc_per_node: IntOrStr | None = cel((TRAINER_PROCS_RULE, TRAINER_PROCS_MESSAGE), default=None)
    """Processes per node: ``auto``, ``cpu``, ``gpu`` or an integer for torch; an integer for MPI. An
    integer must be at least 1 (kubeflow/trainer#3809's message; its rule ``self >= 1`` applies here to
    integers only, as the field also takes v2.0-v2.1's strings)."""

    @field_validator("num_proc_per_node")
    @classmethod
    def _procs_at_least_one(cls, value: int | str | None) -> int | str | None:
        """The CRD's rule, for manifests read without an apiserver. Raises ``ValueError`` below 1."""
        if isinstance(value, int) and value < 1:
            raise ValueError(TRAINER_PROCS_MESSAGE)
        return value


class PodSpecOverrideTargetJob(Model):
    """A replicated job an override applies to."""

    name: str
    """Name of the replicated job in the runtime."""


class ContainerOverride(Model):
    """Overrides of one container."""

    name: str
    """Name of the container; the runtime must have it."""
    env: list[EnvVar] | None = list_map("name")
    """Environment merged into the container; not allowed for ``node`` and the initializers."""
    volume_mounts: list[VolumeMount] | None = list_map("name")
    """Volume mounts added to the container."""


class PodTemplateSpecOverride(Model):
    """Overrides of a Pod template spec (v2.1 ``PodTemplateSpecOverride``)."""

    service_account_name: str | None = None
    """Service account of the Pods."""
    node_selector: dict[str, str] | None = None
    """Node selector merged into the Pods'."""
    affinity: KubeObject | None = None
    """Affinity of the Pods (``corev1.Affinity``)."""
    tolerations: list[KubeObject] | None = atomic_list()
    """Tolerations added to the Pods (``corev1.Toleration``)."""
    volumes: list[KubeObject] | None = list_map("name")
    """Volumes added to the Pods (``corev1.Volume``)."""
    init_containers: list[ContainerOverride] | None = list_map("name")
    """Overrides of init containers."""
    containers: list[ContainerOverride] | None = list_map("name")
    """Overrides of containers."""
    scheduling_gates: list[PodSchedulingGate] | None = list_map("name")
    """Scheduling gates added to the Pods; the Pods stay unscheduled until each gate is removed."""
    image_pull_secrets: list[LocalObjectReference] | None = list_map("name")
    """Image pull secrets added to the Pods."""


class PodSpecOverride(PodTemplateSpecOverride):
    """Overrides of the Pod templates of some replicated jobs (v2.0 ``PodSpecOverride``, written by
    Kueue 0.14.0-0.14.4; v2.1 fields affinity and imagePullSecrets included)."""

    target_jobs: list[PodSpecOverrideTargetJob] = Field(
        json_schema_extra={"x-kubernetes-list-type": "atomic"}, min_length=1
    )
    """Replicated jobs whose Pod templates are overridden."""


class PodTemplateOverride(Model):
    """Overrides of the Pod templates of some replicated jobs (v2.1 ``PodTemplateOverride``, written by
    Kueue 0.14.5-0.16)."""

    target_jobs: list[PodSpecOverrideTargetJob] = Field(
        json_schema_extra={"x-kubernetes-list-type": "atomic"}, min_length=1
    )
    """Replicated jobs whose Pod templates are overridden."""
    metadata: KubeObject | None = None
    """Labels and annotations merged into the Pod template metadata."""
    spec: PodTemplateSpecOverride | None = None
    """Overrides of the Pod template spec."""


class ContainerPatch(Model):
    """A patch of one container (Trainer v2.3 ``ContainerPatch``); the container must exist."""

    name: str
    """Name of the container in the runtime."""
    env: list[EnvVar] | None = list_map("name")
    """Environment merged by name; not allowed for ``node`` and the initializers (their env comes from
    ``spec.trainer`` and ``spec.initializer``)."""
    volume_mounts: list[VolumeMount] | None = list_map("mountPath")
    """Volume mounts merged by mount path."""
    security_context: KubeObject | None = None
    """Security context merged field by field (``corev1.SecurityContext``)."""
    resources: KubeObject | None = resource_requirements()
    """Compute resources (``corev1.ResourceRequirements``, KEP-2782): requests and limits merged key by
    key, ``claims`` (names of the Pod's ``resourceClaims``) replacing the container's list. For the
    trainer's ``node`` container, ``spec.trainer.resourcesPerNode`` and ``resourceClaimsPerNode`` win."""


class PodSpecPatch(Model):
    """A patch of a Pod spec (Trainer v2.3 ``PodSpecPatch``)."""

    service_account_name: str | None = None
    """Service account of the Pods."""
    volumes: list[KubeObject] | None = list_map("name")
    """Volumes merged by name (``corev1.Volume``)."""
    init_containers: list[ContainerPatch] | None = list_map("name")
    """Patches of init containers."""
    containers: list[ContainerPatch] | None = list_map("name")
    """Patches of containers."""
    image_pull_secrets: list[LocalObjectReference] | None = list_map("name")
    """Image pull secrets merged by name."""
    security_context: KubeObject | None = None
    """Pod security context merged field by field (``corev1.PodSecurityContext``)."""
    node_selector: dict[str, str] | None = None
    """Node selector merged key by key."""
    affinity: KubeObject | None = None
    """Affinity merged field by field (``corev1.Affinity``)."""
    tolerations: list[KubeObject] | None = atomic_list()
    """Tolerations; replace the runtime's whole list, as a strategic merge patch does."""
    scheduling_gates: list[PodSchedulingGate] | None = list_map("name")
    """Scheduling gates merged by name."""
    termination_grace_period_seconds: int | None = Field(default=None, ge=0)
    """Seconds the Pods get to stop."""
    resource_claims: list[PodResourceClaim] | None = Field(
        default=None,
        max_length=MAX_CLAIMS,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    """DRA claims of the Pods (KEP-2782), each replacing the template's of the same name whole; a container
    consumes one by naming it in its ``resources.claims``."""


class PodTemplatePatch(Model):
    """A patch of a Pod template (Trainer v2.3 ``PodTemplatePatch``)."""

    metadata: KubeObject | None = None
    """Labels and annotations merged key by key into the Pod template's."""
    spec: PodSpecPatch | None = None
    """The Pod spec patch."""


class JobSpecPatch(Model):
    """A patch of a Job spec (Trainer v2.3 ``JobSpecPatch``)."""

    template: PodTemplatePatch | None = None
    """The Pod template patch."""


class JobTemplatePatch(Model):
    """A patch of a replicated job's Job template (Trainer v2.3 ``JobTemplatePatch``)."""

    metadata: KubeObject | None = None
    """Labels and annotations merged key by key into the Jobs'."""
    spec: JobSpecPatch | None = None
    """The Job spec patch."""


class ReplicatedJobPatch(Model):
    """A patch of one replicated job (Trainer v2.3 ``ReplicatedJobPatch``); it must exist in the runtime."""

    name: str
    """Name of the replicated job."""
    template: JobTemplatePatch | None = None
    """The Job template patch."""


class JobSetSpecPatch(Model):
    """A patch of the runtime's JobSet spec (Trainer v2.3 ``JobSetSpecPatch``)."""

    replicated_jobs: list[ReplicatedJobPatch] | None = list_map("name")
    """Patches of replicated jobs, by name."""


class JobSetTemplatePatch(Model):
    """A patch of the runtime's template (Trainer v2.3 ``JobSetTemplatePatch``)."""

    metadata: KubeObject | None = None
    """Labels and annotations merged key by key into the runtime template's (they reach every Job)."""
    spec: JobSetSpecPatch | None = None
    """The JobSet spec patch."""


class TrainingRuntimeSpecPatch(Model):
    """A patch of a TrainingRuntime spec (Trainer v2.3 ``TrainingRuntimeSpecPatch``)."""

    template: JobSetTemplatePatch | None = None
    """The template patch."""


class RuntimePatch(Model):
    """A patch of the runtime made by one manager (v2.2+ ``RuntimePatch``), e.g. Kueue's admission."""

    manager: str = Field(min_length=1, max_length=253)
    """Who wrote the patch, e.g. ``kueue.x-k8s.io/manager``."""
    time: str | None = None
    """When the patch was written (RFC 3339)."""
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None
    """The patch: runtime template metadata, each replicated job's Job metadata, and its Pod template's
    metadata and spec, each merged at its level in list order."""


class TrainJobSpec(Model):
    """Specification of the desired TrainJob."""

    runtime_ref: RuntimeRef = cel(("self == oldSelf", "runtimeRef is immutable"))
    """The runtime the job expands from. Immutable."""
    initializer: Initializer | None = None
    """Dataset and model initialization."""
    trainer: Trainer | None = None
    """Trainer settings."""
    labels: dict[str, str] | None = None
    """Labels added to the child Jobs and their Pods."""
    annotations: dict[str, str] | None = None
    """Annotations added to the child Jobs and their Pods."""
    pod_spec_overrides: list[PodSpecOverride] | None = atomic_list()
    """Overrides of the Pod templates of chosen replicated jobs (v2.0 form; Kueue 0.14.0-0.14.4 writes here)."""
    pod_template_overrides: list[PodTemplateOverride] | None = atomic_list()
    """Overrides of the Pod templates of chosen replicated jobs (v2.1 form; Kueue 0.14.5-0.16 writes here)."""
    runtime_patches: list[RuntimePatch] | None = list_map("manager")
    """Patches of the runtime by managers such as Kueue >= 0.17 or the kubeflow SDK."""
    suspend: bool | None = False
    """Keep every child Job suspended (no Pods). Defaults to false."""
    active_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "activeDeadlineSeconds is immutable"}]
        },
    )
    """Seconds the job may run before it fails with reason DeadlineExceeded (v2.2+); the clock
    restarts when a suspended job resumes. Immutable."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Seconds after the job finished (Complete or Failed) that the TrainJob itself is deleted, its
    children with it (owner references); 0: at once; unset: the runtime's ``runPolicy`` default, else
    never. Mutable (KEP-2899, kubeflow/trainer#3824 and #4052)."""
    managed_by: str | None = cel(
        (
            f"self in ['{MANAGED_BY_TRAINER}', '{MANAGED_BY_MULTIKUEUE}']",
            f"managedBy must be {MANAGED_BY_TRAINER} or {MANAGED_BY_MULTIKUEUE}",
        ),
        ("self == oldSelf", "managedBy is immutable"),
        default=MANAGED_BY_TRAINER,
    )
    """The controller that reconciles this TrainJob. Immutable. Defaults to
    ``trainer.kubeflow.org/trainjob-controller``; ``kueue.x-k8s.io/multikueue`` delegates it."""


class JobStatus(Model):
    """Counts of the child Jobs of one replicated job (JobSet ``ReplicatedJobStatus``)."""

    name: str
    """Name of the replicated job."""
    ready: int = 0
    """Jobs whose ready plus succeeded pods reach their expected pod count."""
    succeeded: int = 0
    """Jobs that completed."""
    failed: int = 0
    """Jobs that failed."""
    active: int = 0
    """Jobs with at least one pending or running pod."""
    suspended: int = 0
    """Jobs that are suspended."""


class Metric(Model):
    """One training metric a trainer reported (kubeflow/trainer ``trainjob_types.go`` ``Metric``)."""

    name: str = Field(min_length=1, max_length=64)
    """A user-defined label for the metric, e.g. ``loss``, ``eval_accuracy``."""
    value: str = Field(min_length=1, max_length=64)
    """Value of the metric, serialized as a string."""


class Checkpoint(Model):
    """The last checkpoint the trainer saved, as it reported it (``trainerStatus.lastCheckpoint``; not in
    upstream's ``TrainerStatus``, this operator's extension of KEP-2779): where a resumed, restarted or
    resized job continues from."""

    epoch: int | None = Field(default=None, ge=0, le=2**31 - 1)
    """Epochs complete in the checkpoint (the next run starts at ``epoch + 1``); empty when unknown."""
    step: int | None = Field(default=None, ge=0)
    """Optimizer steps complete in the checkpoint; empty when unknown."""
    path: str | None = Field(default=None, min_length=1, max_length=256)
    """Where the checkpoint was written, as the trainer names it (e.g. a file on the job's volume)."""
    saved_time: str = Field(json_schema_extra={"format": "date-time"})
    """When the checkpoint was saved (RFC 3339); the time of the post that reported it when the trainer
    gives none."""


class TrainerStatus(Model):
    """The latest runtime status the trainer step reported (kubeflow/trainer ``trainjob_types.go``
    ``TrainerStatus``, KEP-2779), written by the operator's status server."""

    progress_percentage: int | None = Field(default=None, ge=0, le=100)
    """An estimate of how complete the TrainJob is, in percent (0 to 100); empty when unknown."""
    estimated_remaining_seconds: int | None = Field(default=None, ge=0)
    """Estimated training time left, in seconds; empty when unknown."""
    metrics: list[Metric] | None = Field(
        default=None, max_length=256, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """The current metrics of the model."""
    last_updated_time: str = Field(json_schema_extra={"format": "date-time"})
    """When the runtime status was observed (RFC 3339)."""
    last_checkpoint: Checkpoint | None = None
    """The last checkpoint the trainer reported saving (this operator's extension, not upstream's): kept
    across posts that do not report one, across suspend, resume and resize."""


class ReplicatedJobRestarts(Model):
    """The per-Job restart counts of one replicated job: the two lists of JobSet's
    ``ReplicatedJobStatus`` (kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``, v0.12)
    that ``jobsStatus`` (upstream TrainJob's copy of the rest) has no place for."""

    name: str
    """Name of the replicated job."""
    job_restarts: list[int] | None = Field(
        default=None, max_length=1024, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """``jobRestarts[i]``: how many times the Job of index ``i`` was recreated alone (``RestartJob`` or
    ``RestartJobAndIgnoreMaxRestarts``); its Job and Pods carry it as ``jobset.sigs.k8s.io/job-restart-attempt``."""
    job_restarts_count_towards_max: list[int] | None = Field(
        default=None, max_length=1024, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """``jobRestartsCountTowardsMax[i]``: those of the restarts of index ``i`` made by ``RestartJob``."""


class ElasticBounds(Model):
    """The node bounds of an elastic TrainJob: its runtime's ``mlPolicy.torch.elasticPolicy``."""

    min_nodes: int = Field(ge=1)
    """``minNodes`` (1 when the policy leaves it unset)."""
    max_nodes: int = Field(ge=1)
    """``maxNodes``."""


class TrainJobStatus(Model):
    """Observed state of a TrainJob."""

    conditions: list[Condition] | None = list_map("type")
    """Conditions: Suspended, Running, Complete, Failed."""
    jobs_status: list[JobStatus] | None = list_map("name")
    """Child Job counts per replicated job."""
    restarts: int | None = Field(default=None, ge=0)
    """Restarts of the whole group by the runtime's failurePolicy (JobSet's ``status.restarts``; not in
    upstream TrainJob)."""
    restarts_count_towards_max: int | None = Field(default=None, ge=0)
    """Restarts of the whole group counted against ``maxRestarts`` (JobSet's
    ``status.restartsCountTowardsMax``)."""
    replicated_jobs_status: list[ReplicatedJobRestarts] | None = list_map("name")
    """Per-Job restarts by ``RestartJob`` and ``RestartJobAndIgnoreMaxRestarts``, per replicated job
    (JobSet's ``status.replicatedJobsStatus[].jobRestarts`` and ``.jobRestartsCountTowardsMax``; not in
    upstream TrainJob); only replicated jobs with such a restart are listed."""
    trainer_status: TrainerStatus | None = None
    """The latest runtime status of the trainer step (progress, remaining time, metrics), as the
    trainer's pods post it to the operator's status server; empty until one does."""
    start_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When the job last became active (RFC 3339), as JobSet's ``status.startTime`` (kubernetes-sigs/jobset
    KEP-1186): set when it is first not suspended, cleared while it is suspended, set again on resume and
    on a restart of the whole group; ``activeDeadlineSeconds`` counts from it. Kept once finished."""
    completion_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When the job finished, Complete or Failed (RFC 3339): the time of that condition; set once."""
    replicas: int | None = Field(default=None, ge=0)
    """Active pods of the trainer's Jobs: the ``status.replicas`` of the TrainJob's ``/scale`` (not in
    upstream TrainJob)."""
    selector: str | None = None
    """The trainer's pods as a label selector (``jobset.sigs.k8s.io/jobset-name=<trainjob>,
    jobset.sigs.k8s.io/replicatedjob-name=<trainer>``): the ``/scale`` selector a HorizontalPodAutoscaler
    reads pod metrics with (not in upstream TrainJob)."""
    elastic: ElasticBounds | None = None
    """The bounds of an elastic TrainJob (its runtime's ``elasticPolicy``), within which ``numNodes`` may
    change while it runs (not in upstream TrainJob)."""


RESIZE_FIELDS = ("numNodes", "resourcesPerNode")
"""The fields of ``spec.trainer`` that size a TrainJob: the CRD lets them change only while it is suspended
(:func:`changed_only_while_suspended`); the webhook holds every field of ``spec.trainer`` so."""


def _num_nodes_set(o: str) -> str:
    return f"has({o}.spec.trainer) && has({o}.spec.trainer.numNodes)"


ELASTIC_STATUS = "has(oldSelf.status) && has(oldSelf.status.elastic)"
"""CEL: the stored TrainJob is elastic (the operator reported its bounds, ``status.elastic``)."""


def unchanged(name: str) -> str:
    """CEL on the whole TrainJob: ``spec.trainer.<name>`` is set on both sides with one value, or on neither."""
    now, was = (f"has({o}.spec.trainer) && has({o}.spec.trainer.{name})" for o in ("self", "oldSelf"))
    return f"({now}) == ({was}) && (!({now}) || self.spec.trainer.{name} == oldSelf.spec.trainer.{name})"


def changed_only_while_suspended(name: str, unless: str | None = None) -> dict[str, JsonValue]:
    """The CRD's transition rule on the TrainJob for ``spec.trainer.<name>``: it may change (be set, unset
    or take another value) only when the stored TrainJob is suspended (``spec.suspend`` true before the
    update, so the update that resumes it may carry the change), or when the CEL condition ``unless``
    holds (``numNodes`` of an elastic TrainJob: :data:`ELASTIC_STATUS`), reported at
    ``spec.trainer.<name>``. kubeflow/trainer keeps ``spec.trainer`` immutable (#3157); #3995 asks for this
    of ``numNodes``."""
    rule = f"(has(oldSelf.spec.suspend) && oldSelf.spec.suspend) || ({unchanged(name)})"
    if unless is not None:
        rule = f"({unless}) || {rule}"
    return {
        "rule": rule,
        "message": f"{name} may change only while the TrainJob is suspended (spec.suspend true before the update): "
        f"set spec.suspend to true first, then change {name}; the update that resumes the job may carry it",
        "fieldPath": f".spec.trainer.{name}",
    }


def within_elastic_bounds(bound: str) -> dict[str, JsonValue]:
    """The CRD's rule that a changed ``spec.trainer.numNodes`` of an elastic TrainJob is not beyond ``bound``
    (``minNodes`` or ``maxNodes`` of ``status.elastic``), from any client (``/scale`` included); the message
    names the bound (a ``messageExpression`` giving its value costs more than a CRD may spend)."""
    below = bound == "minNodes"
    compare = ">=" if below else "<="
    num = "self.spec.trainer.numNodes"
    return {
        "rule": f"!({ELASTIC_STATUS}) || ({unchanged('numNodes')}) || !({_num_nodes_set('self')}) "
        f"|| {num} {compare} oldSelf.status.elastic.{bound}",
        "message": f"numNodes is {'below' if below else 'above'} mlPolicy.torch.elasticPolicy.{bound} of this "
        "elastic TrainJob: scale between status.elastic.minNodes and status.elastic.maxNodes",
        "fieldPath": ".spec.trainer.numNodes",
    }


TRAINJOB_RULES: list[dict[str, JsonValue]] = [
    *(changed_only_while_suspended(f, ELASTIC_STATUS if f == "numNodes" else None) for f in RESIZE_FIELDS),
    within_elastic_bounds("minNodes"),
    within_elastic_bounds("maxNodes"),
]
"""The CRD's rules on the whole TrainJob: the resize fields change only while it is suspended, but for
``numNodes`` of an elastic TrainJob, which stays within its bounds."""
TRAINJOB_SCALE: dict[str, JsonValue] = {
    "specReplicasPath": ".spec.trainer.numNodes",
    "statusReplicasPath": ".status.replicas",
    "labelSelectorPath": ".status.selector",
}
"""The TrainJob's ``/scale`` subresource (not in upstream): ``numNodes``, the trainer's active pods, their
selector."""


class TrainJob(Model):
    """A training job: a runtime reference plus the settings that specialise it."""

    KIND: ClassVar[str] = TRAINJOBS.kind
    PLURAL: ClassVar[str] = TRAINJOBS.plural
    api_version: str = API_VERSION
    kind: str = TRAINJOBS.kind
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainJobSpec
    status: TrainJobStatus | None = None


def runtime_from_dict(obj: dict[str, Any]) -> TrainingRuntime | ClusterTrainingRuntime:
    """Parse a runtime object by its ``kind``. Raises ``pydantic.ValidationError`` on bad input."""
    if obj.get("kind") == TrainingRuntime.KIND:
        return TrainingRuntime.model_validate(obj)
    return ClusterTrainingRuntime.model_validate(obj)
