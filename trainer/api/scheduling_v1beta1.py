"""The Workload API's scheduling types that a runtime's ``spec.scheduling`` embeds, group
``scheduling.k8s.io``, version ``v1beta1`` (Kubernetes 1.37; the same shapes were alpha in 1.35-1.36).

Field for field with kubernetes/api ``scheduling/v1beta1/types.go`` (``PodGroupSchedulingPolicy``,
``PodGroupSchedulingConstraints``, ``DisruptionMode``, ``PodGroupResourceClaim``): kubeflow/trainer
KEP-3015 (``proposals/3015-workload-aware-scheduling``) reuses the upstream types in its runtime API
rather than declaring its own, so a runtime reads as the ``Workload`` it becomes. Each union is
checked here as the apiserver checks it on the ``Workload`` (at most one member; the runtime may leave
a policy empty, which the operator defaults to gang).
"""

from __future__ import annotations

from pydantic import Field

from trainer.api.base import Model, atomic_list

ONE_SCHEDULING_POLICY = ("!(has(self.basic) && has(self.gang))", "set only one of basic and gang")
ONE_MODE = ("!(has(self.single) && has(self.all))", "set only one of single and all")
ONE_CLAIM_SOURCE = (
    "self.all(c, has(c.resourceClaimName) != has(c.resourceClaimTemplateName))",
    "each resource claim sets exactly one of resourceClaimName and resourceClaimTemplateName",
)
MAX_POD_GROUP_TEMPLATES = 8
"""``WorkloadMaxPodGroupTemplates``: the most PodGroup templates one ``Workload`` may hold."""
MAX_POD_GROUP_RESOURCE_CLAIMS = 4
"""``MaxPodGroupResourceClaims``: the most resource claims one PodGroup may share."""


class BasicSchedulingPolicy(Model):
    """Each Pod of the group is scheduled on its own, as without a group (no settings)."""


class GangSchedulingPolicy(Model):
    """All-or-nothing: the scheduler binds no Pod of the group until ``minCount`` of them fit."""

    min_count: int | None = Field(default=None, ge=1)
    """Pods that must be schedulable together. In a runtime it is computed from the TrainJob (its
    ``numNodes`` and the replicated jobs' parallelism and replicas) and must not be set."""


class PodGroupSchedulingPolicy(Model):
    """How the Pods of a group are scheduled: one of ``basic`` and ``gang``."""

    basic: BasicSchedulingPolicy | None = None
    """Each Pod on its own."""
    gang: GangSchedulingPolicy | None = None
    """All-or-nothing."""


class TopologyConstraint(Model):
    """Place every Pod of the group within one domain of a node label."""

    key: str = Field(min_length=1, max_length=316)
    """The node label whose value the group's Pods share, e.g. ``topology.kubernetes.io/zone``."""


class PodGroupSchedulingConstraints(Model):
    """Placement constraints of a group (the TopologyAwareWorkloadScheduling feature of the cluster)."""

    topology: list[TopologyConstraint] | None = atomic_list()
    """Topology domains the group must fit in."""


class SingleDisruptionMode(Model):
    """A Pod of the group may be disrupted alone (no settings)."""


class AllDisruptionMode(Model):
    """Disrupting one Pod of the group disrupts them all (no settings)."""


class DisruptionMode(Model):
    """How the Pods of a group may be disrupted (preempted): one of ``single`` and ``all``."""

    single: SingleDisruptionMode | None = None
    """One Pod at a time."""
    all: AllDisruptionMode | None = None
    """All together."""


class PodGroupResourceClaim(Model):
    """A ResourceClaim the Pods of a group share: an existing one, or one made from a template for the
    group."""

    name: str = Field(min_length=1, max_length=63)
    """The claim's name within the group; the Pods' ``spec.resourceClaims`` entry of the same name
    uses it."""
    resource_claim_name: str | None = None
    """An existing ResourceClaim in the group's namespace."""
    resource_claim_template_name: str | None = None
    """A ResourceClaimTemplate from which one claim is made for the whole group."""
