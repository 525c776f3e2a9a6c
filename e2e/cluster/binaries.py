"""Locate the cluster binaries built by ``e2e/build.sh``, building them when one is missing.

``e2e/build.sh`` puts every binary in ``$TRAINER_CACHE/bin/<component>-<version>/`` (the cache
defaults to ``~/.cache/trainer``) with the versions pinned in ``e2e/versions.env``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = E2E_DIR / "build.sh"
VERSIONS_FILE = E2E_DIR / "versions.env"

# binary name -> (versions.env variable, bin sub-directory prefix)
BINARIES: dict[str, tuple[str, str]] = {
    "etcd": ("ETCD_VERSION", "etcd"),
    "kube-apiserver": ("KUBERNETES_VERSION", "kubernetes"),
    "kube-controller-manager": ("KUBERNETES_VERSION", "kubernetes"),
    "kube-scheduler": ("KUBERNETES_VERSION", "kubernetes"),
    "kubectl": ("KUBERNETES_VERSION", "kubernetes"),
    "kwok": ("KWOK_VERSION", "kwok"),
}


def cache_dir() -> Path:
    """The build cache: ``$TRAINER_CACHE`` or ``~/.cache/trainer``."""
    return Path(os.environ.get("TRAINER_CACHE") or Path.home() / ".cache" / "trainer")


def versions() -> dict[str, str]:
    """The ``NAME=value`` pairs of ``e2e/versions.env``."""
    pairs: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            pairs[name.strip()] = value.strip().strip("\"'")
    return pairs


def binary_paths() -> dict[str, Path]:
    """Where each binary is expected, whether or not it has been built yet."""
    pinned = versions()
    bin_dir = cache_dir() / "bin"
    return {name: bin_dir / f"{prefix}-{pinned[var]}" / name for name, (var, prefix) in BINARIES.items()}


def missing_binaries() -> list[str]:
    """The names of the binaries that are not built yet."""
    return [name for name, path in binary_paths().items() if not os.access(path, os.X_OK)]


def ensure_binaries() -> dict[str, Path]:
    """Return the path of every binary, running ``e2e/build.sh`` first if any is missing.

    The build's output is streamed to stderr; a failed build raises ``CalledProcessError``.
    """
    if missing_binaries():
        print(f"[cluster] building missing binaries with {BUILD_SCRIPT}", file=sys.stderr, flush=True)
        subprocess.run(["bash", str(BUILD_SCRIPT)], check=True, stdout=sys.stderr)
        still_missing = missing_binaries()
        if still_missing:
            raise FileNotFoundError(f"{BUILD_SCRIPT} did not produce: {', '.join(still_missing)}")
    return binary_paths()
