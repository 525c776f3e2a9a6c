"""``trainer why``, ``get -o wide`` and ``describe`` say why a job waits by the one rule
(:func:`trainer.api.waiting.why_waiting`), over an apiserver double: the pods' causes where no condition holds
the job, the condition's where one does, nothing for a finished job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.entry import test_cli
from tests.entry.test_cli import TRAINJOBS_PATH, Apiserver, held
from trainer.framework.json_codec import JSON

PODS_PATH = "/api/v1/namespaces/team-a/pods"
PULL = 'Back-off pulling image "registry.invalid/nope:1"'


apiserver = test_cli.apiserver
"""The apiserver double of the CLI's tests, as a fixture of this module too."""


def created(name: str) -> JSON:
    job = held(name, "team-a", "Running", "", "")
    job["status"] = {"jobsStatus": [{"name": "node", "active": 1}]}
    return job


def pod(job: str, name: str, **status: Any) -> JSON:
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {"jobset.sigs.k8s.io/jobset-name": job, "jobset.sigs.k8s.io/replicatedjob-name": "node"},
            "creationTimestamp": "2026-01-01T00:06:00Z",
        },
        "spec": {"containers": [{"name": "node", "image": "registry.invalid/nope:1"}]},
        "status": {"phase": "Pending", **status},
    }


def pulling(job: str) -> JSON:
    waiting = {"reason": "ImagePullBackOff", "message": PULL}
    return pod(job, f"{job}-node-0-0-a", containerStatuses=[{"name": "node", "state": {"waiting": waiting}}])


def unschedulable(job: str) -> JSON:
    message = "0/2 nodes are available: 2 Insufficient cpu."
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return pod(job, f"{job}-node-0-0-b", conditions=[scheduled])


@pytest.fixture
def stuck(apiserver: Apiserver) -> Apiserver:
    """``pull`` (its pod cannot pull its image), ``cpu`` (its pod fits no node), ``big`` (held by
    ``WaitingForGang``, with an unschedulable pod of an earlier attempt) and ``done`` (Complete)."""
    done = held("done", "team-a", "Complete", "AllJobsCompleted", "done")
    big = held("big", "team-a", "WaitingForGang", "PodGroupPending", "minMember 8")
    jobs = [created("pull"), created("cpu"), big, done]
    for i, job in enumerate(jobs):
        job["metadata"]["uid"] = f"u{i}"
    apiserver.routes[TRAINJOBS_PATH] = {"items": jobs}
    for job in jobs:
        apiserver.routes[f"{TRAINJOBS_PATH}/{job['metadata']['name']}"] = job
    apiserver.routes[PODS_PATH] = {"items": [pulling("pull"), unschedulable("cpu"), unschedulable("big")]}
    apiserver.routes["/api/v1/namespaces/team-a/events"] = {"items": []}
    apiserver.routes["/apis/batch/v1/namespaces/team-a/jobs"] = {"items": []}
    return apiserver


def test_get_wide_gives_the_pods_cause_where_no_condition_holds_the_job(stuck: Apiserver) -> None:
    lines = stuck("get", "tj", "-o", "wide").output.splitlines()
    assert lines[0].split()[-2:] == ["REASON", "MESSAGE"]
    rows = {line.split()[0]: " ".join(line.split()) for line in lines[1:]}
    assert rows["pull"].split()[1] == "Created"
    assert f"ImagePullBackOff pod pull-node-0-0-a: container node: {PULL}" in rows["pull"]
    assert "Unschedulable pod cpu-node-0-0-b: 0/2 nodes are available: 2 Insufficient cpu." in rows["cpu"]
    assert "PodGroupPending minMember 8" in rows["big"]
    assert rows["done"].split()[-2:] == ["AllJobsCompleted", "done"]
    one = stuck("get", "tj", "pull", "-o", "wide").output.splitlines()
    assert "ImagePullBackOff" in one[1]
    before = len([r for r in stuck.double.received if r.path == PODS_PATH])
    assert "ImagePullBackOff" not in stuck("get", "tj").output
    assert len([r for r in stuck.double.received if r.path == PODS_PATH]) == before  # no pods read without -o wide


def test_get_wide_without_leave_to_list_pods_says_what_the_conditions_say(stuck: Apiserver) -> None:
    stuck.routes.pop(PODS_PATH)  # 404, as a 403 would
    lines = stuck("get", "tj", "-o", "wide")
    assert lines.exit_code == 0, lines.output
    rows = {line.split()[0]: line for line in lines.output.splitlines()[1:]}
    assert rows["pull"].split()[1:2] == ["Created"] and "ImagePullBackOff" not in rows["pull"]


def test_why_prints_the_reason_message_source_next_step_and_entry(stuck: Apiserver) -> None:
    result = stuck("why", "pull")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "pull: Created",
        "Reason:  ImagePullBackOff",
        f"Message: pod pull-node-0-0-a: container node: {PULL}",
        "Source:  pod pull-node-0-0-a",
        "Next:    fix the image name or tag (in a new job), or give the pods imagePullSecrets for a private registry",
        "See:     docs/troubleshooting.md#images-that-cannot-be-pulled",
    ]
    big = stuck("why", "trainjob/big").output.splitlines()
    assert big[:3] == ["big: WaitingForGang", "Reason:  PodGroupPending", "Message: minMember 8"]
    assert big[-1] == "See:     docs/troubleshooting.md#waitingforgang"
    assert stuck("why", "done").output == "done: Complete (AllJobsCompleted: done); nothing holds it\n"
    data = json.loads(stuck("why", "cpu", "-o", "json").output)
    assert data["state"] == "Created" and data["waiting"]["reason"] == "Unschedulable"
    assert data["waiting"]["doc"] == "docs/troubleshooting.md#pods-that-cannot-be-scheduled"


def test_describe_has_why_and_next_lines(stuck: Apiserver) -> None:
    result = stuck("describe", "cpu")
    assert result.exit_code == 0, result.output
    assert "Why:" in result.output and "Unschedulable: pod cpu-node-0-0-b: 0/2 nodes are available" in result.output
    assert "Next:" in result.output and "(see docs/troubleshooting.md#pods-that-cannot-be-scheduled)" in result.output
    data = json.loads(stuck("describe", "cpu", "-o", "json").output)
    assert data["why"]["reason"] == "Unschedulable"
    assert "Why:" not in stuck("describe", "done").output
