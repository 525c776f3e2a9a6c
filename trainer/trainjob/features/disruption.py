"""A gang TrainJob's PodDisruptionBudget: a drain or the cluster autoscaler evicts no pod of a running
gang, since one evicted rank stops the whole job (and a restart of the group follows).

Follows kubeflow/trainer#3657 (``pkg/runtime/framework/plugins/pdb/pdb.go``, fixes #3304): a
``policy/v1`` PodDisruptionBudget named like the TrainJob, controlled by it (it goes with it), selecting
its pods by ``jobset.sigs.k8s.io/jobset-name``, ``minAvailable`` the number of trainer pods (the
initializers complete and stop being ready, so counting them would leave the budget unmet for good),
made only for a gang job of more than one trainer pod. A gang job is one whose runtime has a
``podGroupPolicy`` (upstream's trigger) or that runs under a gang scheduler (``--gang-scheduler-name``
other than ``none``: this operator gangs every job there, podGroupPolicy or not). Ahead of upstream, the
budget of a finished TrainJob is deleted (upstream leaves it until the TrainJob goes): its pods are done
and a budget nobody can meet only confuses ``kubectl get pdb``.
"""

from __future__ import annotations

from trainer.api.kinds import POD_DISRUPTION_BUDGETS
from trainer.api.labels import JOBSET_NAME
from trainer.framework.json_codec import JSON
from trainer.framework.owner import owner_reference
from trainer.jobs.child_writer import Desired
from trainer.jobs.gang import WORKLOAD
from trainer.trainjob.features.base import Feature, Step, keep_only
from trainer.trainjob.runtime.info import RuntimeInfo

NO_GANG = "none"
"""The ``--gang-scheduler-name`` that gangs nothing."""


def trainer_pods(info: RuntimeInfo) -> int:
    """Pods of the trainer's replicated job (Jobs x pods per Job); 0 when the runtime has none."""
    return info.pod_set(info.trainer).count if info.trainer is not None else 0


def is_gang(info: RuntimeInfo, gang_name: str) -> bool:
    """Whether the TrainJob is gang scheduled: its runtime has a ``podGroupPolicy``, or ``gang_name``
    (``--gang-scheduler-name``) is a gang scheduler (``workload``: for a runtime with ``spec.scheduling``)."""
    if gang_name == WORKLOAD:  # gangs only the TrainJobs whose runtime sets spec.scheduling
        return info.runtime.scheduling is not None or info.runtime.pod_group_policy is not None
    return info.runtime.pod_group_policy is not None or gang_name != NO_GANG


def disruption_budget(info: RuntimeInfo, gang_name: str) -> JSON | None:
    """The TrainJob's PodDisruptionBudget, or None when it has none (not a gang job, one trainer pod at
    most). Shape: ``{apiVersion: policy/v1, kind, metadata: {name, namespace, labels, ownerReferences},
    spec: {minAvailable: <trainer pods>, selector: {matchLabels: {jobset-name: <trainjob>}}}}``. Raises
    ``ValueError`` when the TrainJob has no uid (never stored)."""
    count = trainer_pods(info)
    if count <= 1 or not is_gang(info, gang_name):
        return None
    name = str(info.job.metadata.name)
    return {
        "apiVersion": POD_DISRUPTION_BUDGETS.api_version,
        "kind": POD_DISRUPTION_BUDGETS.kind,
        "metadata": {
            "name": name,
            "namespace": info.job.metadata.namespace,
            "labels": {JOBSET_NAME: name},
            "ownerReferences": [owner_reference(info.job)],
        },
        "spec": {"minAvailable": count, "selector": {"matchLabels": {JOBSET_NAME: name}}},
    }


def desired(step: Step, out: Desired) -> None:
    """The budget while the TrainJob runs; deleted once it finished or is no gang job any more."""
    keep_only(step, out, POD_DISRUPTION_BUDGETS, disruption_budget(step.view.info, step.gang_name))


FEATURE = Feature(name="disruption", owns=(POD_DISRUPTION_BUDGETS,), desired=desired)
