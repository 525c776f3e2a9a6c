"""Pure status logic: jobsStatus counts (as JobSet counts them) and TrainJob conditions."""

from __future__ import annotations

from typing import Any

from tests.conftest import info
from trainer.api import crd
from trainer.api.base import Condition
from trainer.api.jobset_v1alpha2 import JobSetSpec, ReplicatedJob, SuccessPolicy
from trainer.api.trainer_v1alpha1 import (
    ClusterTrainingRuntime,
    JobSetTemplateSpec,
    TrainingRuntimeSpec,
    TrainJob,
)
from trainer.jobs.conditions import merge_conditions, transitions
from trainer.trainjob.runtime.attempt import jobs_status
from trainer.trainjob.runtime.view import TrainJobView
from trainer.trainjob.status import desired_conditions


def job(rjob: str, **status: Any) -> dict[str, Any]:
    conditions = status.pop("conditions", [])
    suspend = status.pop("suspend", False)
    parallelism = status.pop("parallelism", 2)
    return {
        "metadata": {"name": f"j-{rjob}", "labels": {"jobset.sigs.k8s.io/replicatedjob-name": rjob}},
        "spec": {"parallelism": parallelism, "completions": parallelism, "suspend": suspend},
        "status": {**status, "conditions": conditions},
    }


RJOBS = [ReplicatedJob(name="init", template={}), ReplicatedJob(name="node", replicas=2, template={})]
TEMPLATE = JobSetSpec(replicated_jobs=RJOBS)


def counts(jobs: list[dict[str, Any]]) -> dict[str, tuple[int, int, int, int, int]]:
    return {s.name: (s.ready, s.succeeded, s.failed, s.active, s.suspended) for s in jobs_status(RJOBS, jobs)}


def test_jobs_status_counts_like_jobset() -> None:
    jobs = [
        job("init", conditions=[{"type": "Complete", "status": "True"}], succeeded=2),
        job("node", ready=2, active=2),
        job("node", ready=1, succeeded=1, active=1),
    ]
    assert counts(jobs) == {"init": (0, 1, 0, 0, 0), "node": (2, 0, 0, 2, 0)}


def test_jobs_status_counts_suspended_and_failed() -> None:
    jobs = [job("node", suspend=True), job("node", conditions=[{"type": "Failed", "status": "True"}], active=0)]
    assert counts(jobs) == {"init": (0, 0, 0, 0, 0), "node": (0, 0, 1, 0, 1)}


def test_unknown_replicated_job_label_is_ignored() -> None:
    assert counts([job("other", ready=2, active=2)]) == {"init": (0, 0, 0, 0, 0), "node": (0, 0, 0, 0, 0)}


def observed(suspended: bool, jobs: list[dict[str, Any]], template: JobSetSpec) -> TrainJobView:
    """The runtime info of a TrainJob (suspended or not) on a runtime with ``template``, with ``jobs``."""
    rt = ClusterTrainingRuntime(
        metadata={"name": "r"}, spec=TrainingRuntimeSpec(template=JobSetTemplateSpec(spec=template))
    )
    tj = TrainJob.model_validate(
        {
            "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
            "spec": {"runtimeRef": {"name": "r"}, "suspend": suspended},
        }
    )
    return info(tj, rt, jobs)


def conds(obs: TrainJobView, current: list[Condition] | None = None, rich: bool = True) -> dict[str, tuple[str, str]]:
    out = desired_conditions(obs, current or [], running_condition=rich)
    return {c.type: (c.status, c.reason) for c in out}


def test_suspended_then_resumed() -> None:
    suspended = conds(observed(True, [], TEMPLATE))
    assert suspended == {"Suspended": ("True", "Suspended")}
    have = [Condition(type="Suspended", status="True", reason="Suspended")]
    assert conds(observed(False, [], TEMPLATE), have) == {"Suspended": ("False", "Resumed")}


def test_running_once_every_trainer_job_is_ready() -> None:
    one_ready = [job("node", ready=2, active=2), job("node", ready=1, active=2)]
    assert "Running" not in conds(observed(False, one_ready, TEMPLATE))
    all_ready = [job("node", ready=2, active=2), job("node", ready=2, active=2)]
    assert conds(observed(False, all_ready, TEMPLATE))["Running"] == ("True", "TrainerPodsRunning")


