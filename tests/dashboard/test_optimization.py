"""An OptimizationJob's dashboard page over the recording double of the Kube interface: linked from the jobs
page, its trials table (index, state, parameters, objective), the best trial, every trial's objective
curve on one plot (sampled while viewed, or from Prometheus) and the objective by trial index; the
PromQL of the trials' series; nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from tests.kube_double import RecordingKube
from trainer.api.optimizationjob import OptimizationJob
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client import AsyncTrainerClient
from trainer.client.optimize import trials_of
from trainer.dashboard import render
from trainer.dashboard.gather import OptimizationDetail, trials_query
from trainer.dashboard.samples import Samples
from trainer.dashboard.server import Dashboard
from trainer.framework.json_codec import JSON

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def search() -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": {
            "name": "tune",
            "namespace": "team-a",
            "uid": "uid-tune",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "objectives": [{"metric": "loss", "direction": "Minimize"}],
            "parameters": [{"name": "lr", "searchSpace": {"uniform": {"min": "0.1", "max": "1"}}}],
            "numTrials": 3,
            "parallelTrials": 2,
            "trainJobTemplate": {"spec": {"runtimeRef": {"name": "torch-distributed"}}},
        },
        "status": {
            "trials": 3,
            "trialsRunning": 1,
            "trialsSucceeded": 1,
            "trialsFailed": 1,
            "result": {"trainJobName": "tune-trial-0", "parameters": [{"name": "lr", "value": "0.5"}]},
            "trialResults": [
                {"name": "tune-trial-0", "state": "Succeeded", "value": "0.25"},
                {"name": "tune-trial-1", "state": "Failed", "message": "finished without loss <script>"},
            ],
        },
    }


def trial(index: int, loss: str | None) -> JSON:
    status: dict[str, Any] = {}
    if loss is not None:
        status["trainerStatus"] = {
            "lastUpdatedTime": "2026-01-01T00:05:00Z",
            "metrics": [{"name": "loss", "value": loss}],
        }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": f"tune-trial-{index}",
            "namespace": "team-a",
            "labels": {
                "trainer.kubeflow.org/optimizationjob-name": "tune",
                "trainer.kubeflow.org/trial-index": str(index),
            },
            "annotations": {
                "trainer.kubeflow.org/trial-parameters": json.dumps([{"name": "lr", "value": f"0.{index + 5}"}])
            },
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "OptimizationJob",
                    "name": "tune",
                    "uid": "uid-tune",
                    "controller": True,
                }
            ],
        },
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": status,
    }


def kube_with_a_search() -> RecordingKube:
    kube = RecordingKube()
    for obj in (search(), trial(0, "0.25"), trial(1, None), trial(2, "0.8")):
        kube.put(obj)
    return kube


async def test_the_jobs_page_links_the_search_and_its_page_shows_trials_best_and_plots() -> None:
    kube = kube_with_a_search()
    board = Dashboard(AsyncTrainerClient(kube, "team-a"), samples=Samples(gap=0))  # type: ignore[arg-type]
    async with TestClient(TestServer(board.app())) as http:
        jobs = await (await http.get("/")).text()
        assert 'id="searches"' in jobs and '<a href="/jobs/team-a/optimizationjobs/tune">tune</a>' in jobs
        assert "tune-trial-0 (loss=0.25)" in jobs
        page = await http.get("/jobs/team-a/optimizationjobs/tune")
        text = await page.text()
        assert page.status == 200
        assert 'id="best">tune-trial-0 (loss=0.25)' in text and "lr=0.5" in text
        assert text.count('class="trial') == 3 and 'class="trial best" data-name="tune-trial-0"' in text
        assert '<a href="/jobs/team-a/trainjobs/tune-trial-2">tune-trial-2</a>' in text
        assert "finished without loss &lt;script&gt;" in text and "<script>" not in text
        # one sample of the running trial: a point, no line over time yet
        assert 'data-plot="loss by trial"' in text and text.count("<polyline") == 2
        by_index = text.split('data-plot="loss by trial"')[1]
        assert "trial 0" in by_index and "trial 2" in by_index
        running = trial(2, "0.6")
        kube.put(running)
        assert await board.sample_once() == 1
        again = await (await http.get("/jobs/team-a/optimizationjobs/tune")).text()
        assert 'data-line="tune-trial-2"' in again
        assert (await http.get("/jobs/team-b/optimizationjobs/tune")).status == 404
        assert (await http.get("/jobs/team-a/optimizationjobs/nope")).status == 404
    assert kube.writes == []


def test_every_trial_is_a_line_of_one_plot_and_without_series_a_note_says_so() -> None:
    job = OptimizationJob.model_validate(search())
    trials = trials_of(job, [TrainJob.model_validate(trial(i, v)) for i, v in ((0, "0.25"), (2, "0.8"))])
    detail = OptimizationDetail(job, trials)
    series = {"tune-trial-0": [(1.0, 0.9), (2.0, 0.25)], "tune-trial-2": [(1.5, 1.0), (3.0, 0.8)]}
    html = render.optimization_page(detail, series, "from tests", 0, NOW)
    over_time = html.split('data-plot="loss over time"')[1].split("</svg>")[0]
    assert over_time.count("<polyline") == 2 and 'data-line="tune-trial-0"' in over_time
    assert 'class="legend"' in html and 'id="no-series"' not in html
    bare = render.optimization_page(detail, {}, "from tests", 0, NOW)
    assert 'id="no-series"' in bare and 'data-plot="loss over time"' not in bare
    assert 'data-plot="loss by trial"' in bare


def test_the_trials_query_selects_the_objective_of_the_jobs_trials_only() -> None:
    assert trials_query("team-a", "tune.v2", "loss") == (
        'max by (trainjob) (kubeflow_trainer_trainjob_metric{namespace="team-a",'
        'trainjob=~"tune\\\\.v2-trial-[0-9]+",metric="loss"})'
    )


def test_the_page_shows_a_held_search_its_algorithms_and_the_trials_stopped_early() -> None:
    obj = search()
    obj["spec"] |= {
        "searchAlgorithm": {"tpe": {"seed": 7, "nStartupTrials": 4}},
        "pruneAlgorithm": {"median": {"startStep": 20, "minTrials": 2}},
        "suspend": True,
    }
    obj["status"] |= {
        "trialsFailed": 0,
        "trialsEarlyStopped": 1,
        "conditions": [{"type": "Suspended", "status": "True", "reason": "Suspended", "message": "the search is held"}],
        "trialResults": [
            {"name": "tune-trial-0", "state": "Succeeded", "value": "0.25"},
            {"name": "tune-trial-1", "state": "EarlyStopped", "message": "loss=3.0 at 60% progress is worse"},
        ],
    }
    job = OptimizationJob.model_validate(obj)
    detail = OptimizationDetail(job, trials_of(job, [TrainJob.model_validate(trial(i, None)) for i in (1, 2)]))
    html = render.optimization_page(detail, {}, "from tests", 0, NOW)
    assert '<td class="state state-Suspended">Suspended</td>' in html
    assert 'id="counts">3/3 created; 1 succeeded, 0 failed, 1 stopped early, 1 running' in html
    assert 'id="algorithm">tpe (seed 7, 4 startup trials)' in html
    assert 'id="early-stopping">median (from 20% progress, after 2 succeeded trials)' in html
    stopped = html.split('data-name="tune-trial-1"')[1].split("</tr>")[0]
    assert 'class="state state-EarlyStopped">EarlyStopped' in stopped and "loss=3.0 at 60% progress" in stopped
    foreign = {"tune-trial-9": [(1.0, 0.5), (2.0, 0.4)], "tune-trial-2": [(1.0, 0.9), (2.0, 0.8)]}
    drawn = render.optimization_page(detail, foreign, "from tests", 0, NOW)
    assert 'data-line="tune-trial-2"' in drawn and "tune-trial-9" not in drawn  # not one of its trials
    plain = render.optimization_page(OptimizationDetail(OptimizationJob.model_validate(search())), {}, "", 0, NOW)
    assert 'id="algorithm">random<' in plain and 'id="early-stopping">none<' in plain
