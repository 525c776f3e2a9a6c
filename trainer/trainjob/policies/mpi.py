"""The ``mpi`` ML policy of a TrainJob runtime (DeepSpeed-style: a ``launcher`` replicated job labelled
as the trainer step, plus a ``node`` replicated job of workers).

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/mpi/mpi.go`` (v2.0) on top of the machinery
MPIJob uses (:mod:`trainer.jobs.mpi`): Secret ``<trainjob>-mpi-ssh-auth`` (made once) mounted at
``sshAuthMountPath`` in the launcher and the nodes, ConfigMap ``<trainjob>-mpi-hostfile`` (key
``hostfile``) mounted at /etc/mpi in the launcher, with the implementation's launcher environment
(whose names are reserved). The ``node`` replicated job runs ``trainer.numNodes`` pods, one fewer
(but at least one) when ``runLauncherAsNode`` (the launcher is then the first host); without
``trainer.numNodes``, as many as the runtime gives it (:func:`node_pods`); its ``node`` container gets
the TrainJob's ``trainer.image`` and ``trainer.env`` as the launcher does. Its validation:
``numProcPerNode`` must be an integer.
"""

from __future__ import annotations

from functools import partial

from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.kinds import SECRETS
from trainer.api.labels import JOBSET_NAME
from trainer.api.trainer_v1alpha1 import NODE_CONTAINER, STEP_TRAINER, MPIMLPolicySource, TrainingRuntimeSpec, TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named, upsert_env
from trainer.jobs.mpi import Host, config_map, mount_config, mount_ssh, new_ssh_secret
from trainer.trainjob.policies.base import Created, Expanded, Expansion, Policy
from trainer.trainjob.spec.shape import step_of

NODE_RJOB = "node"


def secret_name(job: TrainJob) -> str:
    """Name of the SSH Secret."""
    return f"{job.metadata.name}-mpi-ssh-auth"


def hostfile_name(job: TrainJob) -> str:
    """Name of the hostfile ConfigMap."""
    return f"{job.metadata.name}-mpi-hostfile"


def node_pods(
    job: TrainJob, runtime: TrainingRuntimeSpec, policy: MPIMLPolicySource, rjob: ReplicatedJob
) -> int | None:
    """Pods per Job of the ``node`` replicated job ``rjob``, as kubeflow/trainer sizes its PodSet
    (``pkg/runtime/framework/plugins/mpi/mpi.go`` ``EnforceMLPolicy``, from
    ``pkg/runtime/core/trainingruntime.go``): with the TrainJob's ``trainer.numNodes`` n, n, or
    max(n - 1, 1) when ``runLauncherAsNode`` (one host is the launcher, and the ``node`` Job never
    has fewer than one pod); without it, the runtime's own count of the PodSet: ``mlPolicy.numNodes``
    (default 1) when ``rjob`` is labelled the trainer step, else the template's parallelism (default
    1), at least 1. Upstream's JobSet plugin (``SyncParallelCount``) then sets the Job's parallelism
    and completions to that count."""
    n = job.spec.trainer.num_nodes if job.spec.trainer else None
    if n is not None:
        return max(n - 1, 1) if policy.run_launcher_as_node else n
    if step_of(rjob) == STEP_TRAINER:
        count = runtime.ml_policy.num_nodes if runtime.ml_policy else None
        return 1 if count is None else count
    parallelism = (rjob.template.get("spec") or {}).get("parallelism")
    return max(int(parallelism) if parallelism is not None else 1, 1)


def slots(job: TrainJob, policy: MPIMLPolicySource, gpus: int = 0) -> int:
    """Slots per host: ``trainer.numProcPerNode`` if an integer, else the policy's (default 1), except
    that a policy of 1 on a node with several GPUs (``gpus``: one node's, extended or claimed through DRA,
    :attr:`~trainer.trainjob.policies.base.Expansion.gpus`) gives one slot per GPU, as kubeflow/trainer's
    mpi plugin does."""
    value = job.spec.trainer.num_proc_per_node if job.spec.trainer else None
    if isinstance(value, int):
        return value
    if (policy.num_proc_per_node or 1) == 1 and gpus > 1:
        return gpus
    return policy.num_proc_per_node or 1


def hosts(info: Expanded, policy: MPIMLPolicySource) -> list[Host]:
    """Hostfile entries in the runtime's order of replicated jobs, as upstream's ``IdentifyPodNetwork``
    lists them: the launcher (the trainer step) when it runs as a node, and every pod of every Job of
    the ``node`` replicated job."""
    n, s = info.job.metadata.name, slots(info.job, policy, info.node_gpus)
    subdomain = info.subdomain or str(n)
    names = [r.name for r in info.rjobs]
    node = next((ps for ps in info.pod_sets if ps.name == NODE_RJOB), None)
    jobs, pods = (node.jobs, node.pods_per_job) if node is not None else (0, 0)
    out = [Host(f"{n}-{NODE_RJOB}-{r}-{i}.{subdomain}", s) for r in range(jobs) for i in range(pods)]
    if policy.run_launcher_as_node:
        launcher = info.trainer or "launcher"
        first = launcher not in names or NODE_RJOB not in names or names.index(launcher) < names.index(NODE_RJOB)
        out.insert(0 if first else len(out), Host(f"{n}-{launcher}-0-0.{subdomain}", s))
    return out


