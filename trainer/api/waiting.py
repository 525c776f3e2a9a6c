"""Why a job waits: the one rule every surface asks (``trainer why``, ``get -o wide``, ``describe``,
``wait`` and ``logs`` timeouts, the SDK's wait errors, the dashboard), pure and cluster-free.

:func:`why_waiting` reads the job's conditions, then its pods, then its Volcano PodGroup and Kueue
Workload when the caller has read them, and names the first thing that holds the job:

1. a condition of the job that holds it (``Suspended``, ``RuntimeNotFound``, ``Misconfigured``,
   ``WaitingForGang``, ``ReplicaFailure``): its reason and message, as ``trainer get`` shows them;
   a ``Suspended`` job whose Kueue Workload has no quota yet says the Workload's message instead;
2. a pod whose image cannot be pulled (a container waiting with ``ErrImagePull``,
   ``ImagePullBackOff``, ``InvalidImageName``, ``ErrImageNeverPull``...);
3. a pod the scheduler cannot place (``PodScheduled=False``, reason ``Unschedulable``): the
   scheduler's own message (``0/2 nodes are available: 2 Insufficient cpu.``);
4. a container that cannot be created (``CreateContainerConfigError``: a missing Secret or
   ConfigMap key; ``CreateContainerError``, ``RunContainerError``), then one restarting over and
   over (``CrashLoopBackOff``);
5. a pod held by scheduling gates, a PodGroup Volcano marked ``Unschedulable``, a Workload that
   Kueue has not admitted.

A finished job (``Complete``, ``Failed``, ``Succeeded``) waits for nothing: None. Nothing found:
None. The reasons are Kubernetes' own (kubelet ``pkg/kubelet/images/types.go``,
``pkg/kubelet/kuberuntime/kuberuntime_container.go``; scheduler ``PodReasonUnschedulable``,
``PodReasonSchedulingGated`` in k8s.io/api ``core/v1/types.go``) and this operator's conditions
(:mod:`trainer.api.conditions`); nothing here writes a condition (docs/troubleshooting.md says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainer.api.conditions import (
    COND_MISCONFIGURED,
    COND_REPLICA_FAILURE,
    COND_RUNTIME_NOT_FOUND,
    COND_WAITING_FOR_GANG,
    Conditions,
    listed_conditions,
)

DOCS = "docs/troubleshooting.md"
"""The page whose entries :attr:`Waiting.doc` points at."""

FINISHED = ("Failed", "Complete", "Succeeded")
"""Condition types that end a job (a TrainJob's, an MPIJob's): such a job waits for nothing."""
SUSPENDED = "Suspended"
HOLDING = (SUSPENDED, COND_RUNTIME_NOT_FOUND, COND_MISCONFIGURED, COND_WAITING_FOR_GANG, COND_REPLICA_FAILURE)
"""Condition types that hold a job that has not finished, the first True one winning (the client's
STATE column, ``HOLDING_CONDITIONS``, puts them in this order between the finished ones and running)."""

IMAGE_REASONS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "ErrImageInspect",
    "RegistryUnavailable",
    "SignatureValidationFailed",
)
"""A container's waiting reasons for an image the node cannot get (kubelet ``pkg/kubelet/images``)."""
CONTAINER_REASONS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError", "PreStartHookError")
"""A container's waiting reasons for one the kubelet cannot create or start."""
CRASH_REASON = "CrashLoopBackOff"
UNSCHEDULABLE = "Unschedulable"
GATED = "SchedulingGated"

CANNOT_START = frozenset(
    {
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "SignatureValidationFailed",
        "CreateContainerConfigError",
    }
)
"""Waiting reasons after which a container does not start without a change by someone: the image
failed and the kubelet backs off (``ImagePullBackOff``; the first ``ErrImagePull`` may be a
registry's hiccup, it becomes ``ImagePullBackOff`` on the next try), the image name is invalid or
may not be pulled, or a Secret or ConfigMap the container reads is missing. ``trainer logs`` and
:meth:`~trainer.client.AsyncJobClient.wait_for_pods` stop waiting on these (:attr:`Waiting.cannot_start`);
an unschedulable pod is not among them (an autoscaler may add a node)."""

