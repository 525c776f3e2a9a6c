"""What an MPIJob must satisfy beyond its schema and :func:`trainer.mpijob.children.validate`. Pure; used by
admission and by the MPIJob reconciler.
"""

from __future__ import annotations

from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.jobs.features.limits import DEFAULT_MAX_NODES_PER_JOB, MAX_NODES_FLAG, container_quantities


def mpijob_worker_limit_errors(job: MPIJob, max_nodes: int, running: int | None = None) -> list[str]:
    """An MPIJob with more workers than ``max_nodes`` (``--max-nodes-per-job``; 0: no limit). ``running``:
    the workers its worker Job is already sized for (None: it has none); a job asking for no more than
    those is left be (started under a larger limit), one asking for more is refused."""
    worker = job.spec.mpi_replica_specs.worker
    workers = (worker.replicas or 0) if worker is not None else 0
    if max_nodes <= 0 or workers <= max_nodes or (running is not None and workers <= running):
        return []
    return [
        f"spec.mpiReplicaSpecs.Worker.replicas: {workers} workers is more than this operator's limit of "
        f"{max_nodes} ({MAX_NODES_FLAG}); use at most {max_nodes}, or start the operator with a larger "
        f"{MAX_NODES_FLAG} (0: no limit)"
    ]


def mpijob_errors(job: MPIJob, max_nodes: int = DEFAULT_MAX_NODES_PER_JOB) -> list[str]:
    """What is wrong with an MPIJob beyond :func:`trainer.mpijob.children.validate`: more workers than
    ``max_nodes`` (``--max-nodes-per-job``; 0: no limit), and quantities in its replica templates'
    containers that the apiserver cannot read."""
    specs = job.spec.mpi_replica_specs
    worker = specs.worker
    errors = mpijob_worker_limit_errors(job, max_nodes)
    for role, spec in (("Launcher", specs.launcher), ("Worker", worker)):
        pod = ((spec.template or {}).get("spec") if spec is not None else None) or {}
        if isinstance(pod, dict):
            errors += container_quantities(pod, f"spec.mpiReplicaSpecs.{role}.template.spec")
    return errors
