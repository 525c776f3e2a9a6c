"""The OptimizationJob controller: its declaration and the functions of its :class:`~trainer.jobs.kind.Kind`.

An OptimizationJob (kubeflow/trainer ``pkg/apis/trainer/v1alpha1/optimizationjob_types.go``, KEP-3562; upstream
ships the CRD with no controller) runs ``numTrials`` trials, at most ``parallelTrials`` at a time; each is a
TrainJob made from ``spec.trainJobTemplate`` (:mod:`trainer.optimizationjob.trials`) with parameters the search
chooses (:mod:`trainer.optimizationjob.search`), created once through the one child writer and owned by the
job (a controller owner reference: deleting the job deletes its trials). Every reconcile reads the trials
back from the cluster, so the search is rebuilt from them and an operator restart neither repeats nor
revives a trial. The TrainJob controller runs each trial; a trial's objective is the metric it reports in
``status.trainerStatus``. The status (:mod:`trainer.optimizationjob.status`) names the best trial.

With ``pruneAlgorithm.median`` a running trial that falls behind is stopped early: annotated and suspended
by a merge patch (:func:`~trainer.optimizationjob.trials.stop_patch`), ``EarlyStopped`` from then on, and
suspended again if anyone resumes it. ``spec.suspend`` holds the search: no trial is created and the running
ones are suspended; when it is false again they get the template's ``suspend`` back and the search goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

from trainer.api.base import Condition
from trainer.api.conditions import true_condition
from trainer.api.jobkinds import OPTIMIZATIONJOB
from trainer.api.kinds import TRAINJOBS
from trainer.api.labels import OPTIMIZATION_JOB_NAME, TRIAL_INDEX
from trainer.api.optimizationjob import COND_FAILED, COND_SUSPENDED, TRIAL_EARLY_STOPPED, TRIAL_RUNNING, OptimizationJob
from trainer.framework.controller import Controller, Owns, Reader
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.jobs import gang
from trainer.jobs.child_writer import CREATED_ONCE, Desired, Once
from trainer.jobs.gang.base import GangInput, GangPlan
from trainer.jobs.kind import Kind
from trainer.jobs.reconcile import declare
from trainer.jobs.status_writer import Telling
from trainer.optimizationjob import search
from trainer.optimizationjob.status import (
    Trial,
    conditions,
    finished,
    merge_reports,
    recalled_reports,
    recorded,
    status_fields,
    to_stop,
)
from trainer.optimizationjob.trials import build_trial, index_of_name, observe, report, stop_patch, trial_name

PERMISSIONS: tuple[Permission, ...] = ()
"""Nothing beyond what the declaration implies (:func:`controller`): list/watch of OptimizationJobs, the patch
of their status, and create/get/patch of the TrainJobs they own (never delete: owner references collect
them with their job)."""
TELLING = Telling(warnings=frozenset({COND_FAILED}), progress_fields=frozenset({"trialsRunning"}))
"""How an OptimizationJob's changes are told: ``Failed`` as a Warning event; the running count coalesced.
``trialResults`` is written when it changes: the reports median stopping compares are kept there."""
TRIALS = Owns(TRAINJOBS, OPTIMIZATION_JOB_NAME, verbs=CREATED_ONCE)
"""The trials: TrainJobs labelled with their job's name, created once, never applied or deleted; merge
patched only to stop one early or to suspend and resume it with the job."""


@dataclass(frozen=True)
class OptimizationJobInfo:
    """One OptimizationJob as this reconcile sees it, derived once."""

    obj: JSON
    job: OptimizationJob
    trials: list[Trial]
    """Every trial it has had, from the cluster and, for those deleted since, from its status."""
    parameters: dict[str, dict[str, str]]
    """The parameters of each trial the cluster has, by trial name."""
    limit: int
    """How many trials the search runs: ``numTrials``, or a grid's size when smaller."""
    wanted: list[int] = field(default_factory=list)
    """The indices of the trials to create now, which the search gives parameters (:func:`searched`)."""
    new: dict[int, dict[str, str]] = field(default_factory=dict)
    """The trials to create now: index -> parameters."""
    patches: dict[str, JSON] = field(default_factory=dict)
    """The merge patches of trials to send now (stop early, suspend, resume), by trial name."""

    @property
    def gang(self) -> GangInput:
        """No gang: the trials' own TrainJobs are gang scheduled."""
        return GangInput(owner=self.obj, pod_sets=[], finished=True)

    @property
    def requeue_after(self) -> float | None:
        """None: a trial's change brings the next reconcile."""
        return None

    @property
    def pod_ready(self) -> bool:
        """False: it runs no pods of its own."""
        return False


