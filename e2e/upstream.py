"""Kubeflow Trainer's published files, fetched at test time from the Go module proxy (never committed):
the module ``github.com/kubeflow/trainer/v2`` at :data:`TRAINER_VERSION` holds its ``examples/yaml``
and the default runtimes of ``manifests/base/runtimes``.

``go mod download`` puts the module in Go's module cache once (read-only there); later calls only
read it. The proxy serves v2.3.0 and answers 403 for v2.4.0 (checked when this was written)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
TRAINER_VERSION = "v2.3.0"
"""The Trainer release whose examples and runtimes the e2e suite applies as published."""


def module_dir(module: str, version: str) -> Path:
    """The directory of ``module@version`` in Go's module cache, downloaded from the proxy if needed.

    Raises ``RuntimeError`` naming the module, the version and the proxy's answer when it is not
    served (e.g. 403 for a version the proxy withholds) or ``go`` is missing."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    with tempfile.TemporaryDirectory() as outside_any_module:
        try:
            done = subprocess.run(
                ["go", "mod", "download", "-json", f"{module}@{version}"],
                cwd=outside_any_module,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        except FileNotFoundError as e:
            raise RuntimeError(f"{module}@{version}: the go command is needed to download it ({e})") from e
    try:
        answer: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        answer = {}
    directory = answer.get("Dir")
    if done.returncode != 0 or not directory or not Path(directory).is_dir():
        why = answer.get("Error") or done.stderr.strip() or done.stdout.strip()
        raise RuntimeError(f"{module}@{version} is not available from the Go module proxy: {why}")
    return Path(directory)


@functools.cache
def trainer_dir() -> Path:
    """The Kubeflow Trainer module at :data:`TRAINER_VERSION` (see :func:`module_dir`)."""
    return module_dir(TRAINER_MODULE, TRAINER_VERSION)


def examples_dir() -> Path:
    """Upstream's ``examples/yaml`` (``01-multi-node.yaml`` ... and its ``README.md``)."""
    return trainer_dir() / "examples" / "yaml"


def documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of ``path``, empty ones (comments only) left out."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def default_runtimes() -> dict[str, dict[str, Any]]:
    """Upstream's default ClusterTrainingRuntimes (``manifests/base/runtimes`` and its subdirectories,
    the kustomizations left out), by name."""
    root = trainer_dir() / "manifests" / "base" / "runtimes"
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(root.rglob("*.yaml")):
        for doc in documents(path):
            if doc.get("kind") == "ClusterTrainingRuntime":
                found[doc["metadata"]["name"]] = doc
    return found
