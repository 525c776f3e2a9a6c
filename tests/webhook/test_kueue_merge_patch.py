"""Kueue's writes to a TrainJob as JSON merge patches (kubernetes-sigs/kueue#14836): admission sends
``spec.runtimePatches`` whole with ``spec.suspend: false`` in one request; a stop sends ``suspend: true``,
then, once no pod is active, ``spec.runtimePatches`` whole with Kueue's entry emptied
(:mod:`localcluster.kueue`). Each is applied to the stored object as the apiserver applies it, then
defaulted and validated by the webhook's rules, as the apiserver calls them; the rules that protect
users stay kubeflow/trainer's (``pkg/runtime/framework/plugins/jobset/jobset.go``,
``checkRuntimePatchesImmutability``, v2.3.0): ``runtimePatches`` change only when the TrainJob is
suspended before or after the update, and never while its Jobs have active pods."""

from __future__ import annotations

import base64
import copy
from typing import Any

from localcluster.kueue import (
    KUEUE_MANAGER,
    PodSetInfo,
    admission_patch,
    kueue_runtime_patch,
    restore_patch,
    suspend_patch,
)
from tests.kube_double import merge_patch
from tests.webhook.test_admission import facts, tj
from tests.webhook.test_server import post, review, serve
from trainer.framework import json_codec
from trainer.framework.json_codec import JSON
from trainer.webhook import rules

CREATED, NOW = "2026-11-28T10:00:00Z", "2026-11-28T10:05:00Z"
SDK = "trainer.kubeflow.org/kubeflow-sdk"


def runtime_patch(manager: str, rjob: str, pod: JSON) -> JSON:
    """A ``runtimePatches`` entry stamped :data:`CREATED` patching replicated job ``rjob``'s Pod template
    with ``pod`` (``{metadata?, spec?}``), as the apiserver stores it."""
    rjobs = [{"name": rjob, "template": {"spec": {"template": pod}}}]
    return {
        "manager": manager,
        "time": CREATED,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": rjobs}}},
    }


MOUNT = {"name": "node", "volumeMounts": [{"name": "d", "mountPath": "/d"}]}
SDK_ENTRY = runtime_patch(SDK, "node", {"spec": {"containers": [MOUNT], "volumes": [{"name": "d", "emptyDir": {}}]}})
KWOK = PodSetInfo(
    "node",
    node_selector={"type": "kwok"},
    annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "true"},
    tolerations=[{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}],
    scheduling_gates=["kueue.x-k8s.io/topology"],
)


def created() -> JSON:
    """A queued TrainJob as stored after its creation: suspended by Kueue's webhook, the SDK's entry
    and Kueue's empty one, each stamped by the defaulting webhook."""
    job = tj(suspend=True, runtimePatches=[copy.deepcopy(SDK_ENTRY), {**kueue_runtime_patch(), "time": CREATED}])
    job["metadata"]["resourceVersion"] = "7"
    return job


def _apply_ops(obj: JSON, ops: list[JSON]) -> JSON:
    """The defaulting webhook's JSON patch applied (``add``/``replace`` of object members and list items)."""
    out = copy.deepcopy(obj)
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        *parents, last = op["path"].lstrip("/").split("/")
        at: Any = out
        for part in parents:
            at = at[int(part)] if isinstance(at, list) else at[part]
        at[int(last) if isinstance(at, list) else last] = op["value"]
    return out


def admit(old: JSON, patch: JSON, active: int = 0) -> tuple[JSON, rules.Verdict]:
    """What the apiserver makes of a merge patch of ``old``: the patched object, defaulted by
    ``/mutate-trainjob`` (at :data:`NOW`), and ``/validate-trainjob``'s verdict on it, with ``active``
    pods in the TrainJob's Jobs."""
    new = merge_patch(old, patch)
    new = _apply_ops(new, rules.default_patch(new, "TrainJob", "kueue", old, NOW))
    return new, rules.validate_trainjob(new, old, facts(active=active, gang="kueue"))


def entry(job: JSON, manager: str) -> JSON:
    found: list[JSON] = [p for p in job["spec"]["runtimePatches"] if p["manager"] == manager]
    (out,) = found
    return out