def seed(obj: JSON, job: OptimizationJob) -> int:
    """The search's seed: ``searchAlgorithm.random.seed`` or ``tpe.seed``, else one from the job's uid
    (random, tpe), 0 (grid)."""
    algorithm = job.spec.search_algorithm
    if algorithm is not None and algorithm.grid is not None:
        return 0
    if algorithm is not None and algorithm.random is not None and algorithm.random.seed is not None:
        return algorithm.random.seed
    if algorithm is not None and algorithm.tpe is not None and algorithm.tpe.seed is not None:
        return algorithm.tpe.seed
    return search.seed_of(str(meta(obj).uid or meta(obj).name))


def expand(reader: Reader, obj: JSON, job: OptimizationJob) -> OptimizationJobInfo:
    """The trials the job has (its TrainJobs read back, and those its status recalls) and, unless it has
    finished, the next ones: the lowest indices it has no trial of (one whose create was refused, or whose
    name someone else's TrainJob holds, is tried again), as many as ``parallelTrials`` leaves room for;
    :func:`searched` gives them their parameters."""
    name, uid = str(meta(obj).name), str(meta(obj).uid or "")
    metric = job.spec.objectives[0].metric
    trials: list[Trial] = []
    parameters: dict[str, dict[str, str]] = {}
    suspended: dict[str, bool] = {}
    kept = recalled_reports(job) if job.spec.prune_algorithm is not None else {}
    for tj in reader.owned(TRAINJOBS, uid):
        label = meta(tj).labels.get(TRIAL_INDEX, "")
        tname = str(meta(tj).name)
        index = index_of_name(name, tname)
        if index is None or label != str(index):
            continue  # not a trial of this job's making
        observed, why = observe(tj, index, metric)
        now = report(tj, metric) if observed.state == TRIAL_RUNNING and job.spec.prune_algorithm else None
        observed = replace(observed, reports=merge_reports(kept.get(tname, ()), now))
        trials.append(Trial(tname, observed, why, now))
        parameters[tname] = observed.parameters
        suspended[tname] = bool((tj.get("spec") or {}).get("suspend"))
    patches = trial_patches(obj, job, trials, suspended)
    trials = [
        replace(t, observed=replace(t.observed, state=TRIAL_EARLY_STOPPED), message=stop)
        if (stop := _stop_reason(patches.get(t.name))) is not None
        else t
        for t in trials
    ]
    recalled: dict[str, int] = {}
    for r in (job.status.trial_results if job.status else None) or []:
        if (i := index_of_name(name, r.name)) is not None:
            recalled[r.name] = i
    trials += recorded(job, set(parameters), recalled)
    num = job.spec.num_trials or 1
    size = search.grid_size(job.spec)
    limit = min(num, size) if size is not None else num
    info = OptimizationJobInfo(obj, job, trials, parameters, limit, patches=patches)
    if job.spec.suspend or finished(trials, limit) or true_condition(_conditions(obj), COND_FAILED) is not None:
        return info
    known = {t.observed.index for t in trials}
    running = sum(t.observed.state == TRIAL_RUNNING for t in trials)
    room = min((job.spec.parallel_trials or 1) - running, limit - len(known))
    if room <= 0:
        return info
    wanted = [i for i in range(limit) if i not in known][:room]
    return OptimizationJobInfo(obj, job, trials, parameters, limit, wanted, patches=patches)


