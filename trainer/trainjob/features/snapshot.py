"""Which runtime a TrainJob expands from: its ``runtimeRef``, and the snapshot ConfigMap that freezes it.

Follows kubeflow/trainer KEP-2599: at the first reconcile the runtime's kind, name and spec are
stored in ConfigMap ``<trainjob>-runtime-snapshot`` (key ``runtime``), owned by the TrainJob; later
edits or deletion of the runtime never change the job. As a feature it watches the (Cluster)TrainingRuntimes
(each mapped to the TrainJobs that reference them), resolves the runtime a TrainJob expands from
(:func:`runtime_to_expand`) and creates the snapshot once (:func:`desired`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from trainer.api import labels as L
from trainer.api.base import Condition
from trainer.api.conditions import REASON_RESOURCE_EXISTS
from trainer.api.jobkinds import TRAINJOB
from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, CONFIGMAPS, TRAINING_RUNTIMES, TRAINJOBS
from trainer.api.snapshot import SNAPSHOT_KEY, runtime_of_snapshot, snapshot_name
from trainer.api.trainer_v1alpha1 import (
    COND_FAILED,
    GROUP,
    REASON_RUNTIME_NOT_SUPPORTED,
    ClusterTrainingRuntime,
    TrainingRuntime,
    TrainJob,
)
from trainer.framework.controller import Key, Reader, Watches
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.framework.meta import meta
from trainer.framework.owner import owned_config_map
from trainer.jobs.child_writer import FOREIGN, PREVIOUS, Desired, Once, claim, taken_message
from trainer.jobs.conditions import TRAINJOB_TERMINAL, finished, kept_conditions, problem
from trainer.jobs.reconcile import Blocked, invalid
from trainer.trainjob.features.base import Feature, Step
from trainer.trainjob.status import runtime_not_found


def snapshot_config_map(obj: JSON, runtime_obj: JSON) -> JSON:
    """The ConfigMap ``<trainjob>-runtime-snapshot`` (key ``runtime``: the runtime's kind, name and spec
    as JSON), owned by the TrainJob ``obj`` (JSON with metadata name, namespace and uid): its runtime
    ``runtime_obj`` as it was at the first reconcile (kubeflow/trainer KEP-2599). Later edits or
    deletion of the runtime never change the job. Raises ``KeyError`` when ``obj`` lacks metadata."""
    name = obj["metadata"]["name"]
    frozen = {
        "apiVersion": runtime_obj.get("apiVersion"),
        "kind": runtime_obj.get("kind"),
        "metadata": {"name": meta(runtime_obj).name},
        "spec": runtime_obj.get("spec"),
    }
    data = {SNAPSHOT_KEY: json.dumps(frozen, sort_keys=True)}
    return owned_config_map(obj, snapshot_name(name), data, {L.JOBSET_NAME: name})


def runtime_ref(obj: JSON) -> tuple[str, str]:
    """``(kind, name)`` of the runtime a TrainJob (as JSON) references; the kind defaults to
    ClusterTrainingRuntime, as upstream."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    return str(ref.get("kind") or ClusterTrainingRuntime.KIND), str(ref.get("name") or "")


