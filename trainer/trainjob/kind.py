"""The TrainJob kind, as plain functions one per step of the shared reconcile
(:class:`~trainer.jobs.kind.Kind`): expand, desired, settle, conditions, status and events.

:func:`expand` resolves the runtime (the TrainJob's snapshot, else the runtime it references:
:mod:`~trainer.trainjob.features.snapshot`), says what the webhook refuses when it does not run
(:mod:`trainer.trainjob.validation`) and derives the :class:`~trainer.trainjob.runtime.view.TrainJobView`
once (:func:`trainer.trainjob.runtime.expand.expand`). :func:`desired` builds the children
(:func:`trainer.trainjob.children.build_children`, what the ML policy makes once, such as the MPI SSH
Secret) and asks every feature (:data:`trainer.trainjob.features.FEATURES`) for its writes; it names none.
Children carry a controller owner reference, so deleting the TrainJob lets the garbage collector remove
them. Mirrors kubeflow/trainer ``pkg/controller/trainjob_controller.go``.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from functools import partial

from pydantic import ValidationError

from trainer.api.base import Condition
from trainer.api.conditions import REASON_NODE_LIMIT
from trainer.api.jobkinds import TRAINJOB
from trainer.api.kinds import JOBS
from trainer.api.trainer_v1alpha1 import COND_SUSPENDED, REASON_RESUMED, TrainJob, runtime_from_dict
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.jobs.child_writer import Desired, Once
from trainer.jobs.conditions import JOB_TERMINAL, TRAINJOB_TERMINAL, finished, kept_conditions, problem
from trainer.jobs.gang.base import GangPlan, decorate, gang_conditions
from trainer.jobs.kind import Blocked, Event, Kind, Latest
from trainer.jobs.reconcile import first_error, invalid
from trainer.trainjob.children import build_children
from trainer.trainjob.features import FEATURES
from trainer.trainjob.features.base import Step, deleting
from trainer.trainjob.features.dra import devices_of
from trainer.trainjob.features.snapshot import runtime_ref, runtime_to_expand
from trainer.trainjob.options import TrainJobOptions
from trainer.trainjob.runtime import expand as expansion
from trainer.trainjob.runtime.attempt import jobs_status
from trainer.trainjob.runtime.view import TrainJobView
from trainer.trainjob.status import desired_conditions, status
from trainer.trainjob.validation import node_limit_errors, running_pods, runtime_errors, trainjob_errors


def expand(
    options: TrainJobOptions, gang_name: str, reader: Reader, obj: JSON, job: TrainJob
) -> TrainJobView | Blocked:
    """The TrainJob as this reconcile sees it, from its runtime snapshot (else the runtime it references)
    and its Jobs; :class:`Blocked` while something else runs it (a feature's ``take_over``), when the runtime
    is missing or invalid, or when the TrainJob breaks a rule the webhook enforces (said here when the
    webhook does not run)."""
    now = datetime.now(UTC)
    for feature in FEATURES:
        handed = feature.take_over(reader, obj, job, now) if feature.take_over is not None else None
        if handed is not None:
            return handed  # e.g. a JobSet Kubeflow Trainer made runs it, or goes first
    runtime_obj = runtime_to_expand(reader, obj, job)
    if isinstance(runtime_obj, Blocked):
        return runtime_obj
    name = runtime_ref(obj)[1]
    try:
        runtime = runtime_from_dict(runtime_obj)
    except ValidationError as e:
        return Blocked(invalid(obj, TRAINJOB, f"runtime {name!r} is invalid: {first_error(e)}"))
    observed = reader.owned(JOBS, str(job.metadata.uid))
    done = finished(obj, TRAINJOB_TERMINAL) is not None
    # What the webhook refuses is said here when it does not run; a started or finished job is left be.
    settled = bool(observed) or done
    problems = [] if settled else runtime_errors(runtime.spec)
    if problems:
        return Blocked(invalid(obj, TRAINJOB, f"runtime {name!r} is invalid: {'; '.join(problems)}"))
    devices = devices_of(reader, str(job.metadata.namespace))
    view = expansion.expand(
        obj,
        job,
        runtime.spec,
        runtime_obj,
        observed,
        gang=gang_name,
        now=now,
        injection=options.injection,
        devices=devices,
    )
    problems = [] if settled else trainjob_errors(view.info, options.max_nodes_per_job)
    if problems:
        return Blocked(invalid(obj, TRAINJOB, "; ".join(problems)))
    # The node limit holds for a started job too (the webhook may not run): what it runs stays, it
    # grows by nothing while its spec asks for more than the limit allows.
    grown = [] if done else node_limit_errors(view.info, options.max_nodes_per_job, running_pods(observed))
    if grown:
        return Blocked([*kept_conditions(obj), problem(REASON_NODE_LIMIT, "; ".join(grown))])
    return view


def desired(options: TrainJobOptions, gang_name: str, reader: Reader, view: TrainJobView, plan: GangPlan) -> Desired:
    """The TrainJob's writes now: every feature's (its runtime snapshot, claims, budget, NetworkPolicy,
    TTL...) and, while it runs, its children (none of a new attempt until the previous one's Jobs are
    gone), the gang's plan applied; once finished, or past its deadline, the deletes of Jobs that still run."""
    info, attempt = view.info, view.attempt
    out = Desired(delete=list(plan.delete))
    step = Step(reader=reader, view=view, options=options, gang_name=gang_name)
    for feature in FEATURES:
        if feature.desired is not None:
            feature.desired(step, out)
    if attempt.over:
        # As JobSet does: a finished TrainJob's Jobs that still run are deleted, so their pods
        # stop holding nodes (e.g. MPI workers once the launcher is done); so does a deadline.
        jobs = [*attempt.previous, *attempt.replaced, *attempt.observed]
        out.delete += [(JOBS, *key_of(j)) for j in jobs if finished(j, JOB_TERMINAL) is None and not deleting(j)]
        return out
    # A restart: every Job of the earlier attempt goes, with its Pods (foreground), before any Job of
    # the new attempt is created: two attempts never run at once. A Job restarted alone (RestartJob)
    # goes with its Pods before it is created again; the others run on.
    out.delete_foreground += [(JOBS, *key_of(j)) for j in [*attempt.previous, *attempt.replaced] if not deleting(j)]
    held = {key_of(j) for j in attempt.replaced}
    decision = attempt.decision
    if decision is not None and decision.job is not None and not decision.fail:
        held.add(
            (str(info.job.metadata.namespace), decision.job)
        )  # restarted alone: replaced from the next reconcile on
    children = build_children(view, info.suspended or plan.hold)
    out.apply += plan.apply
    out.once += plan.create
    out.once += [
        Once(c.resource, str(info.job.metadata.namespace), c.name, c.make) for c in info.policy.created_once(info)
    ]
    out.apply += children.config_maps
    out.apply += children.secrets
    if children.service is not None:
        out.apply.append(children.service)
    if not attempt.previous and not attempt.restarting:
        jobs = children.jobs
        for feature in FEATURES:
            jobs = feature.jobs(step, jobs, out) if feature.jobs is not None else jobs
        out.apply += decorate([j for j in jobs if key_of(j) not in held], plan, info.not_in_gang)
    return out


def settle(view: TrainJobView, desired: Desired, latest: Latest) -> TrainJobView:
    """``view`` with the Jobs just created or changed counted in jobsStatus at once (a new suspended
    Job is ``suspended: 1``), not only once the watch brings them back."""
    jobs = {key_of(j): j for j in view.attempt.observed}
    changed = False
    for obj in desired.apply:
        if obj.get("kind") != JOBS.kind:
            continue
        key = key_of(obj)
        now = latest(JOBS, *key)
        if now is not None and now is not jobs.get(key):
            jobs[key], changed = now, True
    if not changed:
        return view
    observed = list(jobs.values())
    attempt = dataclasses.replace(view.attempt, observed=observed, statuses=jobs_status(view.info.rjobs, observed))
    return TrainJobView(view.info, attempt)


def conditions(options: TrainJobOptions, view: TrainJobView, plan: GangPlan) -> list[Condition] | None:
    """The TrainJob's conditions (:func:`trainer.trainjob.status.desired_conditions`) and, while it runs,
    the gang's; None once a feature deletes the TrainJob itself (no status write)."""
    if any(f.deletes_trainjob is not None and f.deletes_trainjob(view) for f in FEATURES):
        return None  # being deleted: no status write
    job = view.info.job
    current = (job.status.conditions if job.status else None) or []
    out = desired_conditions(view, current, options.running_condition)
    return out if view.attempt.finished else out + gang_conditions(plan)


def events(options: TrainJobOptions, view: TrainJobView | None) -> list[Event]:
    """A restart's Warning event; ``Resumed`` when there is no Resumed condition to tell it."""
    if view is None:
        return []
    out: list[Event] = []
    decision = view.attempt.decision
    if decision is not None and not decision.fail:
        out.append(("Warning", decision.reason, decision.message))
    job = view.info.job
    was_suspended = any(c.type == COND_SUSPENDED for c in (job.status.conditions if job.status else None) or [])
    if not options.running_condition and not view.info.suspended and was_suspended:
        out.append(("Normal", REASON_RESUMED, "TrainJob is resumed"))  # no Resumed condition to tell it
    return out


def kind(options: TrainJobOptions, gang_name: str) -> Kind[TrainJob, TrainJobView]:
    """The TrainJob kind under ``options`` and the gang scheduler named ``gang_name``: it reads its Job
    writes back (``settle``), so their echoes need no reconcile."""
    return Kind(
        facts=TRAINJOB,
        expand=partial(expand, options, gang_name),
        desired=partial(desired, options, gang_name),
        settle=settle,
        conditions=partial(conditions, options),
        status=status,
        events=partial(events, options),
    )