def test_kueues_admission_is_one_merge_patch_of_runtime_patches_whole_and_suspend_false() -> None:
    annotations = {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    assigned = {
        "nodeSelector": {"type": "kwok"},
        "tolerations": [{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}],
        "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
    }
    kueue = runtime_patch(KUEUE_MANAGER, "node", {"metadata": {"annotations": annotations}, "spec": assigned})
    assert admission_patch(created(), [KWOK]) == {
        "metadata": {"resourceVersion": "7"},
        "spec": {"runtimePatches": [SDK_ENTRY, kueue], "suspend": False},
    }


def test_admission_in_one_request_is_admitted_and_keeps_the_other_managers_entry_and_its_time() -> None:
    new, verdict = admit(created(), admission_patch(created(), [KWOK]))
    assert verdict.allowed, verdict.errors
    assert new["spec"]["suspend"] is False
    assert entry(new, SDK) == SDK_ENTRY, "another manager's entry is kept, its time too"
    kueue = entry(new, KUEUE_MANAGER)
    assert kueue["time"] == NOW, "Kueue's entry changed: stamped now, as upstream's defaulting webhook does"
    (rjob,) = kueue["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"type": "kwok"}


def test_admission_in_two_requests_is_admitted_too() -> None:
    """Kueue up to v0.19 (and #14836's ``RunWithPodSetsInfo``, inside ``startJob``'s patch) first
    writes its entry while the job is suspended, then unsuspends it carrying the same list."""
    inner = admission_patch(created(), [KWOK])
    del inner["spec"]["suspend"]
    filled, verdict = admit(created(), inner)
    assert verdict.allowed and filled["spec"]["suspend"] is True, verdict.errors
    resumed, verdict = admit(filled, admission_patch(filled, [KWOK]))
    assert verdict.allowed, verdict.errors
    assert resumed["spec"]["runtimePatches"] == filled["spec"]["runtimePatches"], "nothing changed: times kept"


def test_a_readmission_while_the_jobs_still_have_active_pods_is_refused_naming_the_field() -> None:
    _, verdict = admit(created(), admission_patch(created(), [KWOK]), active=2)
    (error,) = verdict.errors
    assert error.startswith("spec.runtimePatches") and "2 active pods" in error, error


def test_kueues_stop_suspends_first_then_restores_its_entry_once_no_pod_is_active() -> None:
    running, verdict = admit(created(), admission_patch(created(), [KWOK]))
    assert verdict.allowed
    running["metadata"]["resourceVersion"] = "9"
    assert suspend_patch(running) == {"metadata": {"resourceVersion": "9"}, "spec": {"suspend": True}}
    suspended, verdict = admit(running, suspend_patch(running), active=2)
    assert verdict.allowed and suspended["spec"]["suspend"] is True, verdict.errors
    assert suspended["spec"]["runtimePatches"] == running["spec"]["runtimePatches"]

    restored, verdict = admit(suspended, restore_patch(suspended))
    assert verdict.allowed, verdict.errors
    assert entry(restored, KUEUE_MANAGER)["trainingRuntimeSpec"] == {"template": {"spec": {}}}
    assert entry(restored, KUEUE_MANAGER)["time"] == NOW
    assert entry(restored, SDK) == SDK_ENTRY


def test_suspending_and_changing_runtime_patches_at_once_waits_for_the_pods_to_go_as_upstream() -> None:
    """Upstream refuses a change of ``runtimePatches`` while the JobSet has active replicated jobs,
    whichever side of the update is suspended; the same merge patch passes once they are gone."""
    running, _ = admit(created(), admission_patch(created(), [KWOK]))
    both = merge_patch(suspend_patch(running), restore_patch(running))
    _, verdict = admit(running, both, active=2)
    (error,) = verdict.errors
    assert error.startswith("spec.runtimePatches") and "2 active pods" in error, error
    assert "suspend" in error, "the message says the way out"
    new, verdict = admit(running, both, active=0)
    assert verdict.allowed and new["spec"]["suspend"] is True, verdict.errors


def test_runtime_patches_of_a_running_job_stay_as_they_are_whoever_patches_them() -> None:
    running, _ = admit(created(), admission_patch(created(), [KWOK]))
    changed = copy.deepcopy(running["spec"]["runtimePatches"])
    changed[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"] = {}
    _, verdict = admit(running, {"spec": {"runtimePatches": changed}})
    (error,) = verdict.errors
    assert error.startswith("spec.runtimePatches") and "suspend" in error, error
    # The same list sent back whole (a merge patch of another field's change carries it unchanged).
    same, verdict = admit(running, {"spec": {"runtimePatches": copy.deepcopy(running["spec"]["runtimePatches"])}})
    assert verdict.allowed and same == running, verdict.errors


async def test_the_webhook_server_admits_kueues_patched_object_as_the_apiserver_sends_it() -> None:
    """Through the HTTP server: ``/mutate-trainjob``, then ``/validate-trainjob`` with its patch applied."""
    old = created()
    new = merge_patch(old, admission_patch(old, [KWOK]))
    async for base in serve():
        code, mutated = await post(base, json_codec.dumps(review(new, old)), "/mutate-trainjob")
        assert code == 200 and mutated["response"]["allowed"], mutated
        ops = json_codec.loads(base64.b64decode(mutated["response"]["patch"]))
        assert [op["path"] for op in ops] == ["/spec/runtimePatches/1/time"], "only Kueue's entry is stamped anew"
        code, validated = await post(base, json_codec.dumps(review(_apply_ops(new, ops), old)), "/validate-trainjob")
        assert code == 200 and validated["response"] == {"uid": "u-1", "allowed": True}, validated
