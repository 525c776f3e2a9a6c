"""What the caches keep of an object: the fields the reconcilers read, not managedFields, not a Job's
Pod spec, not a Secret's data."""

from __future__ import annotations

import copy
import json
import sys

import pytest

from tests.kube_double import RecordingKube
from trainer.api.kinds import CONFIGMAPS, JOBS, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube import projection as projection_module
from trainer.framework.kube.cache import Informer
from trainer.framework.kube.projection import LEAF_ITEMS, projection
from trainer.jobs.child_writer import HASH_ANNOTATION, needs_apply, with_hash
from trainer.jobs.reconcile import kept_job, kept_secret, kept_service

MANAGED = [{"manager": "trainer", "operation": "Apply", "fieldsV1": {"f:spec": {"f:template": {}}}}]


def observed_job() -> JSON:
    """A Job as the apiserver returns it once its pods started."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "tj-node-0",
            "namespace": "ns",
            "uid": "j1",
            "resourceVersion": "42",
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "node"},
            "annotations": {"trainer.kubeflow.org/desired-hash": "abc"},
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": "tj",
                    "uid": "t1",
                    "controller": True,
                }
            ],
            "managedFields": MANAGED,
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": False,
            "template": {
                "metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": "tj"}},
                "spec": {"containers": [{"name": "node", "image": "x", "env": [{"name": "A", "value": "1"}] * 50}]},
            },
        },
        "status": {"active": 2, "ready": 2},
    }


def test_a_cached_job_holds_what_the_reconcilers_read_and_no_pod_template() -> None:
    informer = Informer(RecordingKube(), JOBS, transform=projection(kept_job))
    seen: list[JSON | None] = []
    informer.add_handler(lambda old, new: seen.append(new))
    job = observed_job()
    original = copy.deepcopy(job)
    informer.handle_event("ADDED", job)
    cached = informer.get("ns", "tj-node-0")
    assert cached is not None and seen == [cached], "handlers get the cached object"
    assert job == original, "the transform does not change what it is given"
    assert "managedFields" not in cached["metadata"]
    assert "template" not in cached["spec"] and "selector" not in cached["spec"]
    assert (cached["spec"]["parallelism"], cached["spec"]["completions"], cached["spec"]["suspend"]) == (2, 2, False)
    assert cached["status"] == {"active": 2, "ready": 2}
    assert cached["metadata"]["labels"] == job["metadata"]["labels"]
    assert cached["metadata"]["annotations"] == job["metadata"]["annotations"]
    assert informer.owned_by("t1") == [cached], "indexed by owner"
    assert len(repr(cached)) < len(repr(job)) / 3


def test_cached_secrets_keep_no_key_and_other_kinds_lose_only_managed_fields() -> None:
    secret = {"metadata": {"name": "s", "managedFields": MANAGED}, "data": {"ssh-privatekey": "x" * 3000}, "type": "t"}
    assert projection(kept_secret)(secret) == {"metadata": {"name": "s"}, "type": "t"}
    for _ in (TRAINJOBS, CONFIGMAPS):  # the primary, a child without its own projection
        obj = {"metadata": {"name": "o", "managedFields": MANAGED}, "spec": {"a": 1}, "data": {"k": "v"}}
        assert projection()(obj) == {"metadata": {"name": "o"}, "spec": {"a": 1}, "data": {"k": "v"}}


def test_a_projected_job_is_not_drift_but_a_changed_desire_is() -> None:
    desired = observed_job()
    for key in ("uid", "resourceVersion", "managedFields"):
        del desired["metadata"][key]
    del desired["status"]
    desired["metadata"]["annotations"] = {}
    desired = with_hash(desired)
    stored = copy.deepcopy(desired)
    stored["metadata"]["uid"] = "j1"
    stored["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"  # the apiserver's defaults
    cached = projection(kept_job)(stored)
    assert needs_apply(desired, cached, projection(kept_job)) is False
    assert needs_apply(desired, cached) is True, "without the projection the missing template looks like drift"
    changed = copy.deepcopy(desired)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "y"
    assert needs_apply(with_hash(changed), cached, projection(kept_job)) is True, "the hash still tells a new Pod spec"
    cached = {**cached, "spec": {**cached["spec"], "parallelism": 1}}  # someone edited the Job
    assert needs_apply(desired, cached, projection(kept_job)) is True, "drift in a kept field is still seen"


def test_cached_jobs_and_services_keep_of_their_annotations_the_hash_alone_and_a_changed_one_is_a_new_hash() -> None:
    job = observed_job()
    job["metadata"]["annotations"] = {"jobset.sigs.k8s.io/jobset-name": "tj", "a": "b"}
    desired = with_hash(copy.deepcopy({k: v for k, v in job.items() if k != "status"}))
    for key in ("uid", "resourceVersion", "managedFields"):
        del desired["metadata"][key]
    cached = projection(kept_job)(desired)
    digest = desired["metadata"]["annotations"][HASH_ANNOTATION]
    assert cached["metadata"]["annotations"] == {HASH_ANNOTATION: digest}
    assert needs_apply(desired, cached, projection(kept_job)) is False
    changed = copy.deepcopy(desired)
    changed["metadata"]["annotations"]["a"] = "c"
    assert needs_apply(with_hash(changed), cached, projection(kept_job)) is True, "a new annotation, a new hash"
    no_hash = {"metadata": {"name": "x", "annotations": {"a": "b"}}}
    assert projection(kept_job)(no_hash)["metadata"]["annotations"] == {}


def observed_service() -> JSON:
    """A headless child Service as the apiserver returns it (the metadata of :func:`observed_job`'s kind)."""
    metadata = {**observed_job()["metadata"], "name": "tj", "uid": "s1"}
    metadata["annotations"] = {HASH_ANNOTATION: "abc", "note": "x"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "clusterIPs": ["None"],
            "selector": {"jobset.sigs.k8s.io/jobset-name": "tj"},
            "ports": [{"port": 29500, "protocol": "TCP", "targetPort": 29500}],
            "publishNotReadyAddresses": True,
            "ipFamilies": ["IPv4"],
        },
        "status": {"loadBalancer": {}},
    }


