"""The pure parts of OptimizationJobs in the SDK (:mod:`trainer.client.optimize`): the kubeflow SDK's
``optimize()`` arguments (its own types and ours) made into an OptimizationJob, its status, and its trials
read from its TrainJobs and ``status.trialResults``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubeflow.optimizer import GridSearch as SdkGrid
from kubeflow.optimizer import Objective as SdkObjective
from kubeflow.optimizer import RandomSearch as SdkRandom
from kubeflow.optimizer import Search as SdkSearch
from kubeflow.optimizer import TrialConfig as SdkTrialConfig

from tests.kube_double import RecordingKube
from trainer.api.optimizationjob import OptimizationJob
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client import (
    AsyncTrainerClient,
    GridSearch,
    MedianStopping,
    Objective,
    RandomSearch,
    Search,
    TPESearch,
    TrialConfig,
    optimization_status,
)
from trainer.client.optimize import best_trial, decimal, optimization_job, trials_of, with_parameters
from trainer.client.trainers import CustomTrainer, CustomTrainerContainer, function_source

TRIAL_SPEC = {"runtimeRef": {"name": "torch-distributed"}}


def spec_of(job: OptimizationJob) -> dict[str, Any]:
    return job.to_dict()["spec"]  # type: ignore[no-any-return]


def test_our_types_and_the_kubeflow_sdks_give_the_same_spec() -> None:
    ours = optimization_job(
        "o",
        TRIAL_SPEC,
        {"lr": Search.loguniform(1e-4, 0.1), "drop": Search.uniform(0, 0.5), "batch": Search.choice([16, 32])},
        [Objective("accuracy", "maximize")],
        RandomSearch(random_state=42),
        TrialConfig(num_trials=6, parallel_trials=3),
    )
    sdk = optimization_job(
        "o",
        TRIAL_SPEC,
        {
            "lr": SdkSearch.loguniform(1e-4, 0.1),
            "drop": SdkSearch.uniform(0, 0.5),
            "batch": SdkSearch.choice([16, 32]),
        },
        [SdkObjective(metric="accuracy", direction="maximize")],  # type: ignore[arg-type]
        SdkRandom(random_state=42),
        SdkTrialConfig(num_trials=6, parallel_trials=3),
    )
    assert spec_of(ours) == spec_of(sdk)
    spec = spec_of(ours)
    assert spec["objectives"] == [{"metric": "accuracy", "direction": "Maximize"}]
    assert spec["searchAlgorithm"] == {"random": {"seed": 42}}
    assert [p["searchSpace"] for p in spec["parameters"]] == [
        {"logUniform": {"min": "0.0001", "max": "0.1", "type": "Float"}},
        {"uniform": {"min": "0", "max": "0.5", "type": "Float"}},
        {"categorical": {"choices": ["16", "32"]}},
    ]
    assert (spec["numTrials"], spec["parallelTrials"]) == (6, 3)
    grid = optimization_job("g", TRIAL_SPEC, {"b": SdkSearch.choice([1, 2])}, None, SdkGrid(), None)
    assert spec_of(grid)["searchAlgorithm"] == {"grid": {}} and spec_of(grid)["numTrials"] == 10
    assert spec_of(grid)["objectives"] == [{"metric": "loss", "direction": "Minimize"}]


def test_the_defaults_are_the_sdks_and_a_seedless_random_search_has_no_seed() -> None:
    spec = spec_of(optimization_job("o", TRIAL_SPEC, {"x": Search.randint(1, 4)}))
    assert spec["searchAlgorithm"] == {"random": {}}
    assert spec["parameters"][0]["searchSpace"] == {"uniform": {"min": "1", "max": "4", "type": "Int"}}
    assert (spec["numTrials"], spec["parallelTrials"]) == (10, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"search_space": {}}, "search_space: give at least one parameter"),
        ({"objectives": [Objective(), Objective("acc")]}, "exactly one metric, got 2"),
        ({"trial_config": TrialConfig(max_failed_trials=2)}, "trial_config.max_failed_trials: the OptimizationJob"),
        ({"trial_config": TrialConfig(num_trials=2, parallel_trials=3)}, "parallelTrials cannot exceed numTrials"),
        ({"algorithm": GridSearch()}, "Grid search requires all parameters to be Categorical"),
        ({"objectives": [Objective("loss", "up")]}, "direction must be maximize or minimize"),
        ({"search_space": {"x": 0.1}}, r"search_space\['x'\]: expected Search.uniform"),
        ({"search_space": {"x": Search.uniform(1, 1)}}, "min must be strictly less than max"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"search_space": {"lr": Search.uniform(0.1, 1)}, **kwargs}
    with pytest.raises(ValueError, match=message):
        optimization_job("o", TRIAL_SPEC, **args)


def test_tpe_median_stopping_and_suspend_are_asked_for_by_argument() -> None:
    space = {"lr": Search.loguniform(1e-4, 0.1)}
    spec = spec_of(
        optimization_job(
            "o",
            TRIAL_SPEC,
            space,
            algorithm=TPESearch(random_state=7, n_startup_trials=4),
            early_stopping=MedianStopping(start_step=20, min_trials=2),
            suspend=True,
        )
    )
    assert spec["searchAlgorithm"] == {"tpe": {"seed": 7, "nStartupTrials": 4}}
    assert spec["pruneAlgorithm"] == {"median": {"startStep": 20, "minTrials": 2}}
    assert spec["suspend"] is True
    plain = spec_of(optimization_job("o", TRIAL_SPEC, space, algorithm=TPESearch(), early_stopping=MedianStopping()))
    # The API's defaults (nStartupTrials 10, startStep 0, minTrials 3) are filled by the model.
    assert plain["searchAlgorithm"] == {"tpe": {"nStartupTrials": 10}}
    assert plain["pruneAlgorithm"] == {"median": {"startStep": 0, "minTrials": 3}}
    assert plain.get("suspend") is False
    with pytest.raises(ValueError, match=r"early_stopping: .* use MedianStopping"):
        optimization_job("o", TRIAL_SPEC, space, early_stopping="hyperband")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"minTrials|min_trials"):
        optimization_job("o", TRIAL_SPEC, space, early_stopping=MedianStopping(min_trials=0))


def test_a_suspended_search_says_suspended_until_it_finishes() -> None:
    suspended = {"type": "Suspended", "status": "True", "reason": "Suspended", "message": "m"}
    held: dict[str, Any] = {"trials": 1, "conditions": [suspended]}
    assert optimization_status(job(held)) == "Suspended"
    resumed = {
        "trials": 1,
        "conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed", "message": "m"}],
    }
    assert optimization_status(job(resumed)) == "Running"
    done = {**held, "conditions": [suspended, {"type": "Complete", "status": "True", "reason": "R"}]}
    assert optimization_status(job(done)) == "Complete"


def test_decimals_are_the_crds_doubles() -> None:
    assert [decimal(v) for v in (0.001, 1e-5, 5, 2.0, -3.5, "7")] == ["0.001", "1e-05", "5", "2", "-3.5", "7"]
    with pytest.raises(ValueError, match="finite"):
        decimal(float("inf"))


def job(status: dict[str, Any] | None = None) -> OptimizationJob:
    obj = {
        "metadata": {"name": "o", "namespace": "default"},
        "spec": spec_of(optimization_job("o", TRIAL_SPEC, {"lr": Search.uniform(0.1, 1)}, trial_config=TrialConfig(3))),
        **({"status": status} if status else {}),
    }
    return OptimizationJob.model_validate(obj)


def trainjob(index: int, loss: str | None = None, failed: bool = False) -> TrainJob:
    status: dict[str, Any] = {}
    if loss:
        status["trainerStatus"] = {
            "lastUpdatedTime": "2026-01-01T00:00:00Z",
            "metrics": [{"name": "loss", "value": loss}],
        }
    if failed:
        status["conditions"] = [{"type": "Failed", "status": "True", "reason": "JobFailed", "message": "x"}]
    return TrainJob.model_validate(
        {
            "metadata": {
                "name": f"o-trial-{index}",
                "labels": {"trainer.kubeflow.org/trial-index": str(index)},
                "annotations": {
                    "trainer.kubeflow.org/trial-parameters": json.dumps([{"name": "lr", "value": f"0.{index + 1}"}])
                },
            },
            "spec": TRIAL_SPEC,
            "status": status,
        }
    )


def test_status_and_trials_merge_the_trainjobs_with_the_recorded_results() -> None:
    assert optimization_status(job()) == "Created"
    status = {
        "trials": 3,
        "result": {"trainJobName": "o-trial-0", "parameters": [{"name": "lr", "value": "0.1"}]},
        "trialResults": [
            {"name": "o-trial-0", "state": "Succeeded", "value": "0.2"},
            {"name": "o-trial-1", "state": "Failed", "message": "deleted"},
        ],
    }
    running = job(status)
    assert optimization_status(running) == "Running"
    # trial 0's TrainJob is gone: its outcome and (being the best) its parameters stay
    trials = trials_of(running, [trainjob(2, "0.7"), trainjob(1)])
    assert [(t.index, t.name, t.state, t.parameters, t.objective) for t in trials] == [
        (0, "o-trial-0", "Succeeded", {"lr": "0.1"}, "0.2"),
        (1, "o-trial-1", "Failed", {"lr": "0.2"}, None),
        (2, "o-trial-2", "Running", {"lr": "0.3"}, "0.7"),
    ]
    assert trials[1].message == "deleted" and trials[0].trainjob is None
    best = best_trial(running, trials)
    assert best is not None and best.name == "o-trial-0"
    assert trials_of(job({"trials": 1}), [trainjob(0, failed=True)])[0].state == "Failed"
    for type_, expected in (("Complete", "Complete"), ("Failed", "Failed")):
        done = job({**status, "conditions": [{"type": type_, "status": "True", "reason": "R", "message": "m"}]})
        assert optimization_status(done) == expected


def fit(lr: str, batch_size: str = "8") -> None:
    print(f"lr={lr} batch_size={batch_size}")


def fit_any(**kwargs: str) -> None:
    print(sorted(kwargs.items()))


def fit_nothing() -> None:
    print("reads the environment itself")


def test_a_function_gets_the_parameters_it_takes_as_arguments_read_where_the_trial_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["lr", "batch_size", "layers"]
    trainer = with_parameters(CustomTrainer(func=fit, func_args={"batch_size": "4"}), names)
    assert set(trainer.func_args) == {"lr", "batch_size"}  # layers: fit does not take it
    source = function_source(trainer.func, trainer.func_args)
    assert source.endswith(
        "fit(**{'batch_size': __import__('os').environ['KUBEFLOW_TRAINER_OPT_BATCH_SIZE'], "
        "'lr': __import__('os').environ['KUBEFLOW_TRAINER_OPT_LR']})\n"
    )
    monkeypatch.setenv("KUBEFLOW_TRAINER_OPT_LR", "0.01")
    monkeypatch.setenv("KUBEFLOW_TRAINER_OPT_BATCH_SIZE", "32")
    monkeypatch.setenv("KUBEFLOW_TRAINER_OPT_LAYERS", "3")
    exec(compile(source, "trial", "exec"), {})  # what the trial's pod runs
    assert capsys.readouterr().out == "lr=0.01 batch_size=32\n"
    every = with_parameters(CustomTrainer(func=fit_any), names)
    exec(compile(function_source(every.func, every.func_args), "trial", "exec"), {})
    assert capsys.readouterr().out == "[('batch_size', '32'), ('layers', '3'), ('lr', '0.01')]\n"
    alone = CustomTrainer(func=fit_nothing)
    assert with_parameters(alone, names) is alone
    container = CustomTrainerContainer(image="busybox")
    assert with_parameters(container, names) is container


async def test_suspend_and_resume_set_the_jobs_suspend() -> None:
    kube = RecordingKube()
    stored = job().to_dict()
    kube.put({**stored, "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob"})
    client = AsyncTrainerClient(kube, "default")  # type: ignore[arg-type]
    await client.suspend_optimization_job("o")
    assert (await client.get_optimization_job("o")).spec.suspend is True
    await client.resume_optimization_job("o")
    assert (await client.get_optimization_job("o")).spec.suspend is False