NEXT_STEPS: Mapping[str, tuple[str, str]] = {
    SUSPENDED: ("resume it (`trainer resume NAME`), or under Kueue wait for or raise the queue's quota", "suspended"),
    COND_RUNTIME_NOT_FOUND: ("create the runtime the job names, or fix its runtimeRef", "runtimenotfound"),
    COND_MISCONFIGURED: ("change what the message names (the table in the docs lists each reason)", "misconfigured"),
    COND_WAITING_FOR_GANG: (
        "free capacity or queue room for the whole gang, lower numNodes or resourcesPerNode, or use another queue",
        "waitingforgang",
    ),
    COND_REPLICA_FAILURE: (
        "fix what refuses the pods (quota, Pod Security, a webhook); the Jobs retry",
        "replicafailure",
    ),
    "image": (
        "fix the image name or tag (in a new job), or give the pods imagePullSecrets for a private registry",
        "images-that-cannot-be-pulled",
    ),
    UNSCHEDULABLE: (
        "lower resourcesPerNode or numNodes, free or add nodes, or fix the node selector or tolerations",
        "pods-that-cannot-be-scheduled",
    ),
    "container": (
        "create the Secret or ConfigMap (or key) the container reads, or fix the container's command",
        "containers-that-cannot-start",
    ),
    CRASH_REASON: ("read why it exits: `trainer logs NAME -p`", "containers-that-cannot-start"),
    GATED: ("wait for the gang scheduler to admit the pods' gang, or see what holds it", "waitingforgang"),
    "workload": ("wait for quota, or raise the ClusterQueue's quota, or lower the job's requests", "suspended"),
}
"""What to do, and the anchor of the entry in :data:`DOCS`, per cause: a condition type, ``image``,
``Unschedulable``, ``container``, ``CrashLoopBackOff``, ``SchedulingGated``, ``workload``."""


@dataclass(frozen=True)
class Waiting:
    """Why a job waits: :func:`why_waiting`'s answer."""

    reason: str
    """CamelCase: the holding condition's reason (``PodGroupPending``), a container's waiting reason
    (``ImagePullBackOff``), ``Unschedulable``, ``SchedulingGated``, or the Kueue Workload condition's
    reason (``Pending``)."""
    message: str
    """One line: the condition's message, or ``pod NAME: ...`` with the kubelet's or the scheduler's
    words, ``(and N more pods)`` when others wait for the same cause."""
    next_step: str
    """What to do, one sentence."""
    doc: str
    """``docs/troubleshooting.md#<anchor>``: the entry that explains it."""
    source: str
    """What says so: ``condition WaitingForGang``, ``pod NAME``, ``PodGroup NAME``, ``Workload NAME``."""
    cannot_start: bool = False
    """A container of a pod cannot start without a change (:data:`CANNOT_START`)."""


def one_line(text: object) -> str:
    """``text`` with its whitespace runs (newlines included) made single spaces."""
    return " ".join(str(text or "").split())


def _get(c: Any, key: str) -> str:
    """A field of a condition given as JSON or as a model (``type``, ``status``, ``reason``, ``message``)."""
    return str((c.get(key) if isinstance(c, Mapping) else getattr(c, key, "")) or "")


def _first_true(conditions: Conditions, types: Sequence[str]) -> Any | None:
    listed = list(listed_conditions(conditions))
    for type_ in types:
        for c in listed:
            if _get(c, "type") == type_ and _get(c, "status") == "True":
                return c
    return None


def _advice(key: str) -> tuple[str, str]:
    step, anchor = NEXT_STEPS[key]
    return step, f"{DOCS}#{anchor}"


@dataclass(frozen=True)
class _PodCause:
    rank: int
    key: str
    reason: str
    pod: str
    detail: str


