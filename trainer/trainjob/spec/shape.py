"""The shape of a TrainJob on its runtime: replicated jobs, the trainer's, steps, node and pod counts.

Mirrors kubeflow/trainer ``pkg/runtime/runtime.go`` (``Info``'s pod sets and their counts) and the
helpers of ``pkg/runtime/framework/plugins`` that read them (``ExtractResourcePerNodeFromRuntime``).
Pure.
"""

from __future__ import annotations

from trainer.api.jobset_v1alpha2 import JobSetSpec, ReplicatedJob
from trainer.api.trainer_v1alpha1 import ANCESTOR_LABEL, NODE_CONTAINER, STEP_TRAINER, TrainingRuntimeSpec, TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta


def step_of(rjob: ReplicatedJob) -> str:
    """The ancestor step of a replicated job (its ``trainer.kubeflow.org/trainjob-ancestor-step`` label, as
    kubeflow/trainer ``pkg/constants``), or ""."""
    return str(meta(rjob.template).labels.get(ANCESTOR_LABEL, ""))


def replicated_jobs(runtime: TrainingRuntimeSpec) -> list[ReplicatedJob]:
    """The runtime's replicated jobs (``template.spec.replicatedJobs``), in order; ``[]`` when none."""
    return list((runtime.template.spec.replicated_jobs if runtime.template.spec else None) or [])


def pod_spec(rjob: ReplicatedJob) -> dict[str, object]:
    """The pod spec of a replicated job's template; ``{}`` when it has none (or not an object)."""
    spec = ((rjob.template.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec if isinstance(spec, dict) else {}


def names(items: object) -> set[str]:
    """The ``name`` of every object in a list (containers, volumes); empty when not a list."""
    return {str(i.get("name", "")) for i in items if isinstance(i, dict)} if isinstance(items, list) else set()


def trainer_rjob(rjobs: list[ReplicatedJob]) -> ReplicatedJob | None:
    """The replicated job the trainer settings apply to: the one labelled ``trainer``, else the one
    named ``node``, else None (kubeflow/trainer ``pkg/runtime/framework/plugins/jobset``: the ancestor
    step, with v2.0's ``node`` name)."""
    return next((r for r in rjobs if step_of(r) == STEP_TRAINER), None) or next(
        (r for r in rjobs if r.name == NODE_CONTAINER), None
    )


def num_nodes(job: TrainJob, runtime: TrainingRuntimeSpec) -> int | None:
    """Training nodes (0 or more; 0: the trainer's Job runs no pod, kubeflow/trainer#3809):
    ``trainer.numNodes``, else the runtime's ``mlPolicy.numNodes`` (default 1), else None (no ML
    policy: keep the template's parallelism), as kubeflow/trainer
    ``pkg/runtime/core/trainingruntime.go`` merges them."""
    if job.spec.trainer and job.spec.trainer.num_nodes is not None:
        return job.spec.trainer.num_nodes
    if runtime.ml_policy is not None:
        return 1 if runtime.ml_policy.num_nodes is None else runtime.ml_policy.num_nodes
    return None


def subdomain_of(job: TrainJob, runtime: TrainingRuntimeSpec) -> str | None:
    """The Pods' subdomain (= headless Service name): ``network.subdomain``, else the TrainJob's name;
    None when ``enableDNSHostnames`` is false (kubernetes-sigs/jobset ``Network``: the subdomain defaults
    to the JobSet's name)."""
    network = runtime.template.spec.network if runtime.template.spec else None
    if network is not None and network.enable_dns_hostnames is False:
        return None
    return (network.subdomain if network and network.subdomain else None) or str(job.metadata.name)


def completed_first(rjobs: list[ReplicatedJob]) -> set[str]:
    """Replicated jobs some other replicated job waits to be Complete (initializers): they finish
    before the rest start, so they are not in the gang (counting them would deadlock it, as in
    mpi-operator#608)."""
    return {d.name for r in rjobs for d in r.depends_on or [] if d.status == "Complete"}


def sequenced(rjobs: list[ReplicatedJob], template: JobSetSpec) -> bool:
    """Whether the runtime starts its replicated jobs in an order: some ``dependsOn``, or JobSet's
    ``startupPolicy: InOrder`` (then no gang of every Pod could ever fill, KEP-3015)."""
    in_order = (template.startup_policy.startup_policy_order if template.startup_policy else None) == "InOrder"
    return in_order or any(r.depends_on for r in rjobs)


def node_resources(job: TrainJob, rjobs: list[ReplicatedJob], trainer: str | None) -> JSON | None:
    """One training node's ``{requests, limits}`` as the ML policies read them (kubeflow/trainer
    ``ExtractResourcePerNodeFromRuntime``): the TrainJob's ``resourcesPerNode`` if set, else the
    runtime's ``node`` container of the trainer's (or the ``node``) replicated job."""
    if job.spec.trainer is not None and job.spec.trainer.resources_per_node is not None:
        return job.spec.trainer.resources_per_node
    for r in rjobs:
        if r.name == trainer or r.name == NODE_CONTAINER:
            pod = ((r.template.get("spec") or {}).get("template") or {}).get("spec") or {}
            node = next((c for c in pod.get("containers") or [] if c.get("name") == NODE_CONTAINER), None)
            if node is not None and node.get("resources") is not None:
                return dict(node["resources"])
    return None
