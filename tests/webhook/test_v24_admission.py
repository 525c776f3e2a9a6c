"""Admission of Trainer v2.4 and master items: ``runtimePatches`` naming a replicated job, container or
init container the runtime's template lacks are refused with kubeflow/trainer's messages (#3948), and a
TrainJob update is checked against its runtime snapshot, not the live runtime (#3960)."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from tests.webhook.test_admission import RUNTIME, facts, tj
from trainer.framework.json_codec import JSON
from trainer.trainjob.features.snapshot import snapshot_config_map
from trainer.webhook import rules


def patch_of(rjob: str, **pod_spec: Any) -> JSON:
    template = {"spec": {"template": {"spec": pod_spec}}} if pod_spec else None
    entry: JSON = {"name": rjob, **({"template": template} if template else {})}
    return {"manager": "example.com/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [entry]}}}}


def test_runtime_patches_naming_what_the_template_lacks_are_refused_with_upstreams_messages() -> None:
    (err,) = rules.validate_trainjob(tj(runtimePatches=[patch_of("gone")]), None, facts()).errors
    assert "must not have replicated job that doesn't exist in the runtime job template" in err
    assert "'gone'" in err and "(it has node, aux)" in err
    (err,) = rules.validate_trainjob(
        tj(runtimePatches=[patch_of("aux", containers=[{"name": "ghost"}])]), None, facts()
    ).errors
    assert "must not have container that doesn't exist in the runtime job aux" in err
    (err,) = rules.validate_trainjob(
        tj(runtimePatches=[patch_of("aux", initContainers=[{"name": "aux"}])]), None, facts()
    ).errors
    assert "must not have initContainer that doesn't exist in the runtime job aux" in err, (
        "a container's name does not stand for an init container"
    )
    assert rules.validate_trainjob(tj(runtimePatches=[patch_of("aux", containers=[{"name": "aux"}])]), None, facts())


def _with_snapshot(base: rules.AdmissionFacts, job: JSON, runtime: JSON) -> rules.AdmissionFacts:
    """``base`` where TrainJob ``job`` has the snapshot of ``runtime`` it owns."""
    frozen = snapshot_config_map(job, {**runtime, "kind": "ClusterTrainingRuntime"})
    return dataclasses.replace(base, snapshot=lambda ns, name: frozen if (ns, name) == ("ns", "job") else None)


def test_an_update_is_checked_against_the_runtime_snapshot_not_the_live_runtime() -> None:
    edited = copy.deepcopy(RUNTIME)
    edited["spec"]["template"]["spec"]["replicatedJobs"] = [
        r for r in edited["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] != "aux"
    ]
    live = dataclasses.replace(facts(), runtime=lambda kind, name, ns: edited)
    old = tj(suspend=True)
    old["metadata"]["uid"] = "u-1"
    new = copy.deepcopy(old)
    new["spec"]["runtimePatches"] = [patch_of("aux", containers=[{"name": "aux"}])]
    assert not rules.validate_trainjob(new, old, live).allowed, "without a snapshot: the live runtime"
    snap = _with_snapshot(live, old, RUNTIME)
    assert rules.validate_trainjob(new, old, snap).allowed, "the runtime the job was built from has aux"
    gone = dataclasses.replace(snap, runtime=lambda kind, name, ns: None)
    wrong = copy.deepcopy(new)
    wrong["spec"]["runtimePatches"] = [patch_of("ghost")]
    (err,) = rules.validate_trainjob(wrong, old, gone).errors
    assert "must not have replicated job that doesn't exist in the runtime job template" in err, (
        "a deleted runtime: the snapshot still checks the update"
    )
    assert "(it has node, aux)" in err
    created = copy.deepcopy(new)
    assert not rules.validate_trainjob(created, None, snap).allowed, "a create reads the live runtime"
    other = json.loads(json.dumps(snap.snapshot("ns", "job")))
    other["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    foreign = dataclasses.replace(live, snapshot=lambda ns, name: other)
    assert not rules.validate_trainjob(new, old, foreign).allowed, "a snapshot the job does not own is not read"
