"""What every ML policy shares: its interface, its input and the rendezvous helpers.

An ML policy is one object (a :class:`Policy`) selected by one field of the runtime's ``mlPolicy``.
It gives, at expansion (:func:`trainer.trainjob.runtime.expand.runtime_info`), the environment of the trainer's
``node`` container, the pods per Job of the replicated jobs it sizes and its mutations of each pod
template; after expansion, the children it adds (created once, or applied every reconcile); and its
validation: reserved environment names, runtime rules and TrainJob rules. Mirrors kubeflow/trainer
``pkg/runtime/framework/interface.go`` (``EnforceMLPolicyPlugin``, ``CustomValidationPlugin``,
``ComponentBuilderPlugin``), each plugin holding both its enforcement and its validation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.kinds import Resource
from trainer.api.labels import COMPLETION_INDEX_ANNOTATION
from trainer.api.trainer_v1alpha1 import TrainingRuntimeSpec, TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named, upsert_env
from trainer.framework.resources import gpus_per_node
from trainer.jobs.gang.base import PodSet

MASTER_PORT = 29500
"""``ContainerTrainerPort``: the rendezvous port of torch, JAX and XGBoost."""
RANK_FROM_INDEX = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}
"""``valueFrom`` of a rank: the pod's Job completion index."""


@dataclass(frozen=True)
class Expansion:
    """What a policy reads while a TrainJob is expanded on its runtime (before the
    :class:`~trainer.trainjob.runtime.info.RuntimeInfo` exists)."""

    job: TrainJob
    runtime: TrainingRuntimeSpec
    trainer: str | None
    """The trainer's replicated job (:func:`trainer.trainjob.spec.shape.trainer_rjob`), if any."""
    num_nodes: int | None
    """Training nodes (:func:`trainer.trainjob.spec.shape.num_nodes`); None without an ML policy or ``numNodes``."""
    master: str
    """Host name of the rank-0 pod: ``<trainjob>-<trainer rjob>-0-0.<subdomain>``."""
    resources: JSON | None
    """One training node's ``{requests, limits}`` (:func:`trainer.trainjob.spec.shape.node_resources`)."""
    claimed_gpus: int = 0
    """GPUs the trainer's ``node`` container claims through DRA (KEP-2782,
    :func:`trainer.trainjob.spec.devices.claimed_gpus`); 0 when it claims none or extended GPUs are set."""

    @property
    def gpus(self) -> int:
        """GPUs of one training node: :func:`~trainer.framework.resources.gpus_per_node` of :attr:`resources`,
        else :attr:`claimed_gpus` (KEP-2782: the DRA count is the fallback)."""
        return gpus_per_node(self.resources) or self.claimed_gpus


class Expanded(Protocol):
    """What a policy reads of a TrainJob once expanded on its runtime
    (:class:`~trainer.trainjob.runtime.info.RuntimeInfo` has it all)."""

    @property
    def obj(self) -> JSON:
        """The TrainJob as stored (for owner references)."""
        ...

    @property
    def job(self) -> TrainJob: ...

    @property
    def runtime(self) -> TrainingRuntimeSpec: ...

    @property
    def rjobs(self) -> list[ReplicatedJob]: ...

    @property
    def pod_sets(self) -> list[PodSet]: ...

    @property
    def trainer(self) -> str | None:
        """The trainer's replicated job, if any."""
        ...

    @property
    def num_nodes(self) -> int | None:
        """Training nodes (:func:`trainer.trainjob.spec.shape.num_nodes`)."""
        ...

    @property
    def subdomain(self) -> str | None: ...

    @property
    def node_gpus(self) -> int: ...


NOT_SCALED: JSON = {"replicas": None, "selector": None, "elastic": None}
"""The ``/scale`` status of a TrainJob whose policy does not scale it in place: none (:meth:`Policy.scale_status`)."""


@dataclass(frozen=True)
class Created:
    """A child made once, in the TrainJob's namespace, and never rewritten (e.g. an SSH key pair)."""

    resource: Resource
    name: str
    make: Callable[[], JSON]
    """Builds the object; called only when the child is absent."""


