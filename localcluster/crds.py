"""Apply CustomResourceDefinitions with the built kubectl and wait until they are Established."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from localcluster.api import ApiClient

FIELD_MANAGER = "trainer-e2e-cluster"
CRD_PREFIX = "customresourcedefinition.apiextensions.k8s.io/"
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def apply_crds(
    kubectl: Path, kubeconfig: Path, api: ApiClient, paths: Sequence[Path], timeout: float = 60.0
) -> list[str]:
    """Server-side apply the manifests in ``paths`` (files or directories, in that order), wait for their CRDs.

    One kubectl call applies everything, in the order given: server-side, so CRDs of any size
    fit, and always with the same field manager and ``--force-conflicts``, so that a later
    manifest of a CRD replaces an earlier one of the same name entirely. Then ``api`` polls
    until every applied CRD has condition Established (one list call per poll: ``kubectl wait``
    fetches the CRDs one by one, ~0.1 s each). Returns the CRD names (``<plural>.<group>``);
    raises ``RuntimeError`` with kubectl's output if it fails, ``TimeoutError`` after ``timeout``.
    """
    if not paths:
        return []
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no CRD manifests at {path}")
    deadline = time.monotonic() + timeout
    files = [arg for path in paths for arg in ("-f", str(path))]
    args = [str(kubectl), f"--kubeconfig={kubeconfig}", "apply", "--server-side", "--force-conflicts"]
    args += [f"--field-manager={FIELD_MANAGER}", "-oname", *files]
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as err:
        raise RuntimeError(f"applying CRDs timed out after {timeout:.0f}s: {' '.join(args)}") from err
    if result.returncode != 0:
        output = f"{result.stderr}{result.stdout}"
        raise RuntimeError(f"applying CRDs failed ({result.returncode}): {' '.join(args)}\n{output}")
    names = list(
        dict.fromkeys(
            line.strip().removeprefix(CRD_PREFIX)
            for line in result.stdout.splitlines()
            if line.strip().startswith(CRD_PREFIX)
        )
    )
    pending = set(names)
    while pending:
        pending -= _established(api)
        if not pending:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRDs not Established after {timeout:.0f}s: {', '.join(sorted(pending))}")
        time.sleep(0.1)
    return names


def _established(api: ApiClient) -> set[str]:
    """The names of the CRDs whose condition Established is True."""
    try:
        status, body = api.get(CRDS_PATH)
    except OSError:
        return set()
    if status != 200:
        return set()
    items: list[dict[str, Any]] = body.get("items") or []
    return {
        item["metadata"]["name"]
        for item in items
        if any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (item.get("status") or {}).get("conditions") or []
        )
    }