def unsupported_runtime(obj: JSON) -> str | None:
    """Why the runtime a TrainJob (as JSON) references cannot be one, or None: a ``runtimeRef.apiGroup``
    other than ``trainer.kubeflow.org`` (unset is that default). Upstream registers its runtimes under
    that group only and refuses any other with ``unsupported runtime: <Kind>.<group>`` (kubeflow/trainer
    ``pkg/runtime/runtime.go`` ``RuntimeRefToRuntimeRegistryKey``, ``pkg/webhooks/trainjob_webhook.go``,
    ``pkg/controller/trainjob_controller.go``); the message also names the field and the fix."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    group = ref.get("apiGroup")
    if group is None or group == GROUP:
        return None
    kind = runtime_ref(obj)[0]
    registry_key = f"{kind}.{group}" if group else kind
    return (
        f"unsupported runtime: {registry_key}; spec.runtimeRef.apiGroup must be {GROUP} (the default): "
        "remove it or set it to that"
    )


def trainjobs_of_runtime(runtime: JSON, reader: Reader) -> Iterable[Key]:
    """The TrainJobs that reference ``runtime`` (a TrainingRuntime only from its own namespace)."""
    ns, name = key_of(runtime)
    kind = runtime.get("kind", "")
    for tj in reader.items(TRAINJOBS):
        if runtime_ref(tj) == (kind, name) and (kind != TrainingRuntime.KIND or key_of(tj)[0] == ns):
            yield key_of(tj)


def runtime_of(obj: JSON, reader: Reader) -> JSON | None:
    """The cached runtime a TrainJob references, or None."""
    kind, name = runtime_ref(obj)
    if kind == TrainingRuntime.KIND:
        return reader.get(TRAINING_RUNTIMES, key_of(obj)[0], name)
    return reader.get(CLUSTER_TRAINING_RUNTIMES, None, name)


def runtime_to_expand(reader: Reader, obj: JSON, job: TrainJob) -> JSON | Blocked:
    """The runtime (JSON) the TrainJob ``obj`` (parsed as ``job``) expands from: the one its snapshot
    froze, else the one it references. :class:`Blocked` when the snapshot is not the TrainJob's to read
    (:func:`snapshot_problem`), or no runtime is there (``RuntimeNotFound``; a finished TrainJob made before
    snapshots keeps its outcome), or its ``runtimeRef`` names a group no runtime is in
    (:func:`unsupported_runtime`: ``Failed``, ``TrainingRuntimeNotSupported``, as upstream's controller says)."""
    unsupported = unsupported_runtime(obj)
    if unsupported is not None:
        if finished(obj, TRAINJOB_TERMINAL) is not None:
            return Blocked(None)
        failed = Condition(type=COND_FAILED, status="True", reason=REASON_RUNTIME_NOT_SUPPORTED, message=unsupported)
        return Blocked([*kept_conditions(obj, COND_FAILED), failed])
    ns = str(job.metadata.namespace)
    snapshot = reader.get(CONFIGMAPS, ns, snapshot_name(str(job.metadata.name)))
    if snapshot is not None and (problem_of_snapshot := snapshot_problem(obj, snapshot)) is not None:
        return problem_of_snapshot
    runtime_obj = runtime_of_snapshot(snapshot) if snapshot is not None else runtime_of(obj, reader)
    if runtime_obj is not None:
        return runtime_obj
    if finished(obj, TRAINJOB_TERMINAL) is not None:
        return Blocked(None)  # finished without a snapshot (made before them): the outcome stays
    kind, name = runtime_ref(obj)
    return Blocked([runtime_not_found(kind, name, ns if kind == TrainingRuntime.KIND else None)])


def snapshot_problem(obj: JSON, snapshot: JSON) -> Blocked | None:
    """None when the TrainJob ``obj`` may expand from ``snapshot`` (the ConfigMap named like its runtime
    snapshot): the TrainJob controls it and it freezes the runtime of its ``runtimeRef``. Else the job
    waits (an earlier TrainJob's snapshot, not yet collected) or is told so: someone else's ConfigMap
    (``ErrResourceExists``), or one that freezes another runtime (``Failed``), as kubeflow/trainer
    refuses a snapshot it does not own. Nothing is built from it either way."""
    taken = claim(snapshot, obj)
    if taken == PREVIOUS:
        return Blocked(None)  # its deletion brings the next reconcile
    if taken == FOREIGN:
        message = taken_message(snapshot, obj, taken)
        return Blocked([*kept_conditions(obj), problem(REASON_RESOURCE_EXISTS, message)])
    frozen = runtime_of_snapshot(snapshot) or {}
    kind, name = runtime_ref(obj)
    if (frozen.get("kind"), meta(frozen).name) != (kind, name):
        message = f"ConfigMap {snapshot['metadata']['name']} does not freeze the runtimeRef {kind} {name!r}; delete it"
        return Blocked(invalid(obj, TRAINJOB, message))
    return None


def desired(step: Step, out: Desired) -> None:
    """The snapshot, created once (the runtime as this reconcile expanded it)."""
    info = step.view.info
    obj, runtime_obj = info.obj, info.runtime_obj or {}
    name = snapshot_name(str(info.job.metadata.name))
    out.once.append(
        Once(CONFIGMAPS, str(info.job.metadata.namespace), name, lambda: snapshot_config_map(obj, runtime_obj))
    )


FEATURE = Feature(
    name="snapshot",
    watches=(
        Watches(TRAINING_RUNTIMES, trainjobs_of_runtime),
        Watches(CLUSTER_TRAINING_RUNTIMES, trainjobs_of_runtime),
    ),
    desired=desired,
)
