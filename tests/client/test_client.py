"""The pure parts of the SDK (:mod:`trainer.client`): manifest loading and validation, statuses,
queues, steps, containers, events and error messages. No cluster needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import SAMPLES, load_sample
from trainer.api.base import Condition, ObjectMeta
from trainer.api.trainer_v1alpha1 import (
    ClusterTrainingRuntime,
    JobStatus,
    RuntimeRef,
    TrainingRuntime,
    TrainJob,
    TrainJobSpec,
    TrainJobStatus,
)
from trainer.client import (
    STATUSES,
    LogsUnavailableError,
    ManifestError,
    WaitTimeoutError,
    load_manifests,
    load_trainjob,
    queue_of,
    runtime_framework,
    trainjob_status,
)
from trainer.client.errors import JobFailedError, UnknownStepError
from trainer.client.jobs import pick_container, resolve_step
from trainer.client.manifest import unknown_fields, wire_dict, with_namespace
from trainer.client.types import TRAINJOB, Event, holding_condition, in_queue, pod_selector, related_events
from trainer.framework.clock import EARLIEST, parse_time
from trainer.framework.json_codec import JSON


def job(*conditions: tuple[str, str], jobs_status: list[JobStatus] | None = None, **meta: Any) -> TrainJob:
    return TrainJob(
        metadata=ObjectMeta(name="j", **meta),
        spec=TrainJobSpec(runtime_ref=RuntimeRef(name="torch-distributed")),
        status=TrainJobStatus(
            conditions=[Condition(type=t, status=s) for t, s in conditions] or None, jobs_status=jobs_status
        ),
    )


# --------------------------------------------------------------------------- manifests


def test_the_samples_load_from_a_path_a_string_a_dict_and_a_model() -> None:
    path = SAMPLES / "trainjob.yaml"
    from_path = load_trainjob(path)
    assert (from_path.metadata.name, from_path.spec.trainer and from_path.spec.trainer.num_nodes) == (
        "pytorch-simple",
        2,
    )
    assert load_trainjob(str(path)) == from_path
    assert load_trainjob(path.read_text()) == from_path
    assert load_trainjob(load_sample("trainjob.yaml")) == from_path
    assert load_trainjob(from_path) == from_path
    (runtime,) = load_manifests(SAMPLES / "torch-distributed.yaml")
    assert isinstance(runtime, ClusterTrainingRuntime) and runtime_framework(runtime) == "torch"


def test_several_documents_load_in_order() -> None:
    text = (SAMPLES / "torch-distributed.yaml").read_text() + "\n---\n" + (SAMPLES / "trainjob.yaml").read_text()
    assert [type(o) for o in load_manifests(text)] == [ClusterTrainingRuntime, TrainJob]
    with pytest.raises(ManifestError, match="expected exactly one TrainJob, got: ClusterTrainingRuntime, TrainJob"):
        load_trainjob(text)


def test_a_typed_trainjob_is_sent_with_only_the_fields_given() -> None:
    typed = TrainJob(metadata=ObjectMeta(name="t"), spec=TrainJobSpec(runtime_ref=RuntimeRef(name="rt")))
    assert wire_dict(typed) == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t"},
        "spec": {"runtimeRef": {"name": "rt"}},
    }  # no suspend/managedBy defaults: the apiserver defaults them, and they stay others' to set
    assert with_namespace(wire_dict(typed), "ns")["metadata"] == {"name": "t", "namespace": "ns"}
    assert with_namespace({"metadata": {"name": "t"}}, None) == {"metadata": {"name": "t"}}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("missing.yaml", "missing.yaml: no such file"),
        ("a: [1\n", "<string>: invalid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>'"),
        ("- 1\n- 2\n", "<string>: expected an object (a YAML mapping), got list"),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, "kind 'Pod' is not supported"),
        ({"metadata": {"name": "p"}}, "<object>: no kind is not supported"),
        (
            {"apiVersion": "kubeflow.org/v1", "kind": "TrainJob", "metadata": {"name": "p"}},
            "TrainJob must have apiVersion trainer.kubeflow.org/v1alpha1, not 'kubeflow.org/v1'",
        ),
        (
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {}},
            "<object>: TrainJob has no metadata.name",
        ),
        (
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "x"}, "spec": {}},
            "<object>: TrainJob 'x' is invalid: spec.runtimeRef: Field required",
        ),
        (
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "x"},
                "spec": {"runtimeRef": {"name": "rt"}, "trainer": {"numNodes": -1}},
            },
            "TrainJob 'x' is invalid: spec.trainer.numNodes: Input should be greater than or equal to 0",
        ),
        (
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "x"},
                "spec": {"runtimeRef": {"name": "rt"}, "retries": 5, "trainer": {"imgae": "i"}},
            },
            "TrainJob 'x' has fields this API does not know: spec.retries, spec.trainer.imgae",
        ),
    ],
)
def test_bad_manifests_give_one_line_errors(source: Any, message: str, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ManifestError) as caught:
        load_manifests(source)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_file_errors_name_the_file_and_the_document(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="is a directory"):
        load_manifests(tmp_path)
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n")
    with pytest.raises(ManifestError, match=r"empty\.yaml: contains no object"):
        load_manifests(empty)
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump_all([load_sample("trainjob.yaml"), {"kind": "Service"}]))
    with pytest.raises(ManifestError, match=r"two.yaml#2: kind 'Service' is not supported"):
        load_manifests(two)


def test_validation_errors_are_capped() -> None:
    bad = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "rt"},
        "spec": {"mlPolicy": {"numNodes": -1, "mpi": {"numProcPerNode": 0, "mpiImplementation": "x"}}},
    }
    with pytest.raises(ManifestError) as caught:
        load_manifests(bad)
    assert str(caught.value).count(": ") >= 3 and "and 1 more" in str(caught.value)


def test_unknown_fields_are_found_in_nested_lists_but_not_in_metadata_status_or_opaque_objects() -> None:
    obj = TrainJob.model_validate(
        {
            "metadata": {"name": "x", "managedFields": []},
            "spec": {
                "runtimeRef": {"name": "rt"},
                "podSpecOverrides": [{"targetJobs": [{"name": "node", "extra": 1}], "affinity": {"any": "thing"}}],
            },
            "status": {"whatever": 1},
        }
    )
    assert unknown_fields(obj) == ["spec.podSpecOverrides[0].targetJobs[0].extra"]


# --------------------------------------------------------------------------- statuses and queues


@pytest.mark.parametrize(
    ("conditions", "jobs_status", "expected"),
    [
        ((), None, "Created"),
        ((("Suspended", "True"),), None, "Suspended"),
        ((("Suspended", "False"), ("Running", "True")), None, "Running"),
        ((("Running", "False"),), [JobStatus(name="node", ready=1)], "Created"),
        ((), [JobStatus(name="node", ready=1)], "Running"),  # an operator without a Running condition
        ((), [JobStatus(name="node", succeeded=1)], "Running"),  # the Jobs finished, Complete not written yet
        ((), [JobStatus(name="node", active=1)], "Created"),  # pods not ready yet
        ((("Running", "False"), ("Complete", "True")), None, "Complete"),
        ((("Complete", "True"), ("Failed", "True")), None, "Failed"),
    ],
)
def test_status_from_conditions(
    conditions: tuple[tuple[str, str], ...], jobs_status: list[JobStatus] | None, expected: str
) -> None:
    assert trainjob_status(job(*conditions, jobs_status=jobs_status)) == expected
    assert expected in STATUSES == TRAINJOB.statuses


def test_a_healthy_jobs_state_never_goes_back() -> None:
    """``trainer get -w`` of a job that runs to Complete on an operator without a Running condition: its
    Jobs turn ready, then succeeded before the Complete condition is written; the state never returns to
    Created (it did: Running, Created, Complete). The same with an initializer that finished while the
    trainer's pods are still starting."""
    steps = [
        ((), [JobStatus(name="node", active=1)]),
        ((), [JobStatus(name="node", ready=1)]),
        ((), [JobStatus(name="node", succeeded=1)]),
        ((("Complete", "True"),), [JobStatus(name="node", succeeded=1)]),
    ]
    seen = [holding_condition(job(*c, jobs_status=s)).state for c, s in steps]
    assert seen == ["Created", "Running", "Running", "Complete"]
    started = [JobStatus(name="dataset-initializer", succeeded=1), JobStatus(name="node", active=1)]
    assert trainjob_status(job(jobs_status=started)) == "Running"


