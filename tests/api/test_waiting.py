"""The one rule of why a job waits (:func:`trainer.api.waiting.why_waiting`): each cause, and which wins."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from trainer.api.base import Condition
from trainer.api.waiting import CANNOT_START, DOCS, NEXT_STEPS, why_waiting
from trainer.framework.json_codec import JSON

ROOT = Path(__file__).resolve().parents[2]


def cond(type_: str, reason: str = "", message: str = "", status: str = "True") -> JSON:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def pod(name: str, *, phase: str = "Pending", waiting: str = "", message: str = "", **status: Any) -> JSON:
    containers = []
    if waiting:
        state = {"waiting": {"reason": waiting, "message": message}}
        containers.append({"name": "node", "ready": False, "restartCount": 0, "state": state})
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "node", "image": "i"}]},
        "status": {"phase": phase, "containerStatuses": containers, **status},
    }


def unschedulable(name: str, message: str = "0/2 nodes are available: 2 Insufficient cpu.") -> JSON:
    scheduled = cond("PodScheduled", "Unschedulable", message, status="False")
    return pod(name, conditions=[scheduled])


PULL = 'Back-off pulling image "registry.invalid/nope:1"'


def test_nothing_holds_a_job_without_conditions_or_pods_in_trouble() -> None:
    assert why_waiting([]) is None
    assert why_waiting([], [pod("a", phase="Running"), pod("b", phase="Succeeded")]) is None
    assert why_waiting([cond("Running", "TrainerPodsRunning", "All trainer pods are running")]) is None


def test_a_finished_job_waits_for_nothing_whatever_its_pods_say() -> None:
    for finished in ("Complete", "Failed", "Succeeded"):
        assert why_waiting([cond(finished, "x", "y")], [pod("a", waiting="ImagePullBackOff")]) is None


@pytest.mark.parametrize(
    ("type_", "reason", "anchor"),
    [
        ("Suspended", "Suspended", "suspended"),
        ("RuntimeNotFound", "RuntimeNotFound", "runtimenotfound"),
        ("Misconfigured", "QueueNotFound", "misconfigured"),
        ("WaitingForGang", "PodGroupPending", "waitingforgang"),
        ("ReplicaFailure", "FailedCreate", "replicafailure"),
    ],
)
def test_a_holding_condition_gives_its_reason_and_message(type_: str, reason: str, anchor: str) -> None:
    found = why_waiting([cond(type_, reason, "the\n  message")])
    assert found is not None
    assert (found.reason, found.message, found.source) == (reason, "the message", f"condition {type_}")
    assert found.doc == f"{DOCS}#{anchor}" and found.next_step
    assert not found.cannot_start


def test_conditions_may_be_models_or_the_job_as_json() -> None:
    model = Condition(type="WaitingForGang", status="True", reason="PodGroupPending", message="minMember 8")
    assert why_waiting([model]) == why_waiting(
        {"status": {"conditions": [cond("WaitingForGang", *("PodGroupPending", "minMember 8"))]}}
    )
    assert why_waiting([Condition(type="WaitingForGang", status="False", reason="x")]) is None


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"])
def test_an_image_that_cannot_be_pulled(reason: str) -> None:
    found = why_waiting([], [pod("tj-node-0-0-x", waiting=reason, message=PULL)])
    assert found is not None
    assert found.reason == reason
    assert found.message == f"pod tj-node-0-0-x: container node: {PULL}"
    assert (found.source, found.doc) == ("pod tj-node-0-0-x", f"{DOCS}#images-that-cannot-be-pulled")
    assert found.cannot_start == (reason != "ErrImagePull")


def test_an_init_container_counts_too() -> None:
    p = pod("a")
    p["status"]["initContainerStatuses"] = [{"name": "init", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]
    found = why_waiting([], [p])
    assert found is not None and found.message == "pod a: container init: ImagePullBackOff"


def test_an_unschedulable_pod_gives_the_schedulers_message() -> None:
    found = why_waiting([], [unschedulable("a", "0/2 nodes are available:\n 2 Insufficient cpu.")])
    assert found is not None
    assert (found.reason, found.message) == ("Unschedulable", "pod a: 0/2 nodes are available: 2 Insufficient cpu.")
    assert found.doc == f"{DOCS}#pods-that-cannot-be-scheduled" and not found.cannot_start


@pytest.mark.parametrize(
    ("reason", "anchor", "cannot_start"),
    [
        ("CreateContainerConfigError", "containers-that-cannot-start", True),
        ("CreateContainerError", "containers-that-cannot-start", False),
        ("RunContainerError", "containers-that-cannot-start", False),
        ("CrashLoopBackOff", "containers-that-cannot-start", False),
    ],
)
def test_a_container_that_cannot_start(reason: str, anchor: str, cannot_start: bool) -> None:
    message = 'secret "creds" not found'
    found = why_waiting(
        [], [pod("a", phase="Running" if reason == "CrashLoopBackOff" else "Pending", waiting=reason, message=message)]
    )
    assert found is not None
    assert (found.reason, found.message) == (reason, f"pod a: container node: {message}")
    assert found.doc == f"{DOCS}#{anchor}" and found.cannot_start == cannot_start


def test_a_gated_pod_names_its_gates() -> None:
    p = pod("a", conditions=[cond("PodScheduled", "SchedulingGated", "Scheduling is blocked", status="False")])
    p["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
    found = why_waiting([], [p])
    assert found is not None
    assert (found.reason, found.message) == ("SchedulingGated", "pod a: scheduling gates kueue.x-k8s.io/topology")


def test_precedence_condition_then_image_then_unschedulable_then_container_then_crash() -> None:
    image = pod("d", waiting="ImagePullBackOff", message=PULL)
    config = pod("a", waiting="CreateContainerConfigError")
    crash = pod("0", phase="Running", waiting="CrashLoopBackOff")
    everything = [crash, config, unschedulable("b"), image]
    held = why_waiting([cond("WaitingForGang", "PodGroupPending", "m")], everything)
    assert held is not None and held.reason == "PodGroupPending"
    order = [why_waiting([], everything[i:]) for i in range(len(everything))]
    assert [w.reason if w else None for w in order] == ["ImagePullBackOff"] * 4
    assert [w.reason if w else None for w in (why_waiting([], [crash, config, unschedulable("b")]),)] == [
        "Unschedulable"
    ]
    found = why_waiting([], [crash, config])
    assert found is not None and found.reason == "CreateContainerConfigError"
    # a restarting job (not finished, not held) is read from its pods
    restarting = why_waiting([cond("RestartingJobSet", "x", "y")], [image])
    assert restarting is not None and restarting.reason == "ImagePullBackOff"


def test_one_pod_is_named_and_the_others_with_the_same_cause_counted() -> None:
    found = why_waiting([], [unschedulable(f"p{i}") for i in (2, 0, 1)] + [pod("q", phase="Running")])
    assert found is not None and found.message.startswith("pod p0: ") and found.message.endswith("(and 2 more pods)")


def test_finished_and_deleted_pods_do_not_count() -> None:
    gone = pod("a", waiting="ImagePullBackOff")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    failed = pod("b", phase="Failed", waiting="ImagePullBackOff")
    assert why_waiting([], [gone, failed]) is None


def test_a_podgroup_volcano_cannot_place_and_a_workload_kueue_has_not_admitted() -> None:
    group: JSON = {
        "metadata": {"name": "tj"},
        "status": {
            "phase": "Inqueue",
            "conditions": [cond("Unschedulable", "NotEnoughResources", "1/1 tasks pending")],
        },
    }
    found = why_waiting([], [], podgroup=group)
    assert found is not None and (found.reason, found.message) == ("Unschedulable", "PodGroup tj: 1/1 tasks pending")
    assert why_waiting([], [], podgroup={**group, "status": {**group["status"], "phase": "Running"}}) is None
    quota = (
        "couldn't assign flavors to pod set node: insufficient unused quota for cpu in flavor default, 4 more needed"
    )
    pending = ("trainjob-tj-1a2b3", [cond("QuotaReserved", "Pending", quota, status="False")])
    # a Suspended job under Kueue: the Workload says why, not "TrainJob is suspended"
    found = why_waiting([cond("Suspended", "Suspended", "TrainJob is suspended")], workload=pending)
    assert found is not None
    assert (found.reason, found.message) == ("Pending", f"Workload trainjob-tj-1a2b3: {quota}")
    assert found.doc == f"{DOCS}#suspended"
    admitted = ("w", [cond("Admitted", "Admitted", "ok"), cond("QuotaReserved", "x", "m", status="False")])
    found = why_waiting([cond("Suspended", "Suspended", "TrainJob is suspended")], workload=admitted)
    assert found is not None and found.reason == "Suspended"
    # pods before the PodGroup
    found = why_waiting([], [unschedulable("a")], podgroup=group)
    assert found is not None and found.source == "pod a"


def test_every_cause_has_a_next_step_and_an_entry_in_the_troubleshooting_page() -> None:
    text = (ROOT / DOCS).read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-") for h in re.findall(r"^## (.+)$", text, re.M)
    }
    for key, (step, anchor) in NEXT_STEPS.items():
        assert step and anchor in anchors, (key, anchor, anchors)
    assert {"ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"} <= CANNOT_START
    assert "ErrImagePull" not in CANNOT_START