def test_complete_when_every_job_succeeded_and_failed_wins() -> None:
    ok = {"conditions": [{"type": "Complete", "status": "True"}]}
    done = [job("init", **ok), job("node", **ok), job("node", **ok)]
    have = [Condition(type="Running", status="True", reason="TrainerPodsRunning")]
    result = conds(observed(False, done, TEMPLATE), have)
    assert result["Complete"] == ("True", "AllJobsCompleted")
    assert result["Running"] == ("False", "Completed")
    failed = [
        *done[:2],
        job("node", conditions=[{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]),
    ]
    out = desired_conditions(observed(False, failed, TEMPLATE), [])
    assert [(c.type, c.reason) for c in out] == [("Failed", "FailedJobs")]
    assert "BackoffLimitExceeded" in out[0].message


def test_finished_is_final() -> None:
    have = [Condition(type="Complete", status="True", reason="AllJobsCompleted")]
    assert conds(observed(False, [], TEMPLATE), have) == {"Complete": ("True", "AllJobsCompleted")}


def test_success_policy_any_targets() -> None:
    template = JobSetSpec(
        replicated_jobs=RJOBS, success_policy=SuccessPolicy(operator="Any", target_replicated_jobs=["node"])
    )
    one = [job("node", conditions=[{"type": "Complete", "status": "True"}])]
    assert conds(observed(False, one, template))["Complete"][0] == "True"


def test_merge_keeps_transition_time_and_moves_new_true_conditions_last() -> None:
    first = merge_conditions([], [Condition(type="Suspended", status="True", reason="Suspended")], "t1")
    resumed = merge_conditions(first, [Condition(type="Suspended", status="False", reason="Resumed")], "t2")
    assert resumed[0].last_transition_time == "t2"
    running = merge_conditions(
        resumed,
        [
            Condition(type="Suspended", status="False", reason="Resumed"),
            Condition(type="Running", status="True", reason="TrainerPodsRunning"),
        ],
        "t3",
    )
    assert [c.type for c in running] == ["Suspended", "Running"]
    assert running[0].last_transition_time == "t2"
    assert [c.type for c in transitions(resumed, running)] == ["Running"]
    again = merge_conditions(running, [Condition(type="Suspended", status="True", reason="Suspended")], "t4")
    assert [c.type for c in again] == ["Suspended"]


def test_a_finished_status_is_stable_across_reconciles() -> None:
    ok = {"conditions": [{"type": "Complete", "status": "True"}]}
    done = [job("init", **ok), job("node", **ok), job("node", **ok)]
    obs = observed(False, done, TEMPLATE)
    have = [Condition(type="Running", status="True", reason="TrainerPodsRunning")]
    first = merge_conditions(have, desired_conditions(obs, have), "t1")
    second = merge_conditions(first, desired_conditions(obs, first), "t2")
    assert second == first, "no status rewrite once finished"


def test_by_default_only_upstreams_conditions_so_the_official_sdk_sees_a_run() -> None:
    all_ready = [job("node", ready=2, active=2), job("node", ready=2, active=2)]
    assert conds(observed(False, all_ready, TEMPLATE), rich=False) == {}, "no condition while it runs"
    have = [Condition(type="Suspended", status="True", reason="Suspended")]
    assert conds(observed(True, [], TEMPLATE), have, rich=False) == {"Suspended": ("True", "Suspended")}
    assert conds(observed(False, all_ready, TEMPLATE), have, rich=False) == {}, "resumed: the condition goes"
    ok = {"conditions": [{"type": "Complete", "status": "True"}]}
    done = [job("init", **ok), job("node", **ok), job("node", **ok)]
    assert conds(observed(False, done, TEMPLATE), [], rich=False) == {"Complete": ("True", "AllJobsCompleted")}


def state_column(conditions: list[Condition]) -> str:
    """What ``kubectl get trainjobs`` shows as State: the apiserver evaluates the column's JSONPath and
    prints its first result (kubernetes ``apiextensions-apiserver`` ``tableconvertor.go``), here the
    first condition whose status is True ("" for none)."""
    spec = next(s for s in crd.CRDS if s.resource.plural == "trainjobs")
    column = next(c for c in spec.printer_columns if c["name"] == "State")
    assert column["jsonPath"] == '.status.conditions[?(@.status=="True")].type'
    return next((c.type for c in conditions if c.status == "True"), "")


def test_state_column_tells_a_resumed_job_from_a_suspended_one() -> None:
    """kubeflow/trainer#3666: after a resume the State column no longer shows Suspended."""
    all_ready = [job("node", ready=2, active=2), job("node", ready=2, active=2)]
    ok = {"conditions": [{"type": "Complete", "status": "True"}]}
    done = [job("init", **ok), job("node", **ok), job("node", **ok)]
    for rich in (False, True):
        now: list[Condition] = []
        states = []
        for obs in (
            observed(True, [], TEMPLATE),
            observed(False, [], TEMPLATE),
            observed(False, all_ready, TEMPLATE),
            observed(False, done, TEMPLATE),
        ):
            now = merge_conditions(now, desired_conditions(obs, now, running_condition=rich), "t")
            states.append(state_column(now))
        # Resumed: nothing by default (no condition at all, as the kubeflow SDK wants to see a run),
        # Running with --trainjob-running-condition once every trainer pod is ready.
        assert states == ["Suspended", "", "Running" if rich else "", "Complete"], rich