def searched(info: OptimizationJobInfo) -> OptimizationJobInfo:
    """``info`` with the parameters the search gives the trials it wants (:func:`search.next_assignments`:
    Optuna's sampler, up to seconds of CPU for a large TPE search, hence run off the event loop)."""
    if not info.wanted:
        return info
    observed = [t.observed for t in info.trials]
    new = search.next_assignments(info.job.spec, seed(info.obj, info.job), observed, info.wanted)
    return replace(info, new=new)


def trial_patches(obj: JSON, job: OptimizationJob, trials: list[Trial], suspended: dict[str, bool]) -> dict[str, JSON]:
    """The merge patches the trials need now, by name (``suspended``: each trial's ``spec.suspend``): stop
    those median stopping stops (:func:`~trainer.optimizationjob.status.to_stop`; not while the job is
    suspended), suspend again an early-stopped one someone resumed; with ``spec.suspend`` suspend the
    running ones; once it is false again after it held (``Suspended`` True), give them the template's
    ``suspend`` back."""
    out: dict[str, JSON] = {}
    if not job.spec.suspend:
        out.update({n: stop_patch(why) for n, why in to_stop(job, trials).items()})
    for t in trials:
        if t.observed.state == TRIAL_EARLY_STOPPED and not suspended.get(t.name, True):
            out[t.name] = {"spec": {"suspend": True}}
    template = bool(((obj.get("spec") or {}).get("trainJobTemplate") or {}).get("spec", {}).get("suspend"))
    held = true_condition(_conditions(obj), COND_SUSPENDED) is not None
    for t in trials:
        if t.observed.state != TRIAL_RUNNING or t.name in out or t.name not in suspended:
            continue
        if job.spec.suspend and not suspended[t.name]:
            out[t.name] = {"spec": {"suspend": True}}
        elif not job.spec.suspend and held and suspended[t.name] != template:
            out[t.name] = {"spec": {"suspend": template}}
    return out


def _stop_reason(patch: JSON | None) -> str | None:
    """Why ``patch`` stops a trial early, None when it does not."""
    annotations = meta(patch or {}).annotations
    return next(iter(annotations.values()), None)


def _conditions(obj: JSON) -> list[JSON]:
    return list((obj.get("status") or {}).get("conditions") or [])


def desired(info: OptimizationJobInfo) -> Desired:
    """The trials to create now, each once (:func:`~trainer.optimizationjob.trials.build_trial`), and the
    merge patches of trials (:func:`trial_patches`)."""
    ns, name = str(meta(info.obj).namespace), str(meta(info.obj).name)
    return Desired(
        patch=[(TRAINJOBS, ns, n, p) for n, p in sorted(info.patches.items())],
        once=[
            Once(TRAINJOBS, ns, trial_name(name, i), partial(build_trial, info.obj, i, params))
            for i, params in sorted(info.new.items())
        ],
    )


def job_conditions(info: OptimizationJobInfo, _plan: GangPlan) -> list[Condition]:
    """The job's conditions (:func:`trainer.optimizationjob.status.conditions`) of the trials read back (those
    this reconcile creates are counted once their watch brings them)."""
    return conditions(info.job, info.trials, info.limit)


def status(obj: JSON, info: OptimizationJobInfo | None, conds: list[JSON] | None) -> JSON:
    """The whole status: conditions, ``result``, the trial counts and ``trialResults``."""
    if info is None:
        return {"conditions": conds}
    return {"conditions": conds, **status_fields(info.job, info.trials, info.parameters)}


def kind() -> Kind[OptimizationJob, OptimizationJobInfo]:
    """The OptimizationJob kind. It does not read its child writes back: their echoes bring the reconcile."""
    return Kind(
        facts=OPTIMIZATIONJOB,
        expand=expand,
        offloaded=searched,
        desired=lambda _reader, info, _plan: desired(info),
        conditions=job_conditions,
        status=status,
    )


def controller() -> Controller:
    """The OptimizationJob controller's declaration: OptimizationJobs, and only the TrainJobs they own
    (:data:`TRIALS`); no Jobs, no gang scheduler of its own."""
    return declare("optimizationjob", kind(), gang.get("none"), telling=TELLING, also_owns=(TRIALS,), runs_jobs=False)
