"""A TrainJob resized while suspended: ``spec.trainer.numNodes`` (or anything that sizes a Job, such as an
MPI runtime's ``node`` count) changed while ``spec.suspend`` is true, so its suspended Jobs no longer
have the pod count the spec asks for.

A Job's pod template cannot change once the Job exists (but for a suspended Job's scheduling
directives), and its ``completions`` change only with ``parallelism`` in an Indexed Job; the trainer's
environment (``PET_NNODES``, an MPI hostfile's hosts) changes with the count. So such a Job is not
updated: it is deleted (foreground: it goes once its Pods are gone; a suspended Job has none) and
created again at the new size by the reconcile that sees it gone, through the one child writer, which
deletes only a Job the TrainJob controls. Every other child follows by itself, being applied from the
same derived data at each reconcile: the Service, the MPI hostfile ConfigMap, a gang's PodGroup
(``minMember``, ``minResources``) and PodDisruptionBudget. Kueue, which reads the pod sets from the
TrainJob itself, makes its Workload again when they differ.

The resize is told once, as a Normal event with reason :data:`REASON_RESIZED` on the TrainJob (naming
each Job and its pod count before and after). kubeflow/trainer has no resize (its ``spec.trainer`` is
immutable, #3157); #3995 asks for ``numNodes`` to be mutable while suspended, with the JobSet rebuilt
on resume (as #3559's discussion found, ``PET_NNODES`` forbids patching the counts alone), and names
no reason: ``Resized`` is this operator's.

A TrainJob whose ML policy scales it in place
(:meth:`~trainer.trainjob.policies.base.Policy.scales_in_place`: its pod template does not depend on the node
count) is scaled in place instead, running or not: its Jobs' ``parallelism`` and ``completions`` are
merge-patched together (an Indexed Job lets both change when they stay equal); the Job controller adds or
removes the pods of the highest indices, and the framework's rendezvous lets them join or leave. Told once
as a Normal event with reason :data:`REASON_SCALED`.

Pure: ``(observed Jobs, desired Jobs, in_place) -> Resize``; as a feature (:data:`FEATURE`), the change of
the Jobs about to be written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainer.api.kinds import JOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.framework.meta import meta
from trainer.jobs.child_writer import Desired
from trainer.trainjob.features.base import Feature, Step

REASON_RESIZED = "Resized"
"""Reason of the Normal event on a TrainJob whose suspended Jobs are recreated at a new size."""
REASON_SCALED = "Scaled"
"""Reason of the Normal event on a TrainJob whose Jobs are scaled in place."""


@dataclass(frozen=True)
class Resize:
    """What one reconcile does about Jobs whose size changed: ``delete``, the (namespace, name) of each
    suspended Job to delete (to be created again at its new size), ``hold``, the Jobs not to write now
    (those and any Job already being deleted: written again once gone), and ``message``, the event's
    text ("" when nothing is resized); for a job scaled in place, ``scale``: ``(namespace, name, merge patch)``
    of each Job scaled in place, and ``scaled``, that event's text ("" when none is)."""

    delete: list[tuple[str, str]] = field(default_factory=list)
    hold: set[tuple[str, str]] = field(default_factory=set)
    message: str = ""
    scale: list[tuple[str, str, JSON]] = field(default_factory=list)
    scaled: str = ""


def size(job: JSON) -> tuple[int | None, int | None]:
    """A Job's ``(parallelism, completions)``, None for one unset."""
    spec = job.get("spec") or {}
    return spec.get("parallelism"), spec.get("completions")


def resize(observed: list[JSON], desired: list[JSON], in_place: bool = False) -> Resize:
    """The Jobs of ``observed`` (the TrainJob's Jobs in the cache) to recreate because ``desired`` (the
    Jobs it wants now, by name) gives them another ``parallelism`` or ``completions``: only suspended Jobs
    (a running Job is never rewritten; admission refuses the resize of a running TrainJob) that are not
    already being deleted. A Job being deleted for any reason is held too. The Jobs of a job scaled
    ``in_place`` are patched to the new size instead, running or not."""
    wanted = {key_of(j): j for j in desired}
    delete: list[tuple[str, str]] = []
    hold: set[tuple[str, str]] = set()
    told: list[str] = []
    scale: list[tuple[str, str, JSON]] = []
    scaled: list[str] = []
    for job in observed:
        key = key_of(job)
        if meta(job).deletion:
            hold.add(key)
            continue
        want = wanted.get(key)
        if want is not None and in_place and size(job) != size(want):
            parallelism, completions = size(want)
            scale.append((*key, {"spec": {"parallelism": parallelism, "completions": completions}}))
            scaled.append(f"Job {key[1]} from {size(job)[0]} to {parallelism} pods")
            continue
        if want is None or not (job.get("spec") or {}).get("suspend") or size(job) == size(want):
            continue
        delete.append(key)
        hold.add(key)
        before, after = size(job)[0], size(want)[0]
        told.append(f"Job {key[1]} from {before} to {after} pods")
    message = f"Resized while suspended: {', '.join(told)}; recreated at the new size" if told else ""
    told_scaled = f"Scaled in place: {', '.join(scaled)}" if scaled else ""
    return Resize(delete, hold, message, scale, told_scaled)


def jobs(step: Step, new: list[JSON], out: Desired) -> list[JSON]:
    """The Jobs of ``new`` but those held (:func:`resize`); the deletes, scale patches and events of the
    resize added to ``out``."""
    info = step.view.info
    sized = resize(step.view.attempt.observed, new, info.policy.scales_in_place(info.runtime))
    out.delete_foreground += [(JOBS, *key) for key in sized.delete]
    out.patch += [(JOBS, ns, name, patch) for ns, name, patch in sized.scale]
    if sized.message:
        out.told.append(("Normal", REASON_RESIZED, sized.message))
    if sized.scaled:
        out.told.append(("Normal", REASON_SCALED, sized.scaled))
    return [j for j in new if key_of(j) not in sized.hold]


FEATURE = Feature(name="resize", jobs=jobs)