def _pod_causes(pod: Mapping[str, Any]) -> list[_PodCause]:
    """What holds one pod, best first (empty for a pod that is fine, finished or being deleted)."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    if metadata.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return []
    name = str(metadata.get("name") or "")
    out = []
    for c in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (c.get("state") or {}).get("waiting") or {}
        reason = str(waiting.get("reason") or "")
        words = one_line(waiting.get("message")) or reason
        detail = f"container {c.get('name')}: {words}"
        if reason in IMAGE_REASONS:
            out.append(_PodCause(0, "image", reason, name, detail))
        elif reason in CONTAINER_REASONS:
            out.append(_PodCause(2, "container", reason, name, detail))
        elif reason == CRASH_REASON:
            out.append(_PodCause(3, CRASH_REASON, reason, name, detail))
    for cond in status.get("conditions") or []:
        if cond.get("type") != "PodScheduled" or cond.get("status") != "False":
            continue
        reason = str(cond.get("reason") or UNSCHEDULABLE)
        message = one_line(cond.get("message")) or reason
        if reason == GATED:
            gates = [str(g.get("name")) for g in (pod.get("spec") or {}).get("schedulingGates") or []]
            out.append(_PodCause(4, GATED, GATED, name, f"scheduling gates {', '.join(gates) or message}"))
        else:
            out.append(_PodCause(1, UNSCHEDULABLE, reason, name, message))
    return sorted(out, key=lambda c: c.rank)


def _from_pods(pods: Iterable[Mapping[str, Any]]) -> Waiting | None:
    causes = sorted(
        (c for p in pods for c in _pod_causes(p)[:1]),
        key=lambda c: (c.rank, c.pod),
    )
    if not causes:
        return None
    first = causes[0]
    others = len({c.pod for c in causes if c.key == first.key} - {first.pod})
    more = f" (and {others} more pod{'s' if others > 1 else ''})" if others else ""
    step, doc = _advice(first.key)
    return Waiting(
        reason=first.reason,
        message=f"pod {first.pod}: {first.detail}{more}",
        next_step=step,
        doc=doc,
        source=f"pod {first.pod}",
        cannot_start=first.reason in CANNOT_START,
    )


def _from_podgroup(podgroup: Mapping[str, Any] | None) -> Waiting | None:
    if not podgroup:
        return None
    phase = str((podgroup.get("status") or {}).get("phase") or "")
    c = _first_true(dict(podgroup), [UNSCHEDULABLE])
    if c is None or phase not in ("", "Pending", "Inqueue"):
        return None
    step, doc = _advice(UNSCHEDULABLE)
    name = str((podgroup.get("metadata") or {}).get("name") or "")
    message = one_line(_get(c, "message")) or UNSCHEDULABLE
    return Waiting(UNSCHEDULABLE, f"PodGroup {name}: {message}", step, doc, f"PodGroup {name}")


def _from_workload(name: str, conditions: Conditions) -> Waiting | None:
    """A Kueue Workload (its ``status.conditions``, or the object) not admitted: its ``QuotaReserved``
    (else ``Admitted``) condition that is False, with its reason and message."""
    listed = list(listed_conditions(conditions))
    if any(_get(c, "type") == "Admitted" and _get(c, "status") == "True" for c in listed):
        return None
    for type_ in ("QuotaReserved", "Admitted"):
        for c in listed:
            if _get(c, "type") == type_ and _get(c, "status") == "False" and _get(c, "message"):
                step, doc = _advice("workload")
                message = f"Workload {name}: {one_line(_get(c, 'message'))}"
                return Waiting(_get(c, "reason") or type_, message, step, doc, f"Workload {name}")
    return None


def why_waiting(
    conditions: Conditions,
    pods: Iterable[Mapping[str, Any]] = (),
    *,
    podgroup: Mapping[str, Any] | None = None,
    workload: tuple[str, Conditions] | None = None,
) -> Waiting | None:
    """Why the job waits, by the precedence of this module's docstring; None when it waits for
    nothing (finished, or nothing holds it).

    ``conditions``: the job's (models or JSON, or the job as JSON: :data:`trainer.api.conditions.Conditions`);
    ``pods``: its pods as JSON (any order; finished and deleted ones are skipped); ``podgroup``: its
    Volcano PodGroup as JSON; ``workload``: its Kueue Workload's name and conditions (models with
    ``type``, ``status``, ``reason``, ``message``, or JSON). Raises nothing.
    """
    if _first_true(conditions, FINISHED) is not None:
        return None
    held = _first_true(conditions, HOLDING)
    if held is not None:
        type_ = _get(held, "type")
        if type_ == SUSPENDED and workload is not None:
            quota = _from_workload(*workload)
            if quota is not None:
                return quota
        step, doc = _advice(type_)
        message = one_line(_get(held, "message"))
        return Waiting(_get(held, "reason") or type_, message, step, doc, f"condition {type_}")
    found = _from_pods(pods) or _from_podgroup(podgroup)
    if found is None and workload is not None:
        found = _from_workload(*workload)
    return found
