"""The JobSet spec a runtime's ``template`` holds (kubernetes-sigs/jobset ``api/jobset/v1alpha2``, v0.12).

Every field of ``JobSetSpec`` is here, spelled as JobSet spells it (``enableDNSHostnames``, not the
camel case a generator would derive), so that a runtime copied from upstream loses nothing to
pruning. Each field is either implemented with JobSet's semantics or refused by the CRD with a
message naming it (:func:`trainer.api.base.refused`): ``suspend: true`` and ``managedBy`` belong to the
TrainJob, not to its runtime.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainer.api.base import KubeObject, Model, atomic_list, cel, list_map, refused

FAIL_JOBSET = "FailJobSet"
RESTART_JOBSET = "RestartJobSet"
RESTART_JOBSET_IGNORE_MAX = "RestartJobSetAndIgnoreMaxRestarts"
RESTART_JOB = "RestartJob"
RESTART_JOB_IGNORE_MAX = "RestartJobAndIgnoreMaxRestarts"
IN_PLACE_RESTART = "InPlaceRestart"
IN_PLACE_RESTART_MESSAGE = "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled"
"""JobSet's webhook refusal of ``restartStrategy: InPlaceRestart`` (its feature gate is off by default)."""
DEFAULT_GROUP = "default"


class DependsOn(Model):
    """A replicated job this one waits for (JobSet ``DependsOn``)."""

    name: str
    """Name of the replicated job depended on; it must come earlier in ``replicatedJobs``."""
    status: Literal["Ready", "Complete"]
    """Status the depended-on replicated job must reach: ``Ready`` (all its pods ready or done)
    or ``Complete`` (all its Jobs complete)."""


class ReplicatedJob(Model):
    """A group of identical ``batch/v1`` Jobs (JobSet ``ReplicatedJob``)."""

    name: str
    """Name of the replicated job; its Jobs are named ``<trainjob>-<name>-<index>``."""
    group_name: str = DEFAULT_GROUP
    """Group the replicated job belongs to; its Jobs and Pods carry ``jobset.sigs.k8s.io/group-name``,
    ``group-replicas`` and ``job-group-index``. Defaults to ``default``."""
    replicas: int = Field(default=1, ge=0)
    """Number of Jobs created from the template."""
    depends_on: list[DependsOn] | None = Field(
        default=None,
        max_length=5,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Replicated jobs that must reach a status before this one's Jobs are created."""
    template: KubeObject
    """A ``batch/v1`` JobTemplateSpec: ``{metadata, spec}``."""


class Network(Model):
    """Pod networking of the replicated Jobs (JobSet ``Network``)."""

    enable_dns_hostnames: bool | None = Field(default=None, alias="enableDNSHostnames")
    """Put every pod under the headless Service's subdomain, so that it resolves as
    ``<trainjob>-<rjob>-<jobIdx>-<podIdx>.<subdomain>``; defaults to true. False: no Service and no
    subdomain."""
    subdomain: str | None = None
    """Name of the headless Service; defaults to the TrainJob name."""
    publish_not_ready_addresses: bool | None = None
    """Publish pod DNS records before the pods are ready (the Service's
    ``publishNotReadyAddresses``); defaults to true."""


class FailurePolicyRule(Model):
    """One rule of a JobSet failure policy (``FailurePolicyRule``): the first rule that matches a
    failed Job decides."""

    name: str
    """The rule's name, for messages."""
    action: Literal[
        "FailJobSet",
        "RestartJobSet",
        "RestartJobSetAndIgnoreMaxRestarts",
        "RestartJob",
        "RestartJobAndIgnoreMaxRestarts",
    ]
    """What to do: fail the TrainJob; restart every Job (``RestartJobSet``, counting towards maxRestarts,
    or ``RestartJobSetAndIgnoreMaxRestarts``, not counting); or recreate only the failed Job while the
    others run on (``RestartJob``, counting, or ``RestartJobAndIgnoreMaxRestarts``, not counting)."""
    on_job_failure_reasons: list[str] | None = atomic_list()
    """Job failure reasons (e.g. ``BackoffLimitExceeded``, ``DeadlineExceeded``,
    ``PodFailurePolicy``) the rule applies to; empty: any."""
    on_job_failure_message_patterns: list[str] | None = atomic_list()
    """Regular expressions one of which the Job's failure message must match; empty: any."""
    target_replicated_jobs: list[str] | None = atomic_list()
    """Replicated jobs the rule applies to; empty: all."""


class FailurePolicy(Model):
    """How Job failures are handled (JobSet ``FailurePolicy``)."""

    max_restarts: int = Field(default=0, ge=0)
    """Counted restarts (of the whole group by ``RestartJobSet``, of one Job by ``RestartJob``) before
    the TrainJob fails."""
    restart_strategy: Literal["Recreate", "BlockingRecreate", "InPlaceRestart"] = cel(
        (f"self != '{IN_PLACE_RESTART}'", IN_PLACE_RESTART_MESSAGE), default="Recreate"
    )
    """Both ``Recreate`` and ``BlockingRecreate`` recreate every Job only once every Job of the previous
    attempt and its Pods are gone (no two attempts run at once). ``InPlaceRestart`` is refused, with
    JobSet's message when its feature gate is off."""
    rules: list[FailurePolicyRule] | None = atomic_list()
    """Evaluated in order for the earliest failed Job; none matching: ``RestartJobSet``."""


class SuccessPolicy(Model):
    """When the set counts as succeeded (JobSet ``SuccessPolicy``)."""

    operator: Literal["All", "Any"]
    """``All``: every Job of the target replicated jobs completed; ``Any``: one of them did."""
    target_replicated_jobs: list[str] | None = atomic_list()
    """Replicated jobs the operator applies to; empty: all."""


class StartupPolicy(Model):
    """Order in which replicated jobs start (JobSet ``StartupPolicy``)."""

    startup_policy_order: Literal["AnyOrder", "InOrder"]
    """``AnyOrder``: every replicated job at once. ``InOrder``: each replicated job's Jobs are created
    once every Job of the one before it is ready (as ``dependsOn: Ready`` on the previous one)."""


class Coordinator(Model):
    """The pod the others coordinate through (JobSet ``Coordinator``): every Job and Pod gets the
    annotation and label ``jobset.sigs.k8s.io/coordinator: <trainjob>-<rjob>-<jobIndex>-<podIndex>.<subdomain>``."""

    replicated_job: str
    """Replicated job of the coordinator pod."""
    job_index: int | None = Field(default=None, ge=0)
    """Index of the Job within the replicated job; defaults to 0."""
    pod_index: int | None = Field(default=None, ge=0)
    """Completion index of the pod within the Job; defaults to 0."""


class VolumeRetentionPolicy(Model):
    """What happens to the claims when the TrainJob is deleted (JobSet ``VolumeRetentionPolicy``)."""

    when_deleted: Literal["Delete", "Retain"] | None = "Delete"
    """``Delete``: the claims are owned by the TrainJob and deleted with it; ``Retain``: they are kept."""


class VolumeClaimPolicy(Model):
    """PersistentVolumeClaims shared by the pods of a TrainJob (JobSet ``VolumeClaimPolicy``)."""

    templates: list[KubeObject] | None = Field(
        default=None,
        max_length=50,
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            # A PersistentVolumeClaim kept whole; its name and namespace typed so that the rule can read them.
            "items": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "metadata": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
                    }
                },
            },
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(t, !has(t.metadata) || !has(t.metadata.namespace) || "
                    "size(t.metadata.namespace) == 0)",
                    "message": "namespace cannot be set for VolumeClaimPolicies templates",
                }
            ],
        },
    )
    """PersistentVolumeClaim templates; each becomes claim ``<template>-<trainjob>``, mounted as volume
    ``<template>`` into every container that has a volumeMount of that name."""
    retention_policy: VolumeRetentionPolicy | None = None
    """Whether the claims outlive the TrainJob; defaults to ``whenDeleted: Delete``."""


