"""The torch ML policy: torchrun's ``PET_*`` environment.

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/torch/torch.go`` (v2.3, with v2.0-v2.1's
string values of ``numProcPerNode``): PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job completion
index), PET_MASTER_ADDR (the first pod of the trainer's first Job, ``<trainjob>-<rjob>-0-0.<subdomain>``)
and PET_MASTER_PORT, on the trainer's ``node`` container and on every ``envInjection`` target. Its
validation (``Validate``): the ``envInjection`` targets exist and the ``PET_*`` names are reserved.

torchtune's BuiltinTrainer (``spec.trainer.command`` exactly ``[tune, run]``, kubeflow/trainer
``pkg/runtime/framework/plugins/torch/torchtune.go``): the trainer's ``node`` container gets
``PET_NNODES``, ``PET_NPROC_PER_NODE`` and ``PET_NODE_RANK`` but no master address or port (torchtune is
given ``--rdzv_endpoint`` instead), and its command becomes the one
:func:`trainer.trainjob.policies.torchtune.command` derives from the runtime's name and command; its
rules are :func:`trainer.trainjob.policies.torchtune.errors`. ``envInjection`` targets still get all five
variables, as upstream. Not on an elastic runtime: refused (torchtune's rendezvous is the fixed endpoint).

An elastic policy (``mlPolicy.torch.elasticPolicy``, kubeflow/trainer KEP-2903; the variables are those
training-operator v1's PyTorchJob ``elasticPolicy`` set, torchrun reading each ``--flag`` as ``PET_FLAG``)
makes ``PET_NNODES`` ``<minNodes>:<maxNodes>`` and adds the c10d rendezvous: ``PET_RDZV_BACKEND=c10d``,
``PET_RDZV_ENDPOINT=<the first pod's host name>.<namespace>.svc.cluster.local:<MASTER_PORT>`` (its torchrun
agent hosts the store: torch 1.13's c10d backend hosts it where the endpoint's host is the machine's
host name or its canonical name, which kubelet's ``/etc/hosts`` gives as that fully qualified name),
``PET_RDZV_ID`` (the TrainJob's uid, else its name) and ``PET_MAX_RESTARTS`` (when ``maxRestarts`` is
set). None of it depends on the node count, so the pod template stays the same when the job scales.
An elastic job's gang needs only ``minNodes`` trainer pods (:meth:`Torch.gang_min_member`), its trainer Jobs
make a failed member's pod again up to ``maxRestarts`` times (``backoffLimit``, :meth:`Torch.job_fields`),
and it scales in place, running or not (:meth:`Torch.scales_in_place`).

The TrainJob CRD serves ``/scale`` (``kubectl scale trainjob/<name> --replicas=N``, a
HorizontalPodAutoscaler's ``scaleTargetRef``): ``spec.trainer.numNodes`` is its ``spec.replicas``,
``status.replicas`` (the trainer's active pods) its ``status.replicas`` and ``status.selector`` (the
trainer's pods, as a label selector string) the selector an HPA reads pod metrics with; both are written
for an elastic TrainJob only (another one may be scaled while suspended: a resize). It also reports
``status.elastic`` (its runtime's ``minNodes`` and ``maxNodes``), which the CRD's rules read to admit a
change of ``numNodes`` while it runs, within those bounds, from any client, ``/scale`` included (a webhook
sees a ``Scale``, not the TrainJob). These fields are this operator's, not upstream's (kubeflow/trainer
KEP-2903 proposes no ``/scale``): :meth:`Torch.scale_status`.
"""

from __future__ import annotations

from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.labels import JOBSET_NAME, REPLICATED_JOB_NAME
from trainer.api.trainer_v1alpha1 import (
    NODE_CONTAINER,
    TorchElasticPolicy,
    TorchMLPolicySource,
    TrainingRuntimeSpec,
    TrainJob,
)
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named, upsert_env
from trainer.framework.meta import meta
from trainer.framework.resources import cpus_per_node, gpus_per_node
from trainer.jobs.gang.base import PodSet
from trainer.trainjob.policies import torchtune
from trainer.trainjob.policies.base import MASTER_PORT, NOT_SCALED, RANK_FROM_INDEX, Expanded, Expansion, Policy
from trainer.trainjob.spec.shape import names, node_resources, pod_spec, replicated_jobs

MASTER_ENV = ("PET_MASTER_ADDR", "PET_MASTER_PORT")
"""The variables a torchtune trainer does not get (its rendezvous is on its command line)."""


