"""The CRD schemas spell every field as upstream does: for each type upstream defines (Trainer v2.3's
TrainingRuntime and TrainJob, JobSet v0.12's spec), the generated schema's property names equal
upstream's JSON names, plus only the fields named here as carried over from earlier upstream
versions or added on purpose.

``tests/data/upstream_fields.json`` lists upstream's JSON names per type, read from
kubeflow/trainer ``pkg/apis/trainer/v1alpha1`` (v2.3.0) and kubernetes-sigs/jobset
``api/jobset/v1alpha2`` (v0.12.0).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from trainer.api import crd
from trainer.api import jobset_v1alpha2 as js
from trainer.api import trainer_v1alpha1 as tv1

UPSTREAM = json.loads((Path(__file__).resolve().parent.parent / "data" / "upstream_fields.json").read_text())

MODELS: dict[str, type[BaseModel]] = {
    # kubeflow/trainer v2.3.0
    "TrainingRuntimeSpec": tv1.TrainingRuntimeSpec,
    "JobSetTemplateSpec": tv1.JobSetTemplateSpec,
    "PodGroupPolicy": tv1.PodGroupPolicy,
    "CoschedulingPodGroupPolicySource": tv1.CoschedulingPodGroupPolicySource,
    "VolcanoPodGroupPolicySource": tv1.VolcanoPodGroupPolicySource,
    "MLPolicy": tv1.MLPolicy,
    "TorchMLPolicySource": tv1.TorchMLPolicySource,
    "EnvInjection": tv1.EnvInjection,
    "EnvInjectionTarget": tv1.EnvInjectionTarget,
    "JAXMLPolicySource": tv1.JAXMLPolicySource,
    "XGBoostMLPolicySource": tv1.XGBoostMLPolicySource,
    "MPIMLPolicySource": tv1.MPIMLPolicySource,
    "FluxMLPolicySource": tv1.FluxMLPolicySource,
    "TrainJobSpec": tv1.TrainJobSpec,
    "RuntimeRef": tv1.RuntimeRef,
    "Initializer": tv1.Initializer,
    "DatasetInitializer": tv1.DatasetInitializer,
    "ModelInitializer": tv1.ModelInitializer,
    "Trainer": tv1.Trainer,
    "RuntimePatch": tv1.RuntimePatch,
    "TrainingRuntimeSpecPatch": tv1.TrainingRuntimeSpecPatch,
    "JobSetTemplatePatch": tv1.JobSetTemplatePatch,
    "JobSetSpecPatch": tv1.JobSetSpecPatch,
    "ReplicatedJobPatch": tv1.ReplicatedJobPatch,
    "JobTemplatePatch": tv1.JobTemplatePatch,
    "JobSpecPatch": tv1.JobSpecPatch,
    "PodTemplatePatch": tv1.PodTemplatePatch,
    "PodSpecPatch": tv1.PodSpecPatch,
    "ContainerPatch": tv1.ContainerPatch,
    "TrainJobStatus": tv1.TrainJobStatus,
    "JobStatus": tv1.JobStatus,
    "TrainerStatus": tv1.TrainerStatus,
    "Metric": tv1.Metric,
    # kubernetes-sigs/jobset v0.12.0
    "JobSetSpec": js.JobSetSpec,
    "ReplicatedJob": js.ReplicatedJob,
    "DependsOn": js.DependsOn,
    "Network": js.Network,
    "FailurePolicyRule": js.FailurePolicyRule,
    "FailurePolicy": js.FailurePolicy,
    "SuccessPolicy": js.SuccessPolicy,
    "StartupPolicy": js.StartupPolicy,
    "Coordinator": js.Coordinator,
    "VolumeClaimPolicy": js.VolumeClaimPolicy,
    "VolumeRetentionPolicy": js.VolumeRetentionPolicy,
}

EXTRA: dict[str, set[str]] = {
    # Trainer v2.0-v2.1 fields, still written by Kueue 0.14-0.16 and older SDKs (README: API).
    # and KEP-2899's ttlSecondsAfterFinished (proposed, kubeflow/trainer#3824 and #4052).
    "TrainJobSpec": {"labels", "annotations", "podSpecOverrides", "podTemplateOverrides", "ttlSecondsAfterFinished"},
    # Trainer v2.0-v2.1: numProcPerNode (auto/cpu/gpu/int, resolved); elasticPolicy (KEP-2903, ahead of upstream).
    "TorchMLPolicySource": {"numProcPerNode", "elasticPolicy"},
    # JobSet's restart counters, which a TrainJob has no other place for; KEP-2899's times (proposed,
    # kubeflow/trainer#3824 and #4052).
    # The TrainJob's /scale (replicas, selector) and an elastic TrainJob's bounds (KEP-2903, ahead of upstream).
    "TrainJobStatus": {
        "restarts",
        "restartsCountTowardsMax",
        "replicatedJobsStatus",
        "startTime",
        "completionTime",
        "replicas",
        "selector",
        "elastic",
    },
    # KEP-2899 as proposed (kubeflow/trainer#3824 and #4052) and KEP-3015's Workload API block
    # (kubeflow/trainer#3219): not in a release yet.
    "TrainingRuntimeSpec": {"runPolicy", "scheduling"},
    # KEP-2782 (DRA, proposals/2782-dra-support; kubeflow/trainer#4027, open): not in a release yet.
    "Trainer": {"resourceClaimsPerNode"},
    "PodSpecPatch": {"resourceClaims"},
    "ContainerPatch": {"resources"},
    # The trainer's last checkpoint: ours, not in KEP-2779 (docs/progress.md "Checkpoints").
    "TrainerStatus": {"lastCheckpoint"},
}


def upstream_types() -> list[tuple[str, list[str]]]:
    return [(name, fields) for part in UPSTREAM.values() for name, fields in part["types"].items()]


def test_every_upstream_type_is_modelled() -> None:
    assert sorted(MODELS) == sorted(name for name, _ in upstream_types())


@pytest.mark.parametrize(("name", "fields"), upstream_types(), ids=[n for n, _ in upstream_types()])
def test_schema_property_names_are_upstreams(name: str, fields: list[str]) -> None:
    properties = set(crd.model_schema(MODELS[name]).get("properties") or {})
    assert sorted(set(fields) - properties) == [], f"{name}: upstream fields missing (they would be pruned)"
    assert sorted(properties - set(fields)) == sorted(EXTRA.get(name, set())), f"{name}: fields upstream lacks"


def test_the_checked_in_crd_keeps_jobsets_spelling() -> None:
    path = crd.CRD_DIR / "trainer.kubeflow.org_clustertrainingruntimes.yaml"
    schema = yaml.safe_load(path.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jobset = schema["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"]
    assert set(jobset) == set(UPSTREAM["jobset"]["types"]["JobSetSpec"])
    assert "enableDNSHostnames" in jobset["network"]["properties"]
    assert "enableDnsHostnames" not in jobset["network"]["properties"]
