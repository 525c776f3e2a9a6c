"""A cluster the tests do not start or stop, named by its kubeconfig."""

from __future__ import annotations

import subprocess
from pathlib import Path


class ExternalCluster:
    """A cluster someone else runs (e.g. kind, see ``localcluster/kind.sh``), named by its kubeconfig."""

    def __init__(self, kubeconfig: Path, state_dir: Path) -> None:
        self.kubeconfig, self.state_dir = kubeconfig, state_dir

    def run_kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args], check=check, capture_output=True, text=True
        )

    def stop(self) -> None:
        """Not ours to stop."""