class Policy:
    """One ML policy. The defaults are those of a policy that adds nothing: no environment, the
    trainer's replicated job sized to ``numNodes`` pods per Job, no pod mutation, no children, no
    reserved names and no rules. Subclasses override what their policy does."""

    field: ClassVar[str] = ""
    """The ``mlPolicy`` field that selects the policy ("" selects none: the fallback)."""
    reserved_env: ClassVar[tuple[str, ...]] = ()
    """Environment names the operator sets and a TrainJob may not."""
    reserved_env_prefixes: ClassVar[tuple[str, ...]] = ()
    """Prefixes of environment names the operator sets and a TrainJob may not."""

    def source(self, runtime: TrainingRuntimeSpec) -> Any:
        """The runtime's ``mlPolicy.<field>`` (any JSON-like value), or None when unset."""
        if not self.field or runtime.ml_policy is None:
            return None
        return getattr(runtime.ml_policy, self.field, None)

    def selects(self, runtime: TrainingRuntimeSpec) -> bool:
        """Whether the runtime's ``mlPolicy`` sets this policy's field (read here, by the field's name,
        so choosing a policy runs no code of the others)."""
        policy = runtime.ml_policy
        return bool(self.field) and policy is not None and getattr(policy, self.field, None) is not None

    def env(self, x: Expansion) -> list[JSON]:
        """The environment (``corev1.EnvVar`` dicts) of the trainer's ``node`` container; when not empty,
        the expansion adds it with the rendezvous port (:func:`add_rendezvous`)."""
        return []

    def pods_per_job(self, x: Expansion, rjob: ReplicatedJob) -> int | None:
        """Pods per Job of ``rjob`` when the policy sets them (then parallelism = completions), else
        None (the template's). Default: ``numNodes`` for the trainer's replicated job, as
        kubeflow/trainer ``pkg/runtime/framework/plugins/plainml/plainml.go``."""
        return x.num_nodes if x.num_nodes is not None and rjob.name == x.trainer else None

    def mutate_pod(self, x: Expansion, rjob: ReplicatedJob, is_trainer: bool, pod: JSON, env: list[JSON]) -> None:
        """Change the pod template ``pod`` of ``rjob`` in place, after the step settings and before the
        TrainJob's overrides; ``env`` is :meth:`env`."""

    def training_node(self, x: Expansion, rjob: ReplicatedJob) -> bool:
        """Whether ``rjob``, not the trainer's, runs training nodes too and gets ``resourceClaimsPerNode``
        (kubeflow/trainer#4027, KEP-2782). Default: no."""
        return False

    def config_maps(self, info: Expanded) -> list[JSON]:
        """ConfigMaps the pods mount, applied every reconcile."""
        return []

    def secrets(self, info: Expanded) -> list[JSON]:
        """Secrets the pods mount whose content is derived from the TrainJob (the same on every reconcile),
        applied every reconcile."""
        return []

    def created_once(self, info: Expanded) -> list[Created]:
        """Children created when absent and never rewritten."""
        return []

    def job_fields(self, info: Expanded, rjob: str) -> JSON:
        """Fields of the Job spec of replicated job ``rjob`` the policy sets over the template's (e.g. the
        trainer's ``backoffLimit`` that lets a member fail and rejoin). Default: none."""
        return {}

    def gang_min_member(self, info: Expanded, pod_sets: list[PodSet]) -> int | None:
        """The gang's ``minMember`` over ``pod_sets`` when the policy lets it run with fewer than every Pod
        (one that lets members come and go); None: every Pod (the default)."""
        return None

    def scales_in_place(self, runtime: TrainingRuntimeSpec) -> bool:
        """Whether a TrainJob on ``runtime`` changes its node count in place, running or not (its Jobs'
        ``parallelism`` and ``completions`` patched, admission letting ``numNodes`` change while it runs).
        Default: no (a resize recreates suspended Jobs)."""
        return False

    def scale_status(self, info: Expanded, observed: list[JSON]) -> JSON:
        """``{replicas, selector, elastic}`` of the TrainJob's status (the ``/scale`` subresource) given its
        current Jobs ``observed``; each None (deleted) by default (:data:`NOT_SCALED`)."""
        return NOT_SCALED

    def reserves(self, name: str) -> bool:
        """Whether the environment variable ``name`` is set by the policy and reserved."""
        return name in self.reserved_env or name.startswith(self.reserved_env_prefixes)

    def runtime_errors(self, runtime: TrainingRuntimeSpec) -> list[str]:
        """What is wrong with a runtime selecting this policy, one message per problem."""
        return []

    def trainjob_errors(self, info: Expanded) -> list[str]:
        """What is wrong with a TrainJob expanded under this policy, one message per problem."""
        return []


def add_rendezvous(pod: JSON, container: str, env: list[JSON]) -> None:
    """Upsert ``env`` and the rendezvous containerPort 29500 on ``container`` of ``pod``, in place;
    no-op when the pod has no such container."""
    node = find_named((pod.get("spec") or {}).get("containers"), container)
    if node is None:
        return
    upsert_env(node, env)
    ports = node.setdefault("ports", [])
    if not any(p.get("containerPort") == MASTER_PORT for p in ports):
        ports.append({"containerPort": MASTER_PORT, "protocol": "TCP"})