def test_a_cached_service_keeps_its_metadata_and_selector_and_a_changed_selector_is_drift() -> None:
    service = observed_service()
    cached = projection(kept_service)(service)
    assert cached["spec"] == {"selector": {"jobset.sigs.k8s.io/jobset-name": "tj"}}
    assert cached["metadata"]["annotations"] == {HASH_ANNOTATION: "abc"}
    assert cached["metadata"]["ownerReferences"] == service["metadata"]["ownerReferences"]
    assert cached["status"] == {"loadBalancer": {}}
    desired = with_hash({k: copy.deepcopy(v) for k, v in service.items() if k != "status"})
    for key in ("uid", "managedFields"):
        del desired["metadata"][key]
    del desired["spec"]["clusterIPs"], desired["spec"]["ipFamilies"]  # set by the apiserver
    stored = projection(kept_service)({**desired, "spec": {**desired["spec"], "clusterIPs": ["None"]}})
    assert needs_apply(desired, stored, projection(kept_service)) is False
    edited = {**stored, "spec": {"selector": {"app": "other"}}}  # someone re-pointed the Service
    assert needs_apply(desired, edited, projection(kept_service)) is True
    ported = copy.deepcopy(desired)
    ported["spec"]["ports"][0]["port"] = 1234
    assert needs_apply(with_hash(ported), stored, projection(kept_service)) is True, "a new desired port, a new hash"
    assert projection(kept_service)({"metadata": {"name": "x"}, "spec": {"type": "ClusterIP"}})["spec"] == {}


def test_keys_and_short_values_are_held_once_across_cached_objects() -> None:
    project = projection(kept_job)
    one, two = (project(json.loads(json.dumps(observed_job()))) for _ in range(2))
    key = next(k for k in one["metadata"]["labels"])
    assert key is next(k for k in two["metadata"]["labels"]), "one label key string for both Jobs"
    assert one["metadata"]["ownerReferences"][0]["uid"] is two["metadata"]["ownerReferences"][0]["uid"]
    long = {"metadata": {"name": "c"}, "data": {"runtime.json": "x" * 1000}}
    a, b = (projection()(json.loads(json.dumps(long))) for _ in range(2))
    assert a["data"]["runtime.json"] == b["data"]["runtime.json"]
    assert a["data"]["runtime.json"] is b["data"]["runtime.json"], "one runtime snapshot for both"


def test_an_objects_own_resource_version_is_kept_not_interned_and_elsewhere_a_string_is() -> None:
    project = projection()
    version = "".join(["98765", "4321"])  # built at run time: not a constant the compiler interned
    obj = {"metadata": {"name": "o", "resourceVersion": version}, "spec": {"resourceVersion": version}}
    cached = project(json.loads(json.dumps(obj)))
    own = cached["metadata"]["resourceVersion"]
    assert own == version and sys.intern(version) is not own, "an object's own resourceVersion is not interned"
    assert cached["spec"]["resourceVersion"] is sys.intern(version), "the same string elsewhere is"


