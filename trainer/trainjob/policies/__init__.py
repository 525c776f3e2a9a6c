"""ML policies, one module each, selected by the field their runtime's ``mlPolicy`` sets.

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/registry.go``: to add a policy, write a module
with a :class:`~trainer.trainjob.policies.base.Policy` and list it in ``POLICIES`` below (or
:func:`register` it); the expansion, the validation and the reconciler only see the interface.
"""

from __future__ import annotations

from trainer.api.trainer_v1alpha1 import TrainingRuntimeSpec
from trainer.trainjob.policies.base import Created, Expansion, Policy
from trainer.trainjob.policies.flux import FLUX
from trainer.trainjob.policies.jax import JAX
from trainer.trainjob.policies.mpi import MPI
from trainer.trainjob.policies.plainml import PLAINML
from trainer.trainjob.policies.torch import TORCH
from trainer.trainjob.policies.xgboost import XGBOOST

__all__ = ["FALLBACK", "POLICIES", "Created", "Expansion", "Policy", "active", "policy_of", "register", "unregister"]

POLICIES: dict[str, Policy] = {p.field: p for p in (TORCH, MPI, JAX, XGBOOST, FLUX)}
"""``mlPolicy`` field -> its policy, in the order a runtime that sets several is expanded by."""
FALLBACK: Policy = PLAINML
"""The policy of a runtime that sets none of the fields (or has no ``mlPolicy``)."""


def register(policy: Policy) -> None:
    """Add ``policy`` after the others. Raises ``ValueError`` when its field is empty or taken."""
    if not policy.field or policy.field in POLICIES:
        raise ValueError(f"mlPolicy field {policy.field!r} is empty or already has a policy")
    POLICIES[policy.field] = policy


def unregister(field: str) -> None:
    """Remove the policy of ``mlPolicy.<field>``. Raises ``KeyError`` when there is none."""
    del POLICIES[field]


def active(runtime: TrainingRuntimeSpec) -> list[Policy]:
    """Every registered policy whose field ``runtime`` sets, in registry order; ``[FALLBACK]`` when
    none. Admission and the reconciler refuse a runtime with more than one
    (:func:`trainer.trainjob.validation.runtime_errors`); their reserved names and rules all apply."""
    return [p for p in POLICIES.values() if p.selects(runtime)] or [FALLBACK]


def policy_of(runtime: TrainingRuntimeSpec) -> Policy:
    """The policy that expands ``runtime``: the first of :func:`active`."""
    return active(runtime)[0]
