"""The OptimizationJob API (:mod:`trainer.api.optimizationjob`): its CRD field for field with kubeflow/trainer
``pkg/apis/trainer/v1alpha1/optimizationjob_types.go`` (master, KEP-3562) with upstream's CEL rules and
messages, and the model's validators, which repeat those rules for objects read without an apiserver."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tests.tooling.test_crd import schema_of, walk
from trainer.api import optimizationjob as opt
from trainer.api.kinds import OPTIMIZATION_JOBS

# Upstream's JSON names per type (optimizationjob_types.go on kubeflow/trainer master 8c0f5059b).
UPSTREAM = {
    "spec": ["objectives", "searchAlgorithm", "parameters", "numTrials", "parallelTrials", "trainJobTemplate"],
    "spec.objectives.[]": ["metric", "direction"],
    "spec.searchAlgorithm": ["random", "grid"],
    "spec.searchAlgorithm.random": ["seed"],
    "spec.parameters.[]": ["name", "searchSpace"],
    "spec.parameters.[].searchSpace": ["uniform", "logUniform", "categorical"],
    "spec.parameters.[].searchSpace.uniform": ["min", "max", "type"],
    "spec.parameters.[].searchSpace.logUniform": ["min", "max", "type"],
    "spec.parameters.[].searchSpace.categorical": ["choices"],
    "spec.trainJobTemplate": ["metadata", "spec"],
    "status.result": ["trainJobName", "parameters"],
    "status.result.parameters.[]": ["name", "value"],
}
OURS_IN_STATUS = {"trials", "trialsRunning", "trialsSucceeded", "trialsFailed", "trialsEarlyStopped", "trialResults"}
OURS = {"spec": ["pruneAlgorithm", "suspend"], "spec.searchAlgorithm": ["tpe"]}
"""Fields ahead of upstream (KEP-3562 Phase 2: TPE, ``pruneAlgorithm``, ``suspend``)."""


def schema() -> dict[str, Any]:
    return schema_of(OPTIMIZATION_JOBS.plural)


ROOT = schema()["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("path", sorted(UPSTREAM))
def test_every_type_has_upstreams_fields_and_no_other(path: str) -> None:
    assert sorted(walk(ROOT, path).get("properties") or {}) == sorted(UPSTREAM[path] + OURS.get(path, []))


def test_status_has_upstreams_conditions_and_result_plus_the_trial_counts() -> None:
    status = walk(ROOT, "status")
    assert set(status["properties"]) == {"conditions", "result"} | OURS_IN_STATUS
    conditions = status["properties"]["conditions"]
    assert conditions["maxItems"] == 100 and conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert walk(status, "result")["required"] == ["trainJobName"]
    assert walk(status, "result.trainJobName")["maxLength"] == 63


def test_spec_rules_are_upstreams_verbatim_but_suspend_can_change() -> None:
    spec = walk(ROOT, "spec")
    assert ROOT["required"] == ["spec"]
    assert sorted(spec["required"]) == ["objectives", "parameters", "trainJobTemplate"]
    immutable = spec["x-kubernetes-validations"][0]
    assert immutable["message"] == (
        "OptimizationJobSpec is immutable and cannot be updated after creation: only spec.suspend can change after "
        "creation"
    )
    # Every field but suspend compared (upstream's rule is self == oldSelf; suspend is ours).
    for f in set(walk(ROOT, "spec")["properties"]) - {"suspend"}:
        assert f"self.{f} == oldSelf.{f}" in immutable["rule"], f
    assert "suspend" not in immutable["rule"]
    assert spec["x-kubernetes-validations"][1:] == [
        {"rule": "self.parallelTrials <= self.numTrials", "message": "parallelTrials cannot exceed numTrials"},
        {
            "rule": "!has(self.searchAlgorithm.grid) || self.parameters.all(p, has(p.searchSpace.categorical))",
            "message": "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not "
            "supported.",
        },
    ]
    algorithm = walk(spec, "searchAlgorithm")
    assert algorithm["default"] == {"random": {}}
    assert algorithm["x-kubernetes-validations"] == [
        {
            "rule": "[has(self.random),has(self.grid),has(self.tpe)].filter(x,x==true).size() == 1",
            "message": "exactly one of the fields in [random grid tpe] must be set",
        }
    ]
    space = walk(spec, "parameters.[].searchSpace")
    assert space["x-kubernetes-validations"][0]["message"] == (
        "exactly one of the fields in [uniform logUniform categorical] must be set"
    )
    assert walk(space, "logUniform")["x-kubernetes-validations"] == [
        {"rule": "double(self.min) > 0.0", "message": "min must be strictly greater than 0"},
        {"rule": "double(self.min) < double(self.max)", "message": "min must be strictly less than max"},
    ]
    assert walk(space, "uniform")["x-kubernetes-validations"] == [
        {"rule": "double(self.min) < double(self.max)", "message": "min must be strictly less than max"}
    ]
    assert walk(spec, "trainJobTemplate.metadata")["x-kubernetes-validations"] == [
        {
            "rule": "!has(self.name) && !has(self.namespace)",
            "message": "name and namespace cannot be set in a template.",
        }
    ]


def test_bounds_defaults_and_enums_are_upstreams() -> None:
    spec = walk(ROOT, "spec")
    for name in ("numTrials", "parallelTrials"):
        assert {k: walk(spec, name)[k] for k in ("default", "minimum", "maximum")} == {
            "default": 1,
            "minimum": 1,
            "maximum": 100,
        }
    objectives = walk(spec, "objectives")
    assert (objectives["minItems"], objectives["maxItems"], objectives["x-kubernetes-list-map-keys"]) == (
        1,
        1,
        ["metric"],
    )
    assert walk(spec, "objectives.[].direction")["enum"] == ["Maximize", "Minimize"]
    assert walk(spec, "objectives.[].direction")["default"] == "Minimize"
    assert walk(spec, "parameters")["maxItems"] == 100
    assert walk(spec, "searchAlgorithm.random.seed")["format"] == "int64"
    uniform = walk(spec, "parameters.[].searchSpace.uniform")
    assert walk(uniform, "min")["pattern"] == r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
    assert walk(uniform, "min")["maxLength"] == 64 and walk(uniform, "type")["enum"] == ["Int", "Float"]
    assert walk(uniform, "type")["default"] == "Float"
    choices = walk(spec, "parameters.[].searchSpace.categorical.choices")
    assert choices["items"] == {"type": "string", "maxLength": 64} and choices["x-kubernetes-list-type"] == "set"
    # The template's spec is the TrainJob's, with its own rules.
    assert walk(spec, "trainJobTemplate.spec.runtimeRef")["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"


def test_the_crd_serves_status_and_prints_the_search() -> None:
    version = schema()
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Complete", "Failed", "Trials", "Parallel", "Succeeded", "Best", "Age"]


def job(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "objectives": [{"metric": "loss"}],
        "parameters": [{"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "0.1"}}}],
        "trainJobTemplate": {"spec": {"runtimeRef": {"name": "torch"}}},
    }
    return {"metadata": {"name": "o"}, "spec": {**base, **spec}}


def categorical(name: str, *choices: str) -> dict[str, Any]:
    return {"name": name, "searchSpace": {"categorical": {"choices": list(choices)}}}


def test_a_valid_job_parses_with_upstreams_defaults() -> None:
    spec = opt.OptimizationJob.model_validate(job()).spec
    assert (spec.num_trials, spec.parallel_trials, spec.objectives[0].direction) == (1, 1, "Minimize")
    assert spec.parameters[0].search_space.log_uniform is not None
    assert spec.parameters[0].search_space.log_uniform.type == "Float"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"numTrials": 2, "parallelTrials": 3}, "spec: parallelTrials cannot exceed numTrials"),
        (
            {"searchAlgorithm": {"grid": {}}},
            "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported.",
        ),
        ({"searchAlgorithm": {"grid": {}, "random": {}}}, "exactly one of the fields in [random grid tpe] must be set"),
        ({"searchAlgorithm": {}}, "exactly one of the fields in [random grid tpe] must be set"),
        (
            {"parameters": [{"name": "x", "searchSpace": {}}]},
            "spec.parameters[x].searchSpace: exactly one of the fields in [uniform logUniform categorical]",
        ),
        (
            {"parameters": [{"name": "x", "searchSpace": {"uniform": {"min": "1", "max": "1"}}}]},
            "spec.parameters[x].searchSpace.uniform: min must be strictly less than max",
        ),
        (
            {"parameters": [{"name": "x", "searchSpace": {"logUniform": {"min": "0", "max": "1"}}}]},
            "spec.parameters[x].searchSpace.logUniform: min must be strictly greater than 0",
        ),
        (
            {"parameters": [{"name": "x", "searchSpace": {"uniform": {"min": "0.1", "max": "0.9", "type": "Int"}}}]},
            "type Int needs an integer between min and max",
        ),
        (
            {"parameters": [categorical("learning-rate", "a"), categorical("learning_rate", "b")]},
            "KUBEFLOW_TRAINER_OPT_LEARNING_RATE is that of parameter 'learning-rate'",
        ),
        ({"parameters": [categorical("x", "a", "a")]}, "duplicate choices"),
        ({"parameters": [categorical("x", "a", "")]}, "an empty choice cannot be a trial's value"),
        (
            {"trainJobTemplate": {"metadata": {"name": "t"}, "spec": {"runtimeRef": {"name": "torch"}}}},
            "name and namespace cannot be set in a template.",
        ),
        ({"objectives": []}, "objectives"),
        ({"objectives": [{"metric": "a"}, {"metric": "b"}]}, "objectives"),
        ({"numTrials": 101}, "spec.numTrials"),
        ({"parameters": [{"name": "x", "searchSpace": {"uniform": {"min": "1.", "max": "2"}}}]}, "pattern"),
    ],
)
def test_the_model_refuses_what_the_crd_refuses_naming_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as e:
        opt.OptimizationJob.model_validate(job(**spec))
    assert message in str(e.value)


def test_env_names_follow_the_kep() -> None:
    assert opt.env_name("lr") == "KUBEFLOW_TRAINER_OPT_LR"
    assert opt.env_name("batch-size.v2") == "KUBEFLOW_TRAINER_OPT_BATCH_SIZE_V2"


def test_grid_of_categoricals_and_integer_ranges_parse() -> None:
    spec = opt.OptimizationJob.model_validate(
        job(searchAlgorithm={"grid": {}}, parameters=[categorical("bs", "16", "32")], numTrials=2, parallelTrials=2)
    ).spec
    assert spec.search_algorithm is not None and spec.search_algorithm.grid is not None
    ranged = opt.UniformSpace(min="0.5", max="3.5", type="Int")
    assert opt.int_bounds(ranged) == (1, 3)