def test_a_new_version_reuses_what_is_equal_in_the_version_cached_before() -> None:
    project = projection(kept_job)
    before = project(json.loads(json.dumps(observed_job())))
    raw = json.loads(json.dumps(observed_job()))
    raw["metadata"]["resourceVersion"] = "99"
    raw["status"] = {"active": 2, "ready": 1}
    raw["metadata"]["labels"]["extra"] = "yes"
    after = project(raw, before)
    assert after == project(json.loads(json.dumps(raw))), "the same as without the version before"
    assert after["metadata"]["ownerReferences"] is before["metadata"]["ownerReferences"], "unchanged: reused"
    assert after["spec"] is before["spec"]
    assert after["metadata"]["labels"] is not before["metadata"]["labels"], "changed: new"
    assert after["metadata"]["labels"]["extra"] == "yes" and after["status"] == {"active": 2, "ready": 1}
    assert before["metadata"]["resourceVersion"] != "99" and "extra" not in before["metadata"]["labels"]
    assert project(raw, {"spec": [1]})["spec"] == after["spec"], "a part of another type is not reused"


def test_equal_leaves_are_held_once_across_cached_objects_and_other_types_are_not() -> None:
    project = projection(kept_job)
    one, two = (project(json.loads(json.dumps(observed_job()))) for _ in range(2))
    assert one["spec"] is two["spec"], "a Job spec of scalars, equal in both: one dict"
    assert one["metadata"]["ownerReferences"][0] is two["metadata"]["ownerReferences"][0]
    assert one["metadata"]["ownerReferences"] is two["metadata"]["ownerReferences"], "a list of leaves: one list"
    assert one["metadata"] is not two["metadata"] and one is not two, "an object and its metadata: never shared"
    service = {
        "metadata": {"name": "tj", "ownerReferences": copy.deepcopy(observed_job()["metadata"]["ownerReferences"])}
    }
    kept = projection()(service)
    assert kept["metadata"]["ownerReferences"] is one["metadata"]["ownerReferences"], "across kinds too"
    conditions = [{"type": "Suspended", "status": "True", "reason": "Suspended"}, {"type": "Created", "status": "True"}]
    first, second = (projection()({"status": {"conditions": copy.deepcopy(conditions)}}) for _ in range(2))
    assert first["status"]["conditions"] is second["status"]["conditions"] == conditions
    nested = {"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": 2, "args": ["--lr", "0.1"]}}
    x, y = (projection()({"spec": copy.deepcopy(nested)}) for _ in range(2))
    assert x["spec"] is y["spec"] == nested, "a TrainJob's spec, 3 levels: one dict"
    deeper = [{"a": {"b": [1]}}]  # 4 levels: no leaf, each object its own (its parts 3 deep are leaves)
    x, y = (projection()({"spec": {"l": copy.deepcopy(deeper)}}) for _ in range(2))
    assert x["spec"]["l"] == y["spec"]["l"] == deeper and x["spec"]["l"] is not y["spec"]["l"]
    assert x["spec"]["l"][0] is y["spec"]["l"][0]
    mixed = [1, "1", [1], {"1": 1}, None]
    assert projection()({"spec": {"l": mixed}})["spec"]["l"] == mixed
    ints, bools = (projection()({"metadata": {"name": "x"}, "spec": {"a": v}}) for v in (1, True))
    assert ints["spec"] is not bools["spec"] and ints["spec"]["a"] is not True and bools["spec"]["a"] is True
    floats = projection()({"metadata": {"name": "x"}, "spec": {"a": 1.0}})
    assert type(floats["spec"]["a"]) is float, "1.0 is not the integer 1"
    big = {str(i): i for i in range(LEAF_ITEMS + 1)}
    a, b = (projection()({"metadata": {"name": "x"}, "data": dict(big)}) for _ in range(2))
    assert a["data"] == b["data"] and a["data"] is not b["data"], "too large to be a leaf"


def test_shared_leaves_are_bounded_and_the_least_recently_used_go_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projection_module, "MAX_LEAVES", 3)
    monkeypatch.setattr(projection_module, "_leaves", {})

    def spec(i: int) -> JSON:
        kept: JSON = projection()({"spec": {"i": i}})["spec"]
        return kept

    kept = [spec(i) for i in range(3)]
    assert spec(0) is kept[0], "used again: now the most recent"
    spec(3)  # drops {"i": 1}, the least recently used
    assert len(projection_module._leaves) == 3
    assert spec(0) is kept[0] and spec(2) is kept[2]
    assert spec(1) == kept[1] and spec(1) is not kept[1], "forgotten, then held anew"