def num_proc_per_node(job: TrainJob, policy: TorchMLPolicySource, resources: JSON | None, claimed: int = 0) -> str:
    """PET_NPROC_PER_NODE: ``trainer.numProcPerNode``, else the runtime's (v2.0-v2.1), else ``auto``;
    ``cpu``, and ``auto`` on a node without GPUs, become the CPUs per node (at least 1) of
    ``resources`` (the node's ``{requests, limits}``), as upstream's torch plugin resolves them;
    ``auto`` with extended GPUs and ``gpu`` are left to torchrun. ``auto`` on a node whose only GPUs are
    the ``claimed`` DRA devices (KEP-2782) becomes their count."""
    value = job.spec.trainer.num_proc_per_node if job.spec.trainer else None
    if value is None:
        value = policy.num_proc_per_node if policy.num_proc_per_node is not None else "auto"
    extended = gpus_per_node(resources)
    if value == "auto" and extended == 0 and claimed > 0:
        return str(claimed)
    if value == "cpu" or (value == "auto" and extended == 0):
        return str(max(1, cpus_per_node(resources)))
    return str(value)


CLUSTER_DOMAIN = "cluster.local"
"""kubelet's default ``clusterDomain``: the first pod's fully qualified name ends with it."""
RDZV_BACKEND = "c10d"
"""The rendezvous of an elastic job: torchrun's c10d, its store hosted by the first pod's agent."""
ELASTIC_ENV = ("PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_ID", "PET_MAX_RESTARTS")
"""The variables an elastic policy adds."""


def torch_source(runtime: TrainingRuntimeSpec) -> TorchMLPolicySource | None:
    """The runtime's ``mlPolicy.torch``, None when it has none."""
    return runtime.ml_policy.torch if runtime.ml_policy is not None else None


def elastic_policy(runtime: TrainingRuntimeSpec) -> TorchElasticPolicy | None:
    """The runtime's ``mlPolicy.torch.elasticPolicy``, None when it has none."""
    torch = torch_source(runtime)
    return torch.elastic_policy if torch is not None else None


def nnodes(policy: TorchMLPolicySource, num_nodes: int) -> str:
    """PET_NNODES: ``<minNodes>:<maxNodes>`` for an elastic policy, else the node count."""
    elastic = policy.elastic_policy
    if elastic is None or elastic.max_nodes is None:
        return str(num_nodes)
    return f"{elastic.lowest}:{elastic.max_nodes}"


def rendezvous_env(job: TrainJob, elastic: TorchElasticPolicy, master: str) -> list[JSON]:
    """The c10d rendezvous of an elastic job (``master``: the first pod's host name, ``<pod>.<subdomain>``,
    made fully qualified in the job's namespace) and ``PET_MAX_RESTARTS``."""
    env: list[JSON] = [
        {"name": "PET_RDZV_BACKEND", "value": RDZV_BACKEND},
        {"name": "PET_RDZV_ENDPOINT", "value": f"{master}.{job.metadata.namespace}.svc.{CLUSTER_DOMAIN}:{MASTER_PORT}"},
        {"name": "PET_RDZV_ID", "value": str(job.metadata.uid or job.metadata.name or "")},
    ]
    if elastic.max_restarts is not None:
        env.append({"name": "PET_MAX_RESTARTS", "value": str(elastic.max_restarts)})
    return env


