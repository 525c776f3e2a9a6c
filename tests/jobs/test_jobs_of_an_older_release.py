"""Jobs made by an older release of the operator, after an upgrade (:mod:`trainer.jobs.child_writer`):
a running Job is never rewritten, however the newer operator would make it; a suspended one whose Pod
template differs is recreated when resumed."""

from __future__ import annotations

import copy

from tests.harness import World, env_of, job
from trainer.api.kinds import JOBS, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError


async def test_a_running_job_is_not_rewritten_when_a_newer_operator_wants_another_template() -> None:
    w = World("deepspeed-mpi", "none")
    await w.settle()
    launcher = copy.deepcopy(job(w, "launcher"))
    annotations = launcher["metadata"]["annotations"]
    annotations["trainer.kubeflow.org/desired-hash"] = "made-by-an-older-release"
    w.kube.put(launcher)
    writes = w.kube.count()
    await w.settle()
    assert w.kube.count("apply", JOBS.kind) + w.kube.count("json_patch", JOBS.kind) == 0, w.kube.writes[writes:]


async def test_a_suspended_job_made_by_an_older_release_is_recreated_when_resumed() -> None:
    """Its Pod template differs in more than scheduling directives, which the apiserver refuses to
    change (422): the Job, which has no Pods, is recreated with the new template instead of failing."""
    w = World("deepspeed-mpi", "none")
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["suspend"] = True
    w.kube.put(tj)
    await w.settle()
    old = job(w, "launcher")
    assert old["spec"]["suspend"] is True
    old["metadata"]["annotations"]["trainer.kubeflow.org/desired-hash"] = "made-by-an-older-release"
    w.kube.put(old)
    apply = w.kube.apply

    async def immutable(obj: JSON, manager: str, force: bool = True, *, dry_run: bool = False) -> JSON:
        stored = w.kube.objects.get((JOBS, (obj["metadata"]["namespace"], obj["metadata"]["name"])))
        if obj["kind"] == JOBS.kind and stored is not None and stored["metadata"]["uid"] == old["metadata"]["uid"]:
            raise ApiError(422, {"reason": "Invalid", "message": "spec.template: field is immutable"})
        return await apply(obj, manager, force, dry_run=dry_run)

    w.kube.apply = immutable  # type: ignore[method-assign]
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["suspend"] = False
    w.kube.put(tj)
    await w.settle()
    new = job(w, "launcher")
    assert new["metadata"]["uid"] != old["metadata"]["uid"] and new["spec"]["suspend"] is False
    assert "PRTE_MCA_prte_default_hostfile" in env_of(new)
    assert w.condition("Misconfigured") is None