def test_queues_come_from_the_kueue_label_or_the_volcano_annotation() -> None:
    kueue = job(labels={"kueue.x-k8s.io/queue-name": "a"})
    volcano = job(annotations={"scheduling.volcano.sh/queue-name": "b"})
    assert (queue_of(kueue), queue_of(volcano), queue_of(job())) == ("a", "b", None)
    assert in_queue(kueue, "a") and not in_queue(kueue, "b") and in_queue(volcano, "b") and not in_queue(job(), "a")


def test_runtimes_framework_label() -> None:
    rt = TrainingRuntime.model_validate(
        {"metadata": {"name": "r", "labels": {"trainer.kubeflow.org/framework": "deepspeed"}}, "spec": {"template": {}}}
    )
    assert runtime_framework(rt) == "deepspeed"
    assert (
        runtime_framework(TrainingRuntime.model_validate({"metadata": {"name": "r"}, "spec": {"template": {}}})) is None
    )


# --------------------------------------------------------------------------- steps, pods, logs


def test_pod_selectors_use_the_jobset_and_indexed_job_labels() -> None:
    assert pod_selector(TRAINJOB, "j") == "jobset.sigs.k8s.io/jobset-name=j"
    assert pod_selector(TRAINJOB, "j", "node", 1) == (
        "jobset.sigs.k8s.io/jobset-name=j,jobset.sigs.k8s.io/replicatedjob-name=node,"
        "batch.kubernetes.io/job-completion-index=1"
    )


