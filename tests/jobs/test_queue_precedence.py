"""One queue rule: admission, both reconcilers, the gang plan and the SDK name the same queue, whatever
mix of Kueue label, Volcano annotation, runtime default and MPIJob schedulingPolicy a job carries."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import load_sample
from tests.kube_double import RecordingKube, reader
from trainer.api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBS,
    JOBSETS,
    MPIJOBS,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    TRAINJOBS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
)
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.labels import KUEUE_QUEUE_LABEL, VOLCANO_QUEUE_ANNOTATION
from trainer.api.queues import resolve_queue
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client.types import queue_of
from trainer.framework.controller import Context
from trainer.framework.json_codec import JSON
from trainer.framework.kube.events import EventRecorder
from trainer.jobs import gang
from trainer.jobs.reconcile import Blocked
from trainer.mpijob import controller as mpijob
from trainer.trainjob import controller as trainjob
from trainer.trainjob.kind import kind as trainjob_kind
from trainer.webhook import rules

names = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))


def with_queues(obj: JSON, label: str | None, annotation: str | None) -> JSON:
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    meta.update({"namespace": "ns", "uid": "u"})
    if label:
        meta.setdefault("labels", {})[KUEUE_QUEUE_LABEL] = label
    if annotation:
        meta.setdefault("annotations", {})[VOLCANO_QUEUE_ANNOTATION] = annotation
    return obj


def queues(*names: str) -> list[JSON]:
    return [{"metadata": {"name": n}, "spec": {}, "status": {"state": "Open"}} for n in names]


def context(scheduler: str, tables: dict[Any, list[JSON]]) -> Context:
    kube = RecordingKube()
    tables = {
        JOBS: [],
        JOBSETS: [],
        PODS: [],
        CONFIGMAPS: [],
        RESOURCE_CLAIM_TEMPLATES: [],
        VOLCANO_QUEUES: queues("a", "b", "c", "default"),
        VOLCANO_PODGROUPS: [],
        **tables,
    }
    return Context(kube=kube, reader=reader(tables), events=EventRecorder(kube))


@settings(max_examples=150, deadline=None)
@given(
    label=names,
    annotation=names,
    runtime_default=names,
    scheduler=st.sampled_from(sorted(gang.SCHEDULERS)),
)
def test_admission_and_the_trainjob_reconciler_name_the_same_queue(
    label: str | None, annotation: str | None, runtime_default: str | None, scheduler: str
) -> None:
    runtime = load_sample("torch-distributed.yaml")
    if runtime_default:
        runtime["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[
            VOLCANO_QUEUE_ANNOTATION
        ] = runtime_default
    obj = with_queues(load_sample("trainjob.yaml"), label, annotation)
    facts = rules.AdmissionFacts(
        runtime=lambda kind, name, ns: runtime,
        active_pods=lambda kind, ns, name: 0,
        volcano_queues=lambda: queues("a", "b", "c"),
        local_queue_exists=lambda ns, name: True,
        gang=scheduler,
    )
    admitted = rules.admission_queue(obj, facts)

    ctx = context(scheduler, {TRAINJOBS: [obj], CLUSTER_TRAINING_RUNTIMES: [runtime]})
    kind = trainjob_kind(trainjob.TrainJobOptions(), scheduler)
    info = kind.expand(ctx.reader, obj, TrainJob.model_validate(obj))
    assert not isinstance(info, Blocked)
    assert info.info.queue == admitted
    if scheduler == "volcano":
        plan = gang.get(scheduler).plan(info.gang, ctx.reader)
        if plan.apply:
            carried = admitted.name if admitted.scheduler in ("volcano", "") and admitted.name else "default"
            assert plan.apply[0]["spec"]["queue"] == carried
    # The SDK, which does not know the runtime or the flag, agrees whenever the job itself names a queue.
    if label or annotation:
        assert queue_of(TrainJob.model_validate(obj), scheduler) == admitted.name


@settings(max_examples=100, deadline=None)
@given(
    label=names,
    annotation=names,
    policy=names,
    scheduler=st.sampled_from(sorted(set(gang.SCHEDULERS) - {"kueue"})),
)
def test_admission_and_the_mpijob_reconciler_name_the_same_queue(
    label: str | None, annotation: str | None, policy: str | None, scheduler: str
) -> None:
    obj = with_queues(load_sample("mpijob.yaml"), label, annotation)
    if policy:
        obj["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {"queue": policy}
    facts = rules.AdmissionFacts(
        runtime=lambda kind, name, ns: None,
        active_pods=lambda kind, ns, name: 0,
        volcano_queues=lambda: queues("a", "b", "c"),
        local_queue_exists=lambda ns, name: True,
        gang=scheduler,
    )
    admitted = rules.admission_queue(obj, facts)
    ctx = context(scheduler, {MPIJOBS: [obj]})
    info = mpijob.kind(mpijob.MPIJobOptions(), scheduler).expand(ctx.reader, obj, MPIJob.model_validate(obj))
    assert not isinstance(info, Blocked)
    assert info.queue == admitted == resolve_queue(obj, scheduler)
    assert admitted.name == (
        policy or (label if scheduler != "volcano" or not annotation else annotation) or annotation
    )