class JobSetSpec(Model):
    """The JobSet spec a runtime template holds (JobSet ``JobSetSpec``)."""

    replicated_jobs: list[ReplicatedJob] | None = list_map("name")
    """The replicated jobs to create, in order."""
    network: Network | None = None
    """Pod DNS settings."""
    success_policy: SuccessPolicy | None = None
    """When the set counts as succeeded; default: all Jobs complete."""
    failure_policy: FailurePolicy | None = None
    """How Job failures are handled; unset: the first failed Job fails the TrainJob."""
    startup_policy: StartupPolicy | None = None
    """Order in which the replicated jobs start; default ``AnyOrder``. Exclusive with ``dependsOn``."""
    suspend: bool | None = None
    """Replaced by the TrainJob's ``spec.suspend``, as upstream's JobSet plugin replaces it
    (kubeflow/trainer ``pkg/runtime/framework/plugins/jobset/jobset.go``: ``Suspend(trainJob.Spec.Suspend)``):
    a runtime cannot suspend its TrainJobs; ``true`` is admitted with a warning saying so."""
    coordinator: Coordinator | None = None
    """The pod the others coordinate through; named in a label and annotation on every Job and Pod."""
    managed_by: str | None = refused(
        "template.spec.managedBy is not supported in a runtime: set spec.managedBy on the TrainJob"
    )
    """Refused: which controller manages a TrainJob is the TrainJob's ``spec.managedBy``."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Seconds after the TrainJob finished until its children (Jobs, Pods, Service, ConfigMaps,
    Secrets, PodGroup) are deleted, as JobSet deletes the group; the TrainJob keeps its outcome."""
    volume_claim_policies: list[VolumeClaimPolicy] | None = Field(
        default=None, max_length=50, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """PersistentVolumeClaims created for the TrainJob and mounted into its pods."""


JOBSET_SPEC_RULES = (
    (
        "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
        "has(self.replicatedJobs) && self.replicatedJobs.exists(x, has(x.dependsOn)))",
        "StartupPolicy and DependsOn APIs are mutually exclusive",
    ),
)
"""CEL rules of ``JobSetSpec`` as a whole, as JobSet declares them."""
