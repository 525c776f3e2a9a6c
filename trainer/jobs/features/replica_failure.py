"""Why a job's pods cannot be created: the Job controller's ``FailedCreate`` Events on a child Job,
said on the job (TrainJob, MPIJob) that controls the Job as condition ``ReplicaFailure``.

When the Job controller cannot create a pod of a Job (an exceeded quota, a pod security or webhook
verdict, an invalid pod) it records an Event on the Job, reason ``FailedCreate``, message ``Error
creating: <the apiserver's message>``, source ``job-controller``, and tries again with backoff
(k8s.io/kubernetes ``pkg/controller/job/job_controller.go``, ``pkg/controller/controller_utils.go``
``FailedCreatePodReason``). A Job has no condition for it; a ReplicaSet has: ``ReplicaFailure`` with
reason ``FailedCreate`` and the error, gone once its pods are created
(``pkg/controller/replicaset/replica_set_utils.go`` ``calculateStatus``), and a Deployment carries
its ReplicaSet's (``pkg/controller/deployment/progress.go``). A job here carries its Jobs' the same
way: ``ReplicaFailure``, reason ``FailedCreate``, message ``Job <name>: <the Event's message>``.

Which Events count (:func:`replica_failure`): those about a Job the job controls (its controller
owner reference has the job's uid) and of the Job's current incarnation (the Event's
``involvedObject.uid`` is the Job's uid: a Job deleted and created again under its name starts with
none), seen since the Job last started (``status.startTime``: set when it starts, reset on each
resume), while the Job lacks pods it wants (:func:`~trainer.jobs.facts.pods_missing`: not suspended,
not finished, fewer ``active`` + ``succeeded`` pods than ``parallelism``). So the condition goes as
soon as the Job controller has created every pod, when the Job is suspended or finishes, and with the
job's own end (its conditions then keep only the outcome).

The operator watches only these Events (field selector :data:`FIELD_SELECTOR`, which the apiserver
serves for ``core/v1`` Events: ``pkg/registry/core/event/strategy.go`` ``ToSelectableFields``) and
keeps of each only what is read here (:func:`kept_event`), filed under the Job's uid
(:func:`about`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime

from trainer.api.base import Condition
from trainer.api.conditions import COND_REPLICA_FAILURE, REASON_FAILED_CREATE, true_condition
from trainer.api.kinds import EVENTS, JOBS, Resource
from trainer.framework.clock import parse_time
from trainer.framework.controller import Key, MapFn, Reader, Watches
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import controller_of, key_of
from trainer.framework.meta import meta
from trainer.jobs.facts import pods_missing

JOB_CONTROLLER = "job-controller"
"""``source.component`` of the Job controller's Events."""
FIELD_SELECTOR = f"involvedObject.kind={JOBS.kind},reason={REASON_FAILED_CREATE},source={JOB_CONTROLLER}"
"""The Events the operator lists and watches: the Job controller's ``FailedCreate`` on Jobs."""
COMBINED = "(combined from similar events): "
"""What client-go's event aggregator puts before the latest message once similar events repeat."""
_KEPT_META = ("name", "namespace", "resourceVersion")
_KEPT_ABOUT = ("kind", "name", "namespace", "uid")
_WHEN = ("eventTime", "firstTimestamp", "lastTimestamp")


def kept_event(obj: JSON) -> JSON:
    """What the caches keep of an Event: its name, namespace and resourceVersion, whom it is about
    (kind, name, namespace, uid), reason, message, type and when it was last seen (``lastTimestamp``,
    ``series.lastObservedTime``, ``eventTime``, ``firstTimestamp``)."""
    kept = meta(obj).data
    about = obj.get("involvedObject") or {}
    out: JSON = {
        "apiVersion": obj.get("apiVersion", EVENTS.api_version),
        "kind": obj.get("kind", EVENTS.kind),
        "metadata": {k: kept[k] for k in _KEPT_META if k in kept},
        "involvedObject": {k: about[k] for k in _KEPT_ABOUT if k in about},
    }
    for k in ("reason", "message", "type", *_WHEN):
        if obj.get(k) is not None:
            out[k] = obj[k]
    seen = (obj.get("series") or {}).get("lastObservedTime")
    if seen:
        out["series"] = {"lastObservedTime": seen}
    return out


def about(event: JSON) -> str | None:
    """The uid of the object an Event is about (its ``involvedObject.uid``), which the cache files it
    under (:attr:`~trainer.framework.controller.Watches.index_by`)."""
    uid = (event.get("involvedObject") or {}).get("uid")
    return str(uid) if uid else None


def last_seen(event: JSON) -> datetime | None:
    """When an Event last happened: ``series.lastObservedTime``, else ``lastTimestamp``, ``eventTime``
    or ``firstTimestamp`` (the first set and readable), in UTC; None when none is."""
    stamps = [(event.get("series") or {}).get("lastObservedTime"), event.get("lastTimestamp")]
    stamps += [event.get("eventTime"), event.get("firstTimestamp")]
    for stamp in stamps:
        when = parse_time(stamp)
        if when is not None:
            return when
    return None


