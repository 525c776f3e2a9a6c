"""kubeflow/mpi-operator as one process on a local cluster: what runs MPIJobs before a cluster switches to
this operator (``e2e/test_mpijob_migration.py``).

``localcluster/build.sh mpi_operator`` builds it from the Go module proxy (``MPI_OPERATOR_VERSION`` of
``localcluster/versions.env``, the version Kueue's ``go.mod`` requires) into
``$TRAINER_CACHE/bin/mpi_operator-<version>/``, with its MPIJob CRD (``manifests/base`` of
kubeflow/mpi-operator) in ``crds/``. :func:`ensure_mpi_operator` builds it when something is missing.

:class:`MpiOperator` runs it with its flag defaults (every namespace, 2 workers, client QPS 5 and burst
10) but for what running out of a cluster needs: the kubeconfig, and its leader-election Lease in
``default`` (its default namespace, ``mpi-operator``, does not exist here). It always serves its health
check on port :data:`HEALTH_PORT` (``healthCheckPort`` of ``cmd/mpi-operator/app/server.go``), so one
runs per machine at a time.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from localcluster.binaries import BUILD_SCRIPT, cache_dir, versions
from localcluster.process import Component

VERSION_VARIABLE = "MPI_OPERATOR_VERSION"
BINARY = "mpi-operator"
CRD = "crds/kubeflow.org_mpijobs.yaml"
"""mpi-operator's MPIJob CRD (``kubeflow.org/v2beta1``), relative to its directory."""
HEALTH_PORT = 8080
LEASE_NAMESPACE = "default"


def mpi_operator_dir() -> Path:
    """``<cache>/bin/mpi_operator-<MPI_OPERATOR_VERSION>``. Raises ``KeyError`` when the version is not pinned."""
    return cache_dir() / "bin" / f"mpi_operator-{versions()[VERSION_VARIABLE]}"


def ensure_mpi_operator() -> Path:
    """The mpi-operator directory, built first by ``localcluster/build.sh mpi_operator`` when its binary or
    CRD is missing (the build's output goes to stderr). Raises ``subprocess.CalledProcessError`` when the
    build fails and ``FileNotFoundError`` when it leaves something out."""
    directory = mpi_operator_dir()
    if not ((directory / BINARY).is_file() and (directory / CRD).is_file()):
        subprocess.run(["bash", str(BUILD_SCRIPT), "mpi_operator"], check=True)
        if not ((directory / BINARY).is_file() and (directory / CRD).is_file()):
            raise FileNotFoundError(f"{BUILD_SCRIPT} mpi_operator did not produce {BINARY} and {CRD}")
    return directory


class MpiOperator:
    """mpi-operator of ``directory`` (:func:`ensure_mpi_operator`) on the cluster of ``kubeconfig``, logging to
    ``<state_dir>/logs/mpi-operator.log``; :meth:`start` and :meth:`stop` as often as needed."""

    def __init__(self, directory: Path, kubeconfig: Path, state_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.process = Component(BINARY, directory / BINARY, state_dir / "run", state_dir / "logs")

    def start(self, timeout: float = 30.0) -> None:
        """Start it and wait until its health check answers. Raises ``RuntimeError`` (with its log's tail)
        when it exits first or does not answer within ``timeout`` seconds."""
        args = [f"--kubeConfig={self.kubeconfig}", f"--lock-namespace={LEASE_NAMESPACE}"]
        self.process.start(args, env={"KUBECONFIG": str(self.kubeconfig)})
        self.process.wait_http_ok(f"http://127.0.0.1:{HEALTH_PORT}/healthz", timeout)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; nothing when it does not run."""
        self.process.stop()

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of its log."""
        return self.process.log_tail(lines)
