"""An OptimizationJob's metrics on the recording double of ``Kube`` wired by the real manager:
``kubeflow_trainer_jobs{kind="OptimizationJob"}`` by state (``Running`` while a trial runs) and
``kubeflow_trainer_optimizationjob_best_objective{namespace,name,metric}`` following the best trial, gone
with the job."""

from __future__ import annotations

from tests.jobs.test_lifecycle_metrics import states, value
from tests.optimizationjob.test_controller import Cluster, optimization_job
from trainer.api.kinds import OPTIMIZATION_JOBS
from trainer.api.optimizationjob import best_objective
from trainer.framework.metrics import Metrics

BEST = "kubeflow_trainer_optimizationjob_best_objective"


def best(m: Metrics) -> float | None:
    return m.registry.get_sample_value(BEST, {"namespace": "default", "name": "o", "metric": "loss"})


async def test_states_and_the_best_objective_follow_the_trials() -> None:
    c = Cluster(optimization_job())
    m = c.manager.metrics
    await c.settle()
    assert states(m, "OptimizationJob") == {"Created": 0, "Suspended": 0, "Running": 1, "Complete": 0, "Failed": 0}
    assert best(m) is None, "no trial reported yet"
    c.finish("o-trial-0", "0.5")
    await c.settle()
    assert best(m) == 0.5
    c.finish("o-trial-1", "0.25")
    await c.settle()
    assert best(m) == 0.25
    for name in ("o-trial-2", "o-trial-3"):
        c.finish(name, "0.9")
        await c.settle()
    assert states(m, "OptimizationJob")["Complete"] == 1 and best(m) == 0.25
    assert value(m, f"{BEST}_dropped", {}) == 0
    await c.kube.delete(OPTIMIZATION_JOBS, "default", "o")
    assert best(m) is None


def test_the_best_objective_is_read_from_the_result_and_its_trial() -> None:
    obj = optimization_job()
    assert best_objective(obj) is None
    obj["status"] = {
        "result": {"trainJobName": "o-trial-1"},
        "trialResults": [{"name": "o-trial-0", "value": "0.1"}, {"name": "o-trial-1", "value": "0.3"}],
    }
    assert best_objective(obj) == ("loss", 0.3)
    obj["status"]["trialResults"][1]["value"] = "nan"
    assert best_objective(obj) is None
