"""The size limits and input checks every job kind shares: ``--max-nodes-per-job`` and the resource
quantities the apiserver must be able to read (it answers a server-side apply of one it cannot with a 500,
not a refusal). Pure; used by each kind's validation, admission and the reconcile.
"""

from __future__ import annotations

from trainer.framework.resources import parse_quantity

DEFAULT_MAX_NODES_PER_JOB = 1000
"""``--max-nodes-per-job`` unless set: the most pods one replicated job of a TrainJob (numNodes for the
trainer) or the workers of an MPIJob may have; 0 is no limit."""
MAX_NODES_FLAG = "--max-nodes-per-job"


def quantity_errors(resources: object, where: str) -> list[str]:
    """What is wrong with the ``limits`` and ``requests`` of a ``corev1.ResourceRequirements`` found at
    ``where``: each must be a map of resource name to a ``resource.Quantity`` (an integer, a number or a
    string such as ``500m``, ``4Gi``), as the apiserver reads it
    (:func:`trainer.framework.resources.parse_quantity`)."""
    if resources is None:
        return []
    if not isinstance(resources, dict):
        return [f"{where}: must be an object with limits and requests, not {resources!r}"]
    errors = []
    for key in ("limits", "requests"):
        amounts = resources.get(key)
        if amounts is None:
            continue
        if not isinstance(amounts, dict):
            errors.append(f"{where}.{key}: must be a map of resource name to quantity, not {amounts!r}")
            continue
        for name, value in amounts.items():
            try:
                parse_quantity(value)
            except ValueError:
                errors.append(
                    f"{where}.{key}[{name}]: {value!r} is not a quantity: use a number with an optional suffix, "
                    "e.g. 500m, 2, 4Gi, 1e3"
                )
    return errors


def container_quantities(pod: dict[str, object], where: str) -> list[str]:
    """Quantity errors of every container and init container of a pod spec at ``where``."""
    errors = []
    for kind in ("initContainers", "containers"):
        containers = pod.get(kind)
        for j, c in enumerate(containers if isinstance(containers, list) else []):
            if isinstance(c, dict):
                errors += quantity_errors(c.get("resources"), f"{where}.{kind}[{j}].resources")
    return errors
