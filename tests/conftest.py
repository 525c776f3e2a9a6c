"""Shared fixtures of the fast tests: the sample runtime and TrainJob, parsed as the API models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from trainer.trainjob.runtime.expand import expand
from trainer.trainjob.runtime.view import TrainJobView
from trainer.trainjob.spec.injection import Injection

SAMPLES = Path(__file__).resolve().parent.parent / "config" / "samples"


def info(
    job: TrainJob,
    runtime: ClusterTrainingRuntime | TrainingRuntime,
    observed: list[dict[str, Any]] | None = None,
    gang: str = "none",
    injection: Injection | None = None,
) -> TrainJobView:
    """``job`` on ``runtime`` with these observed Jobs (its runtime info and attempt), as a reconcile
    derives it."""
    obj = job.to_dict() | {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}
    return expand(obj, job, runtime.spec, runtime.to_dict(), observed or [], gang=gang, injection=injection)


def runtime_patch(pod_spec: dict[str, Any], rjob: str = "node", manager: str = "user") -> dict[str, Any]:
    """A ``runtimePatches`` entry by ``manager`` patching the Pod spec of replicated job ``rjob`` with ``pod_spec``."""
    pod = {"template": {"spec": {"template": {"spec": pod_spec}}}}
    rjobs = [{"name": rjob, **pod}]
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": rjobs}}}}


def load_sample(name: str) -> dict[str, Any]:
    """A sample manifest from config/samples as a dict."""
    data: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return data


@pytest.fixture
def runtime() -> ClusterTrainingRuntime:
    return ClusterTrainingRuntime.model_validate(load_sample("torch-distributed.yaml"))


@pytest.fixture
def trainjob() -> TrainJob:
    obj = load_sample("trainjob.yaml")
    obj["metadata"]["uid"] = "uid-1"
    return TrainJob.model_validate(obj)


def multi_step_runtime() -> ClusterTrainingRuntime:
    """A runtime with an initializer that the trainer depends on, like upstream's torch runtimes."""
    return ClusterTrainingRuntime.model_validate(
        {
            "metadata": {"name": "with-init"},
            "spec": {
                "mlPolicy": {"numNodes": 3, "torch": {"numProcPerNode": 2}},
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "dataset-initializer",
                                "template": {
                                    "metadata": {
                                        "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}
                                    },
                                    "spec": {
                                        "template": {
                                            "spec": {"containers": [{"name": "dataset-initializer", "image": "init"}]}
                                        }
                                    },
                                },
                            },
                            {
                                "name": "node",
                                "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
                                "template": {
                                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                    "spec": {
                                        "template": {
                                            "spec": {
                                                "containers": [
                                                    {
                                                        "name": "node",
                                                        "image": "train",
                                                        "env": [{"name": "A", "value": "1"}],
                                                    },
                                                    {"name": "sidecar", "image": "side"},
                                                ]
                                            }
                                        }
                                    },
                                },
                            },
                        ]
                    }
                },
            },
        }
    )