@pytest.mark.parametrize(
    ("step", "node", "steps", "expected"),
    [
        (None, None, [], ("node", 0)),
        ("node", 2, ["node"], ("node", 2)),
        ("node-1", None, ["node"], ("node", 1)),  # the SDK's naming
        ("node-1", None, [], ("node", 1)),
        ("worker-2", None, ["worker-2", "node"], ("worker-2", 0)),  # a real step of that name wins
        ("dataset-initializer", None, ["dataset-initializer", "node"], ("dataset-initializer", 0)),
        ("x-3", None, ["node"], ("x-3", 0)),
    ],
)
def test_steps_may_be_named_as_the_sdk_names_them(
    step: str | None, node: int | None, steps: list[str], expected: tuple[str, int]
) -> None:
    assert resolve_step(step, node, steps, "node") == expected


def test_the_container_of_a_step() -> None:
    def pod(*names: str) -> JSON:
        return {"spec": {"containers": [{"name": n} for n in names]}}

    assert pick_container(pod("trainer"), "node", "node") == "trainer"
    assert pick_container(pod("sidecar", "node"), "node", "node") == "node"
    assert pick_container(pod("sidecar", "dataset-initializer"), "dataset-initializer", "node") == "dataset-initializer"
    assert pick_container(pod("a", "b"), "x", "node") == "a"


def test_error_messages_say_what_and_why() -> None:
    detail = 'Get "https://127.0.0.1:1/containerLogs/ns/p/node": dial tcp 127.0.0.1:1: connect: connection refused'
    err = LogsUnavailableError("ns", "p", "node", "kwok-node-0", 500, detail)
    assert str(err) == (
        "logs of container 'node' of pod ns/p on node kwok-node-0 are unavailable (apiserver answered 500): " + detail
    )
    timeout = WaitTimeoutError("TrainJob ns/j to be Complete", 2.5, "Running")
    assert str(timeout) == "timed out after 2.5s waiting for TrainJob ns/j to be Complete; last seen: Running"
    assert isinstance(timeout, TimeoutError)
    failed = JobFailedError("TrainJob", "ns", "j", "FailedJobs: Job j-node-0 failed")
    assert (
        isinstance(failed, RuntimeError) and str(failed) == "TrainJob ns/j is Failed: FailedJobs: Job j-node-0 failed"
    )
    assert str(UnknownStepError("TrainJob ns/j", "x", ["node", "aux"])) == (
        "TrainJob ns/j has no step 'x'; its steps are: aux, node"
    )


# --------------------------------------------------------------------------- events


def test_events_of_the_job_and_its_children_oldest_first_without_an_earlier_namesake() -> None:
    def event(kind: str, name: str, uid: str, when: str, reason: str) -> JSON:
        return {
            "involvedObject": {"kind": kind, "name": name, "uid": uid},
            "reason": reason,
            "type": "Normal",
            "message": reason,
            "lastTimestamp" if "." not in when else "eventTime": when,
            "source": {"component": "test"},
        }

    events = [
        event("TrainJob", "j", "old", "2026-01-01T00:00:00Z", "Stale"),
        event("TrainJob", "j", "new", "2026-01-01T00:00:05Z", "AllJobsCompleted"),
        event("Pod", "j-node-0-0-abc", "p1", "2026-01-01T00:00:02.500000Z", "Scheduled"),
        event("Job", "j-node-0", "j1", "2026-01-01T00:00:02Z", "SuccessfulCreate"),
        event("Job", "other", "j2", "2026-01-01T00:00:01Z", "Unrelated"),
        event("PodGroup", "j", "pg", "2026-01-01T00:00:03Z", "Unschedulable"),
    ]
    objects: dict[tuple[str, str], str | None] = {
        ("TrainJob", "j"): "new",
        ("Pod", "j-node-0-0-abc"): "p1",
        ("Job", "j-node-0"): "j1",
        ("PodGroup", "j"): None,
    }
    got = related_events(events, objects)
    assert [e.reason for e in got] == ["SuccessfulCreate", "Scheduled", "Unschedulable", "AllJobsCompleted"]
    assert got[0] == Event(
        type="Normal",
        reason="SuccessfulCreate",
        message="SuccessfulCreate",
        involved_object_kind="Job",
        involved_object_name="j-node-0",
        involved_object_uid="j1",
        time="2026-01-01T00:00:02Z",
        source="test",
    )
    assert Event(time=None).event_time == Event(time="garbage").event_time == EARLIEST  # sorted first
    assert EARLIEST < got[0].event_time == parse_time("2026-01-01T00:00:02Z")


def test_an_events_k8s_io_series_read_as_core_v1_counts_its_repeats() -> None:
    event = Event.from_dict(
        {
            "involvedObject": {"kind": "TrainJob", "name": "j", "uid": "u"},
            "reason": "TrainJobResourcesCreationFailed",
            "type": "Warning",
            "message": "Job j-node-0: invalid",
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 7, "lastObservedTime": "2026-01-01T00:05:00.000000Z"},
            "reportingComponent": "trainer",
        }
    )
    assert (event.count, event.time, event.source) == (7, "2026-01-01T00:05:00.000000Z", "trainer")
