"""Trainer v2.4 and master items on a TrainJob's Jobs: ``spec.trainer.env`` reaches the MPI workers, not
only the launcher (kubeflow/trainer#3931)."""

from __future__ import annotations

import copy

from api.kinds import TRAINJOBS
from tests.harness import World, env_of, job


async def test_the_trainer_env_reaches_the_mpi_workers_as_well_as_the_launcher() -> None:
    w = World("deepspeed-mpi", "none")
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["trainer"]["env"] = [
        {"name": "MODEL", "value": "tiny"},
        {"name": "R", "value": "mine"},
    ]
    w.kube.put(tj)
    await w.settle()
    launcher, node = env_of(job(w, "launcher")), env_of(job(w, "node"))
    assert launcher["MODEL"] == "tiny" and node["MODEL"] == "tiny", node
    assert node["R"] == "mine"
    assert not any(k.startswith(("OMPI_MCA_", "PRTE_MCA_")) for k in node), "the workers run sshd, not mpirun"
