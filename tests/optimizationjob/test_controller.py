"""The OptimizationJob controller on the recording double of ``Kube`` (the real manager, wired from the real
declarations): trials are TrainJobs made from the template, owned by the job, carrying their parameters; at
most ``parallelTrials`` run, ``numTrials`` in all; a trial's objective is the metric it reports; the result
names the best; the search is rebuilt from the trials read back, so a restart repeats and revives nothing."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from typing import Any

import pytest

from tests.kube_double import RecordingKube
from trainer.api.kinds import OPTIMIZATION_JOBS, TRAINJOBS
from trainer.api.optimizationjob import OptimizationJob
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.optimizationjob.search import Observed
from trainer.optimizationjob.status import Trial, recorded, to_stop
from trainer.wiring import Settings, new_manager

CONTROLLER = "optimizationjob"


def optimization_job(name: str = "o", **spec: Any) -> JSON:
    base: JSON = {
        "objectives": [{"metric": "loss", "direction": "Minimize"}],
        "searchAlgorithm": {"random": {"seed": 42}},
        "parameters": [
            {"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "0.1", "type": "Float"}}},
            {"name": "batch-size", "searchSpace": {"categorical": {"choices": ["16", "32", "64"]}}},
        ],
        "numTrials": 4,
        "parallelTrials": 2,
        "trainJobTemplate": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"},
                "trainer": {"env": [{"name": "KEEP", "value": "1"}, {"name": "KUBEFLOW_TRAINER_OPT_LR", "value": "x"}]},
            },
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {**base, **spec},
    }


class Cluster:
    """The recording double with a manager (an operator) on it; :meth:`restart` starts a new one."""

    def __init__(self, *objects: JSON, kube: RecordingKube | None = None) -> None:
        self.kube = kube or RecordingKube()
        self.manager = new_manager(self.kube, Settings(status_coalesce_seconds=0))
        self.kube.connect(self.manager.informers)
        self.key = ("", "")
        for obj in objects:
            stored = self.kube.put(obj)
            if stored["kind"] == OPTIMIZATION_JOBS.kind:
                self.key = key_of(stored)

    def restart(self) -> Cluster:
        """A new operator over the same stored objects."""
        kube = RecordingKube(objects=copy.deepcopy(self.kube.objects))
        out = Cluster(kube=kube)
        out.key = self.key
        return out

    async def settle(self) -> int:
        """Reconcile until nothing is written; returns the writes made."""
        before = len(self.kube.writes)
        for _ in range(8):
            mark = len(self.kube.writes)
            try:
                await self.manager.reconcilers[CONTROLLER](self.key)
            finally:
                await self.manager.events.flush()  # the events it told, written as the recorder's senders would
            if len(self.kube.writes) == mark:
                return mark - before
        raise AssertionError(f"never settled: {self.kube.writes[-5:]}")

    @property
    def job(self) -> JSON:
        return self.kube.objects[(OPTIMIZATION_JOBS, self.key)]

    @property
    def status(self) -> JSON:
        return dict(self.job.get("status") or {})

    def trials(self) -> dict[str, JSON]:
        return dict(sorted((k[1], o) for (r, k), o in self.kube.objects.items() if r == TRAINJOBS))

    def condition(self, type_: str) -> JSON | None:
        return next((c for c in self.status.get("conditions") or [] if c["type"] == type_), None)

    def finish(self, name: str, value: str | None = None, failed: bool = False) -> None:
        """The TrainJob controller finishes trial ``name``, the trainer having reported ``loss=value``."""
        tj = copy.deepcopy(self.trials()[name])
        cond = {"type": "Failed" if failed else "Complete", "status": "True", "reason": "X", "message": "done"}
        status: JSON = {"conditions": [cond]}
        if value is not None:
            status["trainerStatus"] = {
                "lastUpdatedTime": "2026-01-01T00:00:00Z",
                "metrics": [
                    {"name": "loss", "value": "9"},
                    {"name": "acc", "value": "1"},
                    {"name": "loss", "value": value},
                ],
            }
        tj["status"] = status
        self.kube.put(tj)


def params(trial: JSON) -> dict[str, str]:
    return {
        p["name"]: p["value"]
        for p in json.loads(trial["metadata"]["annotations"]["trainer.kubeflow.org/trial-parameters"])
    }


def env(trial: JSON) -> dict[str, str]:
    return {e["name"]: e["value"] for e in trial["spec"]["trainer"]["env"]}


async def test_trials_are_owned_labelled_trainjobs_with_their_parameters_in_env_and_annotation() -> None:
    c = Cluster(optimization_job())
    await c.settle()
    trials = c.trials()
    assert sorted(trials) == ["o-trial-0", "o-trial-1"]  # parallelTrials
    uid = c.job["metadata"]["uid"]
    for index, trial in enumerate(trials.values()):
        (ref,) = trial["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("OptimizationJob", "o", uid, True)
        assert trial["metadata"]["labels"] == {
            "team": "a",
            "trainer.kubeflow.org/optimizationjob-name": "o",
            "trainer.kubeflow.org/trial-index": str(index),
        }
        p = params(trial)
        assert (
            set(p) == {"lr", "batch-size"} and 0.0001 <= float(p["lr"]) <= 0.1 and p["batch-size"] in {"16", "32", "64"}
        )
        assert env(trial) == {
            "KEEP": "1",
            "KUBEFLOW_TRAINER_OPT_LR": p["lr"],  # the template's entry of that name replaced
            "KUBEFLOW_TRAINER_OPT_BATCH_SIZE": p["batch-size"],
        }
        assert trial["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert params(trials["o-trial-0"]) != params(trials["o-trial-1"])
    assert c.kube.count("create", "TrainJob") == 2
    assert c.condition("Created") is not None and c.condition("Created")["status"] == "True"  # type: ignore[index]
    assert (c.status["trials"], c.status["trialsRunning"]) == (2, 2)
    assert [r["state"] for r in c.status["trialResults"]] == ["Running", "Running"]
    assert await c.settle() == 0  # settled: a reconcile writes nothing


async def test_the_search_runs_num_trials_at_most_parallel_and_the_result_is_the_best() -> None:
    c = Cluster(optimization_job())
    await c.settle()
    c.finish("o-trial-0", "0.5")
    await c.settle()
    assert sorted(c.trials()) == ["o-trial-0", "o-trial-1", "o-trial-2"]  # one finished, one started
    c.finish("o-trial-1", "0.25")
    c.finish("o-trial-2", failed=True)
    await c.settle()
    assert sorted(c.trials()) == ["o-trial-0", "o-trial-1", "o-trial-2", "o-trial-3"]  # numTrials
    c.finish("o-trial-3")  # completes without reporting loss
    await c.settle()
    assert len(c.trials()) == 4 and c.kube.count("create", "TrainJob") == 4
    complete = c.condition("Complete")
    assert complete is not None and complete["reason"] == "MaxTrialsReached"
    assert "the best is o-trial-1 (loss=0.25)" in complete["message"]
    best = c.trials()["o-trial-1"]
    assert c.status["result"] == {
        "trainJobName": "o-trial-1",
        "parameters": [{"name": n, "value": v} for n, v in params(best).items()],
    }
    assert (c.status["trialsSucceeded"], c.status["trialsFailed"], c.status["trialsRunning"]) == (2, 2, 0)
    results = {r["name"]: r for r in c.status["trialResults"]}
    assert results["o-trial-0"] == {"name": "o-trial-0", "state": "Succeeded", "value": "0.5"}  # the last loss
    assert results["o-trial-2"]["state"] == "Failed" and "TrainJob failed: X: done" in results["o-trial-2"]["message"]
    assert "without reporting metric 'loss'" in results["o-trial-3"]["message"]
    assert c.condition("Failed") is None


async def test_maximize_picks_the_largest_value() -> None:
    c = Cluster(optimization_job(objectives=[{"metric": "loss", "direction": "Maximize"}], numTrials=2))
    await c.settle()
    c.finish("o-trial-0", "0.5")
    c.finish("o-trial-1", "0.25")
    await c.settle()
    assert c.status["result"]["trainJobName"] == "o-trial-0"


async def test_when_every_trial_fails_the_job_fails_saying_so() -> None:
    c = Cluster(optimization_job(numTrials=2))
    await c.settle()
    c.finish("o-trial-0", "not-a-number")
    c.finish("o-trial-1", failed=True)
    await c.settle()
    failed = c.condition("Failed")
    assert failed is not None and failed["reason"] == "AllTrialsFailed"
    assert "all 2 trials failed" in failed["message"] and c.condition("Complete") is None
    assert "not a number" in c.status["trialResults"][0]["message"]
    assert "result" not in c.status


async def test_a_restarted_operator_neither_repeats_nor_changes_a_trial_and_continues_the_same_sequence() -> None:
    first = Cluster(optimization_job())
    await first.settle()
    first.finish("o-trial-0", "0.5")
    again = first.restart()
    assert await again.settle() > 0
    assert again.kube.count("create", "TrainJob") == 1  # only o-trial-2, none again
    trials = again.trials()
    assert sorted(trials) == ["o-trial-0", "o-trial-1", "o-trial-2"]
    # The same seed on an untouched cluster gives trial 2 the same parameters: the sequence is the seed's.
    fresh = Cluster(optimization_job(name="o"))
    await fresh.settle()
    fresh.finish("o-trial-1", "0.1")
    await fresh.settle()
    assert params(fresh.trials()["o-trial-2"]) == params(trials["o-trial-2"])
    assert params(fresh.trials()["o-trial-0"]) == params(trials["o-trial-0"])


async def test_a_deleted_trial_is_not_created_again_and_counts_as_failed() -> None:
    c = Cluster(optimization_job(numTrials=3, parallelTrials=1))
    await c.settle()
    c.finish("o-trial-0", "0.5")
    await c.settle()
    await c.kube.delete(TRAINJOBS, "default", "o-trial-0")  # finished: its outcome is kept
    await c.kube.delete(TRAINJOBS, "default", "o-trial-1")  # running: counts as failed
    await c.settle()
    assert sorted(c.trials()) == ["o-trial-2"]
    results = {r["name"]: r for r in c.status["trialResults"]}
    assert results["o-trial-0"]["state"] == "Succeeded" and results["o-trial-0"]["value"] == "0.5"
    assert results["o-trial-1"] == {
        "name": "o-trial-1",
        "state": "Failed",
        "message": "TrainJob deleted before it finished",
    }
    c.finish("o-trial-2", "0.7")
    await c.settle()
    assert not [w for w in c.kube.writes if w.verb == "create" and w.key[1] in ("o-trial-0", "o-trial-1")][2:]
    assert c.status["result"]["trainJobName"] == "o-trial-0" and c.status["result"]["parameters"]
    assert c.condition("Complete") is not None


async def test_grid_runs_each_point_once_and_stops_when_the_grid_is_exhausted() -> None:
    grid = [
        {"name": "bs", "searchSpace": {"categorical": {"choices": ["16", "32"]}}},
        {"name": "opt", "searchSpace": {"categorical": {"choices": ["sgd", "adam"]}}},
    ]
    c = Cluster(optimization_job(searchAlgorithm={"grid": {}}, parameters=grid, numTrials=6, parallelTrials=6))
    await c.settle()
    trials = c.trials()
    assert len(trials) == 4
    points = {tuple(sorted(params(t).items())) for t in trials.values()}
    assert points == {(("bs", b), ("opt", o)) for b in ("16", "32") for o in ("sgd", "adam")}
    for name in trials:
        c.finish(name, "1")
    await c.settle()
    complete = c.condition("Complete")
    assert complete is not None and complete["reason"] == "SearchSpaceExhausted"
    assert "the grid has 4 points, fewer than numTrials 6" in complete["message"]


async def test_a_foreign_trainjob_with_a_trials_name_is_left_and_said() -> None:
    foreign = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "o-trial-0", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "other"}},
    }
    c = Cluster(optimization_job(), foreign)
    await c.settle()
    assert c.trials()["o-trial-0"]["spec"] == {"runtimeRef": {"name": "other"}}  # untouched
    assert "o-trial-1" in c.trials()
    misconfigured = c.condition("Misconfigured")
    assert misconfigured is not None and misconfigured["reason"] == "ErrResourceExists"
    assert "o-trial-0" in misconfigured["message"]
    await c.kube.delete(TRAINJOBS, "default", "o-trial-0")  # the owner removes it: the job goes on
    c.manager.reconcilers[CONTROLLER].__self__.children._refusals.clear()  # type: ignore[attr-defined]  # no backoff wait
    await c.settle()
    assert c.trials()["o-trial-0"]["metadata"]["ownerReferences"][0]["name"] == "o"
    assert c.condition("Misconfigured") is None


async def test_a_spec_the_controller_cannot_run_fails_once_naming_the_field() -> None:
    clash = [
        {"name": "learning-rate", "searchSpace": {"categorical": {"choices": ["1"]}}},
        {"name": "learning_rate", "searchSpace": {"categorical": {"choices": ["2"]}}},
    ]
    c = Cluster(optimization_job(parameters=clash))
    with pytest.raises(Exception, match="KUBEFLOW_TRAINER_OPT_LEARNING_RATE"):
        await c.settle()
    failed = c.condition("Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert "rename one of them" in failed["message"] and c.trials() == {}


def test_a_recalled_trial_whose_value_cannot_be_read_counts_as_failed() -> None:
    obj = optimization_job()
    obj["status"] = {
        "trialResults": [
            {"name": "o-trial-0", "state": "Succeeded", "value": "abc"},
            {"name": "o-trial-1", "state": "Succeeded", "value": "0.5"},
            {"name": "o-trial-2", "state": "Running"},
        ]
    }
    job = OptimizationJob.model_validate(obj)
    got = recorded(job, {"o-trial-2"}, {"o-trial-0": 0, "o-trial-1": 1, "o-trial-2": 2})
    assert [(t.name, t.observed.state, t.observed.value) for t in got] == [
        ("o-trial-0", "Failed", None),
        ("o-trial-1", "Succeeded", 0.5),
    ]


def report(c: Cluster, name: str, progress: int, value: str) -> None:
    """The trainer of running trial ``name`` posts ``loss=value`` at ``progress`` percent."""
    tj = copy.deepcopy(c.trials()[name])
    tj["status"] = {"trainerStatus": {"progressPercentage": progress, "metrics": [{"name": "loss", "value": value}]}}
    c.kube.put(tj)


async def test_tpe_trials_follow_from_the_seed_and_the_outcomes_and_a_restart_asks_nothing_again() -> None:
    job = optimization_job(searchAlgorithm={"tpe": {"seed": 5, "nStartupTrials": 1}}, numTrials=4, parallelTrials=1)
    c = Cluster(job)
    await c.settle()
    c.finish("o-trial-0", "0.5")
    await c.settle()
    c.finish("o-trial-1", "0.25")
    again = c.restart()
    await again.settle()
    assert again.kube.count("create", "TrainJob") == 1  # o-trial-2 only
    twin = Cluster(copy.deepcopy(job))
    await twin.settle()
    twin.finish("o-trial-0", "0.5")
    await twin.settle()
    twin.finish("o-trial-1", "0.25")
    await twin.settle()
    assert [params(t) for t in twin.trials().values()] == [params(t) for t in again.trials().values()]
    other = Cluster(copy.deepcopy(job))  # the same seed, other outcomes: TPE proposes another trial 2
    await other.settle()
    other.finish("o-trial-0", "0.01")
    await other.settle()
    other.finish("o-trial-1", "9")
    await other.settle()
    assert params(other.trials()["o-trial-1"]) == params(twin.trials()["o-trial-1"])  # a startup draw
    assert params(other.trials()["o-trial-2"]) != params(twin.trials()["o-trial-2"])


async def test_median_stopping_stops_a_trial_behind_the_succeeded_ones_and_never_resumes_it() -> None:
    prune = {"median": {"startStep": 20, "minTrials": 2}}
    c = Cluster(optimization_job(pruneAlgorithm=prune, numTrials=6, parallelTrials=3))
    await c.settle()
    report(c, "o-trial-0", 10, "2.0")
    report(c, "o-trial-1", 10, "9.0")  # the worst, but nothing succeeded yet
    report(c, "o-trial-2", 10, "1.0")
    await c.settle()
    report(c, "o-trial-0", 50, "0.8")
    report(c, "o-trial-2", 55, "0.5")
    await c.settle()
    c.finish("o-trial-0", "0.7")
    c.finish("o-trial-2", "0.4")
    await c.settle()
    report(c, "o-trial-1", 15, "9.0")  # worse than both at 15%, before startStep
    await c.settle()
    report(c, "o-trial-1", 50, "0.9")  # not worse than the median 0.9 of 0.8 (o-trial-0 at 50%), 1.0 (o-trial-2 at 10%)
    await c.settle()
    assert c.kube.count("patch", "TrainJob") == 0
    report(c, "o-trial-1", 60, "3.0")  # worse than the median of 0.8 (o-trial-0 at 50%) and 0.5 (o-trial-2 at 55%)
    await c.settle()
    stopped = c.trials()["o-trial-1"]
    assert stopped["spec"]["suspend"] is True
    why = stopped["metadata"]["annotations"]["trainer.kubeflow.org/trial-early-stopped"]
    assert "loss=3.0 at 60% progress is worse than the median 0.65 of 2 succeeded trials" in why
    results = {r["name"]: r for r in c.status["trialResults"]}
    assert results["o-trial-1"]["state"] == "EarlyStopped" and results["o-trial-1"]["message"] == why
    assert [(r["progress"], r["value"]) for r in results["o-trial-0"]["reports"]] == [(10, "2.0"), (50, "0.8")]
    assert [(r["progress"], r["value"]) for r in results["o-trial-1"]["reports"]] == [
        (10, "9.0"),
        (50, "0.9"),
        (60, "3.0"),
    ]
    assert (c.status["trialsEarlyStopped"], c.status["trialsFailed"], c.status["trialsRunning"]) == (1, 0, 3)
    assert sorted(c.trials())[-1] == "o-trial-5"  # its place is taken by the next trial
    # Someone resumes it: it is suspended again and stays EarlyStopped; a restart changes nothing.
    tj = copy.deepcopy(c.trials()["o-trial-1"])
    tj["spec"]["suspend"] = False
    c.kube.put(tj)
    await c.settle()
    assert c.trials()["o-trial-1"]["spec"]["suspend"] is True
    again = c.restart()
    assert await again.settle() == 0
    for name in ("o-trial-3", "o-trial-4", "o-trial-5"):
        again.finish(name, "1")
    await again.settle()
    complete = again.condition("Complete")
    assert complete is not None and complete["reason"] == "MaxTrialsReached"
    assert {r["name"]: r["state"] for r in again.status["trialResults"]}["o-trial-1"] == "EarlyStopped"
    assert again.kube.count("create", "TrainJob") == 0 and again.status["trialsSucceeded"] == 5


async def test_a_deleted_early_stopped_trial_keeps_its_state_and_reports() -> None:
    prune = {"median": {"minTrials": 1}}
    c = Cluster(optimization_job(pruneAlgorithm=prune, numTrials=2, parallelTrials=2))
    await c.settle()
    report(c, "o-trial-0", 20, "1.0")
    await c.settle()
    c.finish("o-trial-0", "0.5")
    await c.settle()
    report(c, "o-trial-1", 30, "4.0")  # worse than o-trial-0's 1.0 at 20%
    await c.settle()
    assert c.trials()["o-trial-1"]["spec"]["suspend"] is True
    await c.kube.delete(TRAINJOBS, "default", "o-trial-1")
    await c.settle()
    (_, r1) = c.status["trialResults"]
    assert r1["state"] == "EarlyStopped" and r1["reports"] == [{"progress": 30, "value": "4.0"}]
    assert c.condition("Complete") is not None and c.status["result"]["trainJobName"] == "o-trial-0"


async def test_suspend_holds_the_search_and_resume_continues_it() -> None:
    c = Cluster(optimization_job(numTrials=3, parallelTrials=2))
    await c.settle()
    c.finish("o-trial-0", "0.5")
    job = copy.deepcopy(c.job)
    job["spec"]["suspend"] = True
    c.kube.put(job)
    await c.settle()
    assert sorted(c.trials()) == ["o-trial-0", "o-trial-1"]  # no new trial while suspended
    assert c.trials()["o-trial-1"]["spec"]["suspend"] is True
    assert "suspend" not in c.trials()["o-trial-0"]["spec"]  # finished: left alone
    held = c.condition("Suspended")
    assert held is not None and (held["status"], held["reason"]) == ("True", "Suspended")
    assert "the 1 running ones are suspended" in held["message"]
    assert c.condition("Complete") is None
    job = copy.deepcopy(c.job)
    job["spec"]["suspend"] = False
    c.kube.put(job)
    await c.settle()
    assert c.trials()["o-trial-1"]["spec"]["suspend"] is False
    assert sorted(c.trials()) == ["o-trial-0", "o-trial-1", "o-trial-2"]
    resumed = c.condition("Suspended")
    assert resumed is not None and (resumed["status"], resumed["reason"]) == ("False", "Resumed")
    assert await c.settle() == 0


def test_median_stopping_follows_the_direction_and_needs_min_trials() -> None:
    obj = optimization_job(
        objectives=[{"metric": "loss", "direction": "Maximize"}], pruneAlgorithm={"median": {"minTrials": 2}}
    )
    job = OptimizationJob.model_validate(obj)
    done = [Trial(f"o-trial-{i}", Observed(i, {}, "Succeeded", v, ((40, v),))) for i, v in ((0, 0.6), (1, 0.8))]
    low = Trial("o-trial-2", Observed(2, {}, "Running"), now=(50, 0.5))
    high = Trial("o-trial-3", Observed(3, {}, "Running"), now=(50, 0.9))
    assert sorted(to_stop(job, [*done, low, high])) == ["o-trial-2"]  # below the median 0.7 when maximizing
    assert to_stop(job, [done[0], low, high]) == {}  # one succeeded trial, minTrials 2
    assert to_stop(OptimizationJob.model_validate(optimization_job()), [*done, low]) == {}  # no pruneAlgorithm


async def test_the_search_runs_off_the_event_loop_so_one_job_never_holds_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Optuna's sampler (seconds of CPU for a large TPE search) runs in a worker thread: the event loop,
    which every other job's reconcile shares, keeps running while a job's search does."""
    from trainer.optimizationjob import search

    real = search.next_assignments
    seen: list[tuple[bool, int]] = []

    def recording(*args: Any) -> dict[int, dict[str, str]]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            ticks += 1

        loop_thread = threading.main_thread() is threading.current_thread()
        # Work scheduled on the loop runs while this search is still going only if the loop is free.
        future = asyncio.run_coroutine_threadsafe(tick(), loop)
        future.result(timeout=5)
        seen.append((loop_thread, ticks))
        return real(*args)

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(search, "next_assignments", recording)
    c = Cluster(optimization_job())
    await c.settle()
    assert len(c.trials()) == 2
    assert seen and all(not on_loop and ticks == 1 for on_loop, ticks in seen), seen
