"""KEP-2899 part 2 (kubeflow/trainer#3824, #4052): the TrainJob's own ``ttlSecondsAfterFinished`` deletes
the TrainJob itself, the runtime's ``runPolicy`` gives the deadline and TTL a TrainJob does not set,
``status.startTime`` and ``completionTime`` as JobSet keeps them (kubernetes-sigs/jobset KEP-1186), the
warnings for a deadline or TTL in the runtime's templates, and the SDK's ``ttl_seconds_after_finished``."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from tests.client.test_client_shapes import client
from tests.harness import RuntimeWrapper, TrainJobWrapper, World, ago
from trainer.api.kinds import JOBS, TRAINJOBS
from trainer.api.trainer_v1alpha1 import TrainingRuntimeSpec, TrainJob
from trainer.framework.json_codec import JSON
from trainer.webhook.rules import validate_runtime


def world(
    job_ttl: int | None = None,
    run_policy: JSON | None = None,
    template_ttl: int | None = None,
    deadline: int | None = None,
    suspend: bool = False,
) -> World:
    """The torch sample on a runtime with ``runPolicy`` and a template ``ttlSecondsAfterFinished``, and a
    TrainJob with its own ``ttlSecondsAfterFinished``, ``activeDeadlineSeconds`` and ``suspend``."""
    rt = RuntimeWrapper().obj()
    rt["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] = template_ttl
    rt["spec"]["runPolicy"] = run_policy
    tj = TrainJobWrapper().obj()
    own = {"ttlSecondsAfterFinished": job_ttl, "activeDeadlineSeconds": deadline, "suspend": suspend or None}
    tj["spec"].update({k: v for k, v in own.items() if v is not None})
    return World(objects=[rt, tj])


def deleted_trainjob(w: World) -> bool:
    return any(wr.verb == "delete" and wr.kind == TRAINJOBS.kind for wr in w.kube.writes)


async def finish_and_age(w: World, seconds: float) -> float | None:
    """Complete the Jobs, then make the finish ``seconds`` old; returns the requeue after the finish."""
    await w.settle()
    w.complete_jobs()
    requeue = await w.settle()
    tj = copy.deepcopy(w.tj)
    for c in tj["status"]["conditions"]:
        c["lastTransitionTime"] = ago(seconds)
    w.kube.put(tj)
    return requeue


async def test_the_trainjobs_own_ttl_deletes_the_trainjob_itself_after_it_finished() -> None:
    w = world(job_ttl=5)
    requeue = await finish_and_age(w, 1)
    assert requeue is not None and 0 < requeue <= 5, "looked at again when the TTL passes"
    await w.settle()
    assert not deleted_trainjob(w), "not before the TTL"
    tj = copy.deepcopy(w.tj)
    for c in tj["status"]["conditions"]:
        c["lastTransitionTime"] = ago(6)
    w.kube.put(tj)
    await w.settle()
    assert deleted_trainjob(w) and (TRAINJOBS, ("default", "pytorch-simple")) not in w.kube.objects
    assert not any(wr.verb == "delete" and wr.kind == JOBS.kind for wr in w.kube.writes), (
        "the Jobs go with the TrainJob (owner references), not one by one"
    )


async def test_the_runtimes_run_policy_ttl_applies_to_a_trainjob_that_sets_none() -> None:
    w = world(run_policy={"ttlSecondsAfterFinished": 0})
    await w.settle()
    w.complete_jobs()
    await w.settle()
    assert deleted_trainjob(w), "0: at once"


async def test_a_trainjobs_own_ttl_overrides_the_runtimes_run_policy() -> None:
    w = world(job_ttl=100, run_policy={"ttlSecondsAfterFinished": 0})
    await finish_and_age(w, 5)
    await w.settle()
    assert not deleted_trainjob(w) and w.condition("Complete") is not None


async def test_a_trainjob_ttl_wins_over_the_template_ttl_which_alone_keeps_the_trainjob() -> None:
    w = world(template_ttl=1)
    await finish_and_age(w, 5)
    await w.settle()
    assert not deleted_trainjob(w) and not w.jobs(), "the template's JobSet TTL: children go, the TrainJob stays"
    w = world(template_ttl=1, job_ttl=100)
    await finish_and_age(w, 5)
    await w.settle()
    assert not deleted_trainjob(w) and w.jobs(), "the TrainJob's own TTL holds: nothing goes before it"


async def test_run_policy_deadline_fails_a_trainjob_that_sets_none_and_its_own_overrides_it() -> None:
    w = world(run_policy={"activeDeadlineSeconds": 20})
    requeue = await w.settle()
    assert requeue is not None and 0 < requeue <= 20
    tj = copy.deepcopy(w.tj)
    tj.setdefault("status", {})["startTime"] = ago(21)
    w.kube.put(tj)
    await w.settle()
    failed = w.condition("Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert "runPolicy.activeDeadlineSeconds" in failed["message"]
    assert not w.jobs(), "every Job goes"
    w = world(run_policy={"activeDeadlineSeconds": 20}, deadline=100)
    await w.settle()
    tj = copy.deepcopy(w.tj)
    tj.setdefault("status", {})["startTime"] = ago(21)
    w.kube.put(tj)
    await w.settle()
    assert w.condition("Failed") is None, "the TrainJob's own deadline holds"


async def test_start_time_follows_suspend_and_resume_and_completion_time_is_set_once() -> None:
    w = world(suspend=True)
    await w.settle()
    assert not w.tj["status"].get("startTime"), "not while created suspended"
    tj = copy.deepcopy(w.tj)
    tj["spec"]["suspend"] = False
    w.kube.put(tj)
    await w.settle()
    first = w.tj["status"]["startTime"]
    assert first, "set when resumed"
    tj = copy.deepcopy(w.tj)
    tj["spec"]["suspend"] = True
    w.kube.put(tj)
    await w.settle()
    assert not w.tj["status"].get("startTime"), "cleared while suspended"
    tj = copy.deepcopy(w.tj)
    tj["spec"]["suspend"] = False
    tj["status"]["startTime"] = None
    w.kube.put(tj)
    await w.settle()
    assert w.tj["status"]["startTime"], "set again on resume"
    w.complete_jobs()
    await w.settle()
    complete = w.condition("Complete")
    assert complete is not None and w.tj["status"]["completionTime"] == complete["lastTransitionTime"]
    start = w.tj["status"]["startTime"]
    await w.settle()
    assert (w.tj["status"]["startTime"], w.tj["status"]["completionTime"]) == (start, complete["lastTransitionTime"])


async def test_a_deadline_counts_from_the_resume_not_the_creation() -> None:
    w = world(suspend=True, deadline=20)
    tj = copy.deepcopy(w.tj)
    tj["metadata"]["creationTimestamp"] = ago(60)  # queued for a minute
    w.kube.put(tj)
    await w.settle()
    tj = copy.deepcopy(w.tj)
    tj["spec"]["suspend"] = False
    w.kube.put(tj)
    requeue = await w.settle()
    assert w.condition("Failed") is None and requeue is not None and 15 < requeue <= 20


def test_the_schema_bounds_and_the_template_warnings() -> None:
    rt = RuntimeWrapper().obj()
    with pytest.raises(ValidationError):
        TrainingRuntimeSpec.model_validate({**rt["spec"], "runPolicy": {"activeDeadlineSeconds": 0}})
    with pytest.raises(ValidationError):
        TrainingRuntimeSpec.model_validate({**rt["spec"], "runPolicy": {"ttlSecondsAfterFinished": -1}})
    tj = TrainJobWrapper().obj()
    with pytest.raises(ValidationError):
        TrainJob.model_validate({**tj, "spec": {**tj["spec"], "ttlSecondsAfterFinished": -1}})
    assert validate_runtime(rt).warnings == []
    rt["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] = 3
    job_spec = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job_spec["activeDeadlineSeconds"] = 5
    verdict = validate_runtime(rt)
    assert verdict.allowed and len(verdict.warnings) == 2
    assert "spec.runPolicy.ttlSecondsAfterFinished" in verdict.warnings[0]
    assert "replicatedJobs[0].template.spec.activeDeadlineSeconds" in verdict.warnings[1]


async def test_the_sdk_sets_ttl_seconds_after_finished() -> None:
    c, kube = client("team-a")
    name = await c.train("torch-distributed", ttl_seconds_after_finished=0)
    assert (await kube.get(TRAINJOBS, "team-a", name))["spec"]["ttlSecondsAfterFinished"] == 0
    name = await c.train("torch-distributed")
    assert "ttlSecondsAfterFinished" not in (await kube.get(TRAINJOBS, "team-a", name))["spec"]
    with pytest.raises(ValueError, match="ttl_seconds_after_finished"):
        await c.train("torch-distributed", ttl_seconds_after_finished=-1)