def apply_mpi(job: TrainJob, policy: MPIMLPolicySource, rjob: str, is_launcher: bool, pod: JSON, gpus: int = 0) -> None:
    """Mount the SSH keys (every MPI pod) and, in the launcher, the hostfile and its environment
    (``gpus``: one node's GPUs, for the slots)."""
    if rjob != NODE_RJOB and not is_launcher:
        return
    mount_ssh(pod, secret_name(job), policy.ssh_auth_mount_path or "/root/.ssh")
    if is_launcher:
        implementation = policy.mpi_implementation or "OpenMPI"
        mount_config(pod, hostfile_name(job), implementation, slots(job, policy, gpus), "node")


def hostfile_config_map(info: Expanded, policy: MPIMLPolicySource) -> JSON:
    """The hostfile ConfigMap of the TrainJob, labelled with its JobSet name."""
    cm = config_map(info.obj, hostfile_name(info.job), policy.mpi_implementation or "OpenMPI", hosts(info, policy))
    cm["metadata"]["labels"] = {JOBSET_NAME: str(info.job.metadata.name)}
    return cm


class MPIPolicy(Policy):
    """``mlPolicy.mpi``."""

    field = "mpi"
    reserved_env_prefixes = ("OMPI_MCA_", "PRTE_MCA_", "I_MPI_HYDRA_", "HYDRA_")
    """The launcher environment of every implementation (:func:`trainer.jobs.mpi.launcher_env`)."""

    def source(self, runtime: TrainingRuntimeSpec) -> MPIMLPolicySource | None:
        return runtime.ml_policy.mpi if runtime.ml_policy is not None else None

    def pods_per_job(self, x: Expansion, rjob: ReplicatedJob) -> int | None:
        """:func:`node_pods` for the ``node`` replicated job; the launcher keeps its template's."""
        source = self.source(x.runtime)
        if source is None or rjob.name != NODE_RJOB:
            return None
        return node_pods(x.job, x.runtime, source, rjob)

    def mutate_pod(self, x: Expansion, rjob: ReplicatedJob, is_trainer: bool, pod: JSON, env: list[JSON]) -> None:
        """:func:`apply_mpi`, the launcher being the trainer's replicated job (``EnforceMLPolicy``); the
        TrainJob's ``trainer.image`` also runs the ``node`` workers, whose processes the launcher's
        mpirun starts (kubeflow/trainer v2.4, #4301), and its ``trainer.env`` is their environment too,
        merged by name into their ``node`` container (kubeflow/trainer#3931, fixing #3427: the
        launcher and its workers are one training cluster)."""
        source = self.source(x.runtime)
        if source is None:
            return
        apply_mpi(x.job, source, rjob.name, is_trainer, pod, x.gpus)
        trainer = x.job.spec.trainer
        node = find_named(pod.get("spec", {}).get("containers"), NODE_CONTAINER)
        if trainer is None or is_trainer or rjob.name != NODE_RJOB or node is None:
            return
        if trainer.image:
            node["image"] = trainer.image
        if trainer.env:
            upsert_env(node, [e.to_dict() for e in trainer.env])

    def training_node(self, x: Expansion, rjob: ReplicatedJob) -> bool:
        """The ``node`` workers under ``runLauncherAsNode``: the launcher is one host among them, so they get
        the trainer's DRA claims as it does (kubeflow/trainer#4027's ``isMPILauncherAsNode``)."""
        source = self.source(x.runtime)
        return source is not None and bool(source.run_launcher_as_node) and rjob.name == NODE_RJOB

    def config_maps(self, info: Expanded) -> list[JSON]:
        """The hostfile ConfigMap (:func:`hostfile_config_map`; ``Build``'s ConfigMap)."""
        source = self.source(info.runtime)
        return [] if source is None else [hostfile_config_map(info, source)]

    def created_once(self, info: Expanded) -> list[Created]:
        """The SSH Secret, with a fresh key pair (:func:`trainer.jobs.mpi.new_ssh_secret`): a new key
        under running pods would break every ssh."""
        name, labels = secret_name(info.job), {JOBSET_NAME: str(info.job.metadata.name)}
        return [Created(SECRETS, name, partial(new_ssh_secret, info.obj, name, labels))]

    def trainjob_errors(self, info: Expanded) -> list[str]:
        """``spec.trainer.numProcPerNode`` must be an integer (slots per host; ``Validate``)."""
        trainer = info.job.spec.trainer
        if trainer is not None and isinstance(trainer.num_proc_per_node, str):
            return ["spec.trainer.numProcPerNode: must have an int value for MPI TrainJob"]
        return []


MPI = MPIPolicy()