def jobs_owner(primary: Resource) -> MapFn:
    """``Event -> the key of the job of kind primary`` that controls the cached Job the Event is about,
    when the Event is about that Job's current incarnation (same uid); no key otherwise."""

    def to_keys(event: JSON, reader: Reader) -> Iterable[Key]:
        ref = event.get("involvedObject") or {}
        ns, name = str(ref.get("namespace") or key_of(event)[0]), ref.get("name")
        job = reader.get(JOBS, ns, str(name)) if name else None
        if job is None or meta(job).uid != ref.get("uid"):
            return []
        owner = controller_of(job)
        if owner is None or (owner.get("kind"), owner.get("apiVersion")) != (primary.kind, primary.api_version):
            return []
        return [(ns, str(owner["name"]))]

    return to_keys


def watches(primary: Resource) -> Watches:
    """The declaration of a job controller of ``primary`` that reads its Jobs' ``FailedCreate`` Events."""
    return Watches(EVENTS, jobs_owner(primary), field_selector=FIELD_SELECTOR, keep=kept_event, index_by=about)


def failed_creates(job: JSON, events: Iterable[JSON]) -> list[JSON]:
    """Of ``events`` (those filed under the Job's uid), the ``FailedCreate`` Events that count for the
    batch/v1 ``job`` now (see the module docstring), latest first (by :func:`last_seen`, then by
    resourceVersion: the times count seconds)."""
    if pods_missing(job) == 0:
        return []
    uid = meta(job).uid
    since = parse_time((job.get("status") or {}).get("startTime"))
    out: list[tuple[tuple[float, int], JSON]] = []
    for event in events:
        if event.get("reason") != REASON_FAILED_CREATE or (event.get("involvedObject") or {}).get("uid") != uid:
            continue
        when = last_seen(event)
        if since is not None and when is not None and when < since:
            continue  # before the Job last started: a resume since, or a suspension, ended it
        out.append(((when.timestamp() if when is not None else 0.0, _version(event)), event))
    out.sort(key=lambda pair: pair[0], reverse=True)
    return [event for _, event in out]


def _version(event: JSON) -> int:
    """An Event's resourceVersion as a number (what was written last within one second of another), 0
    when it is none."""
    rv = str(meta(event).resource_version or "")
    return int(rv) if rv.isdigit() else 0


def message_of(job: JSON, event: JSON) -> str:
    """``Job <name>: <the Event's message>`` (without the aggregator's prefix)."""
    text = str(event.get("message") or "").removeprefix(COMBINED)
    return f"Job {(job.get('metadata') or {}).get('name')}: {text}"


def same_cause(a: str, b: str) -> bool:
    """Whether two condition messages tell the same refusal: equal but for the generated name of the
    pod each attempt tried (``pods "<job>-0-x7k2p" is forbidden``), so a refusal that repeats with a new
    pod name is not written again."""
    return _POD_NAME.sub('"<pod>"', a) == _POD_NAME.sub('"<pod>"', b)


_POD_NAME = re.compile(r'(?<=pods )"[^"]*"|(?<=Pod )"[^"]*"')


def replica_failure(
    jobs: Iterable[JSON], events_about: Callable[[str], list[JSON]], current: Iterable[Condition]
) -> Condition | None:
    """The ``ReplicaFailure`` condition a job with the batch/v1 ``jobs`` (those it controls, as cached)
    carries now, or None. ``events_about(uid)`` gives the cached Events about the Job with ``uid``;
    ``current`` are the job's conditions: while the Job it names refuses for the same cause
    (:func:`same_cause`), its message stays as it is. Otherwise it names the first Job by name that
    has an Event that counts (:func:`failed_creates`), with its latest message."""
    failing = []
    for job in sorted(jobs, key=lambda j: str(meta(j).name)):
        uid = str(meta(job).uid or "")
        counted = failed_creates(job, events_about(uid)) if uid else []
        if counted:
            failing.append(message_of(job, counted[0]))
    if not failing:
        return None
    had = true_condition(current, COND_REPLICA_FAILURE)
    message = failing[0]
    if had is not None and had.message and any(same_cause(had.message, m) for m in failing):
        message = had.message
    return Condition(type=COND_REPLICA_FAILURE, status="True", reason=REASON_FAILED_CREATE, message=message)


def told_anew(current: Iterable[Condition], desired: Condition | None) -> tuple[str, str, str] | None:
    """The Warning event of a ``ReplicaFailure`` that stays True with another message (a new Job, or
    another refusal); None otherwise (its turning True is told as every condition's transition)."""
    had = true_condition(current, COND_REPLICA_FAILURE)
    if had is None or desired is None or had.message == desired.message:
        return None
    return ("Warning", desired.reason, desired.message)
