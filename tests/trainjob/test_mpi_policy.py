"""The MPI policy on the Jobs of a TrainJob: the TrainJob's image on the launcher and the workers too
(Trainer #4301), and Open MPI 5's ``PRTE_MCA_*`` beside the ORTE names on the launcher of a TrainJob and
of an MPIJob (Trainer #4029), which a runtime or TrainJob may not set."""

from __future__ import annotations

import copy

from tests.harness import World, env_of, job
from trainer.api.kinds import TRAINJOBS
from trainer.trainjob.policies.mpi import MPI

PRTE = {
    "PRTE_MCA_prte_keep_fqdn_hostnames": "false",
    "PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile",
    "PRTE_MCA_plm_ssh_args": "-o ConnectionAttempts=10",
}


async def test_the_trainjobs_image_runs_the_mpi_launcher_and_its_workers() -> None:
    w = World("deepspeed-mpi", "none")
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["trainer"]["image"] = "registry.example/mine:1"
    w.kube.put(tj)
    await w.settle()
    for rjob in ("launcher", "node"):
        (node,) = [c for c in job(w, rjob)["spec"]["template"]["spec"]["containers"] if c["name"] == "node"]
        assert node["image"] == "registry.example/mine:1", rjob


async def test_open_mpi_5_reads_the_hostfile_of_a_trainjob_and_of_an_mpijob() -> None:
    w = World("deepspeed-mpi", "none")
    await w.settle()
    env = env_of(job(w, "launcher"))
    assert {k: env[k] for k in PRTE} == PRTE and env["PRTE_MCA_prte_set_default_slots"] == "1"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile", "Open MPI 4's names stay"
    assert "PRTE_MCA_" not in "".join(env_of(job(w, "node"))), "the workers run sshd, not mpirun"
    assert MPI.reserves("PRTE_MCA_prte_default_hostfile"), "a runtime or TrainJob may not set them"
    m = World("mpijob", "none")
    await m.settle()
    (launcher,) = [j for j in m.jobs() if j["metadata"]["name"].endswith("-launcher")]
    container = launcher["spec"]["template"]["spec"]["containers"][0]["name"]
    assert {k: env_of(launcher, container)[k] for k in PRTE} == PRTE
