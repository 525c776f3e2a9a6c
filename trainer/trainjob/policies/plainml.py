"""The plain ML policy: a runtime whose ``mlPolicy`` names no framework (or that has no ``mlPolicy``).

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/plainml/plainml.go``: the trainer's
replicated job runs ``numNodes`` pods per Job (when a node count is known), with no environment, no
pod mutation, no children and no rules of its own: :class:`~trainer.trainjob.policies.base.Policy`'s
defaults.
"""

from __future__ import annotations

from trainer.trainjob.policies.base import Policy


class PlainML(Policy):
    """The fallback when no registered policy's field is set."""


PLAINML = PlainML()