def torch_env(
    job: TrainJob, policy: TorchMLPolicySource, master: str, num_nodes: int, resources: JSON | None, claimed: int = 0
) -> list[JSON]:
    """The five ``PET_*`` variables, and the rendezvous of an elastic policy (:func:`rendezvous_env`);
    ``master``: the rank-0 pod's host name; ``claimed``: the node's DRA GPUs."""
    env: list[JSON] = [
        {"name": "PET_NNODES", "value": nnodes(policy, num_nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": num_proc_per_node(job, policy, resources, claimed)},
        {"name": "PET_NODE_RANK", "valueFrom": RANK_FROM_INDEX},
        {"name": "PET_MASTER_ADDR", "value": master},
        {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
    ]
    if policy.elastic_policy is not None:
        env += rendezvous_env(job, policy.elastic_policy, master)
    return env


def bounds_errors(elastic: TorchElasticPolicy, num_nodes: int | None, where: str) -> list[str]:
    """``num_nodes`` (at ``where``) must lie within ``[minNodes, maxNodes]``."""
    if num_nodes is None or elastic.max_nodes is None:
        return []
    if num_nodes < elastic.lowest:
        return [
            f"{where}: {num_nodes} is below mlPolicy.torch.elasticPolicy.minNodes {elastic.lowest}; "
            f"set it between {elastic.lowest} and {elastic.max_nodes}"
        ]
    if num_nodes > elastic.max_nodes:
        return [
            f"{where}: {num_nodes} is above mlPolicy.torch.elasticPolicy.maxNodes {elastic.max_nodes}; "
            f"set it between {elastic.lowest} and {elastic.max_nodes}"
        ]
    return []


def inject(pod: JSON, container_names: list[str], env: list[JSON]) -> list[str]:
    """Upsert ``env`` into the named containers of ``pod`` (containers first, then init containers),
    in place, as ``envInjection`` does. Returns the names not found."""
    spec = pod.get("spec") or {}
    missing = []
    for name in container_names:
        container = find_named(spec.get("containers"), name) or find_named(spec.get("initContainers"), name)
        if container is None:
            missing.append(name)
        else:
            upsert_env(container, env)
    return missing


def is_torchtune(job: TrainJob) -> bool:
    """Whether ``spec.trainer.command`` is torchtune's entrypoint, exactly ``[tune, run]`` (compared here, so
    a job that is not torchtune's runs nothing of :mod:`~trainer.trainjob.policies.torchtune`)."""
    return job.spec.trainer is not None and job.spec.trainer.command == torchtune.ENTRYPOINT


def tune_procs(value: str) -> int | str:
    """``PET_NPROC_PER_NODE`` as torchtune's recipe choice reads it: an integer, else the string
    (``auto`` on a node with GPUs, ``gpu``)."""
    return int(value) if value.isdigit() else value


def tune_command(x: Expansion, source: TorchMLPolicySource, rjob: ReplicatedJob, pod: JSON) -> None:
    """Set the command of the ``node`` container of ``pod`` (the trainer's, in place) to
    :func:`trainer.trainjob.policies.torchtune.command` for the job's node count, processes and GPUs per
    node, its args and the runtime's own ``node`` command (of ``rjob``'s template)."""
    node = find_named((pod.get("spec") or {}).get("containers"), NODE_CONTAINER)
    trainer = x.job.spec.trainer
    if node is None or trainer is None:
        return
    containers = pod_spec(rjob).get("containers")
    runtime_node = find_named(containers if isinstance(containers, list) else None, NODE_CONTAINER)
    node["command"] = torchtune.command(
        x.job.spec.runtime_ref.name,
        x.master,
        x.num_nodes if x.num_nodes is not None else 1,
        tune_procs(num_proc_per_node(x.job, source, x.resources, x.claimed_gpus)),
        x.gpus,
        trainer.args,
        (runtime_node or {}).get("command"),
    )


class Torch(Policy):
    """``mlPolicy.torch``."""

    field = "torch"
    reserved_env = (
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
        *ELASTIC_ENV,
    )

    def source(self, runtime: TrainingRuntimeSpec) -> TorchMLPolicySource | None:
        return torch_source(runtime)

    def env(self, x: Expansion) -> list[JSON]:
        """:func:`torch_env` (``EnforceMLPolicy``), without the master's address and port for torchtune."""
        source = self.source(x.runtime)
        if source is None:
            return []
        env = torch_env(x.job, source, x.master, x.num_nodes or 1, x.resources, x.claimed_gpus)
        if is_torchtune(x.job):
            return [e for e in env if e["name"] not in MASTER_ENV]
        return env

    def mutate_pod(self, x: Expansion, rjob: ReplicatedJob, is_trainer: bool, pod: JSON, env: list[JSON]) -> None:
        """Upsert the ``PET_*`` variables into the ``envInjection`` targets of ``rjob`` (``EnforceMLPolicy``,
        v2.3; all five, torchtune or not) and give a torchtune trainer its command (:func:`tune_command`)."""
        source = self.source(x.runtime)
        if source is None:
            return
        if is_trainer and is_torchtune(x.job):
            tune_command(x, source, rjob, pod)
        injection = source.env_injection
        targets = [t for t in (injection.targets if injection else None) or [] if t.job_name == rjob.name]
        if not targets:
            return
        if is_torchtune(x.job):  # the trainer's env lacks the master's address and port; the targets get them
            env = torch_env(x.job, source, x.master, x.num_nodes or 1, x.resources, x.claimed_gpus)
        for target in targets:
            inject(pod, target.container_names, env)

    def runtime_errors(self, runtime: TrainingRuntimeSpec) -> list[str]:
        """Every ``envInjection`` target container must be in its replicated job's pod template
        (``Validate``)."""
        source = self.source(runtime)
        injection = source.env_injection if source else None
        pods = {r.name: pod_spec(r) for r in replicated_jobs(runtime)}
        errors = []
        elastic = source.elastic_policy if source is not None else None
        if elastic is not None and runtime.ml_policy is not None:
            errors += bounds_errors(elastic, runtime.ml_policy.num_nodes, "spec.mlPolicy.numNodes")
        for target in (injection.targets if injection else None) or []:
            pod = pods.get(target.job_name, {})
            have = names(pod.get("containers")) | names(pod.get("initContainers"))
            for name in target.container_names:
                if name not in have:
                    errors.append(
                        f"spec.mlPolicy.torch.envInjection.targets: envInjection target podSet {target.job_name!r} "
                        f"container {name!r} not found in runtime template"
                    )
        return errors

    def trainjob_errors(self, info: Expanded) -> list[str]:
        """The node count of an elastic job lies within ``[minNodes, maxNodes]``; a torchtune TrainJob
        (:func:`is_torchtune`) follows :func:`trainer.trainjob.policies.torchtune.errors` for the node
        count, processes and GPUs its pods get, and is refused on an elastic runtime."""
        trainer = info.job.spec.trainer
        elastic = elastic_policy(info.runtime)
        if elastic is not None and trainer is not None:
            errors = bounds_errors(elastic, trainer.num_nodes, "spec.trainer.numNodes")
            if errors:
                return errors
        source = self.source(info.runtime)
        if trainer is None or source is None or not is_torchtune(info.job):
            return []
        if elastic is not None:
            return [
                "spec.trainer.command: the torchtune entrypoint [tune, run] is not supported with "
                "mlPolicy.torch.elasticPolicy (torchtune's rendezvous is a fixed endpoint); use a runtime "
                "without elasticPolicy or give the whole command"
            ]
        resources = node_resources(info.job, info.rjobs, info.trainer)
        procs = tune_procs(num_proc_per_node(info.job, source, resources, info.node_gpus))
        nodes = info.num_nodes if info.num_nodes is not None else 1
        return torchtune.errors(info.job.spec.runtime_ref.name, nodes, procs, info.node_gpus, trainer.args)

    def job_fields(self, info: Expanded, rjob: str) -> JSON:
        """An elastic trainer's Jobs get ``backoffLimit: maxRestarts``: a member may fail up to that many
        times, the Job making its pod again while torchrun goes on with the other nodes (>= minNodes) and
        lets the new one join."""
        elastic = elastic_policy(info.runtime)
        if elastic is None or elastic.max_restarts is None or rjob != info.trainer:
            return {}
        return {"backoffLimit": elastic.max_restarts}

    def gang_min_member(self, info: Expanded, pod_sets: list[PodSet]) -> int | None:
        """An elastic job's ``minMember``: every Pod of ``pod_sets`` but the trainer's, and ``minNodes`` of
        the trainer's (at most as many as it has); None when the job is not elastic."""
        elastic = elastic_policy(info.runtime)
        if elastic is None:
            return None
        pods = sum(ps.count for ps in pod_sets)
        trainer = sum(ps.count for ps in pod_sets if ps.name == info.trainer)
        return pods - trainer + min(trainer, elastic.lowest)

    def scales_in_place(self, runtime: TrainingRuntimeSpec) -> bool:
        """An elastic job (``elasticPolicy``) scales in place: its pod template does not depend on the node
        count (``PET_NNODES`` is ``min:max``)."""
        return elastic_policy(runtime) is not None

    def scale_status(self, info: Expanded, observed: list[JSON]) -> JSON:
        """``{replicas, selector, elastic}`` of an elastic TrainJob's status (each None for one that is not
        elastic or has no trainer): ``replicas``, the active pods of the trainer's Jobs among ``observed`` (0
        when none); ``selector``, ``jobset-name=<trainjob>,replicatedjob-name=<trainer>``; ``elastic``,
        ``{minNodes, maxNodes}`` of the runtime's elastic policy."""
        trainer, policy = info.trainer, elastic_policy(info.runtime)
        if trainer is None or policy is None or policy.max_nodes is None:
            return NOT_SCALED
        active = sum(
            int((job.get("status") or {}).get("active") or 0)
            for job in observed
            if meta(job).labels.get(REPLICATED_JOB_NAME) == trainer
        )
        return {
            "replicas": active,
            "selector": f"{JOBSET_NAME}={info.job.metadata.name},{REPLICATED_JOB_NAME}={trainer}",
            "elastic": {"minNodes": policy.lowest, "maxNodes": policy.max_nodes},
        }


TORCH = Torch()
