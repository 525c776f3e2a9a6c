"""Admission of OptimizationJobs (trainer/webhook/optimization.py): the name leaves room for the trials'
names, the template is checked as its trials' TrainJobs would be, the template cannot claim what the
controller sets on a trial, the parameters meet the template, and the bounds hold."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.webhook.test_admission import facts
from trainer.api.optimizationjob import MAX_GRID_POINTS, OptimizationJob
from trainer.framework.json_codec import JSON
from trainer.webhook.optimization import max_name_length, validate_optimizationjob
from trainer.webhook.rules import Verdict
from trainer.webhook.server import VALIDATE, WebhookServer, review_response

LR = {"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "0.1"}}}


def optj(name: str = "tune", meta: JSON | None = None, template: JSON | None = None, **spec: Any) -> JSON:
    """An OptimizationJob over ClusterTrainingRuntime torch-distributed (the one :func:`facts` knows)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": {"name": name, "namespace": "ns", **(meta or {})},
        "spec": {
            "objectives": [{"metric": "loss"}],
            "parameters": [LR],
            "numTrials": 12,
            "trainJobTemplate": {"spec": {"runtimeRef": {"name": "torch-distributed"}}, **(template or {})},
            **spec,
        },
    }


def admit(obj: JSON, old: JSON | None = None, **kw: Any) -> Verdict:
    return validate_optimizationjob(obj, old, facts(**kw))


def test_a_valid_search_is_admitted() -> None:
    v = admit(optj())
    assert v.allowed and v.warnings == [], v


def test_a_name_its_trials_names_would_outgrow_is_refused_naming_the_maximum() -> None:
    # 12 trials: the last is <name>-trial-11, 9 characters after the name: 63 - 9 = 54.
    assert max_name_length(OptimizationJob.model_validate(optj())) == 54
    errors = admit(optj("a" * 55)).errors
    assert errors[0] == (
        f"metadata.name {'a' * 55!r} has 55 characters; use at most 54: its trials are TrainJobs named "
        f"<name>-trial-<index>, up to index 11, and a TrainJob's name has at most 63 characters "
        f"({'a' * 55 + '-trial-11'!r} has 64)"
    )
    assert not [e for e in errors[1:] if e.startswith("metadata.name 'a")]  # the trial's own said once, above
    # 100 trials: up to -trial-99, as long; 1 trial: -trial-0, one character fewer.
    assert max_name_length(OptimizationJob.model_validate(optj(numTrials=100))) == 54
    assert max_name_length(OptimizationJob.model_validate(optj(numTrials=1))) == 55
    # A grid smaller than numTrials has as many trials as points.
    grid = {"name": "bs", "searchSpace": {"categorical": {"choices": ["16", "32"]}}}
    assert max_name_length(OptimizationJob.model_validate(optj(searchAlgorithm={"grid": {}}, parameters=[grid]))) == 55
    bad = admit(optj("9tune")).errors[0]
    assert bad.startswith("metadata.name '9tune' must be an RFC 1035 label (its trials' TrainJob names start with it)")
    gen = admit(optj("", meta={"generateName": "g" * 50 + "-"})).errors[0]
    assert gen.startswith("metadata.generateName") and "use at most 49" in gen
    assert admit(optj("", meta={"generateName": "tune-"})).allowed


def test_a_template_on_a_missing_runtime_is_refused_as_a_trainjobs_create_is() -> None:
    obj = optj(template={"spec": {"runtimeRef": {"name": "nowhere"}}})
    (error,) = admit(obj).errors
    assert error == (
        "spec.trainJobTemplate.spec.runtimeRef: ClusterTrainingRuntime 'nowhere' not found; create it first or "
        "name an existing one"
    )


def test_a_trials_children_too_long_for_its_runtime_are_refused_on_the_optimizationjobs_name() -> None:
    # tune<40 a's>-trial-11 fits 63 characters, but the Pods of its runtime's Job do not.
    (error,) = admit(optj("a" * 40)).errors
    assert error == (
        f"metadata.name: its trial TrainJob {'a' * 40 + '-trial-11'!r} would be refused: TrainJob name is too long, "
        f"pod names generated for this TrainJob will exceed 63 characters ({'a' * 40 + '-trial-11-node-0-0'!r} plus "
        "a 6-character suffix); use a shorter name"
    )
    assert admit(optj("a" * 30)).allowed


def test_template_errors_of_a_trainjob_are_given_the_templates_path() -> None:
    obj = optj(template={"spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": -1}}})
    errors = admit(obj).errors
    assert errors and all(e.startswith("spec.trainJobTemplate.spec.trainer") for e in errors), errors


@pytest.mark.parametrize(
    ("where", "key"),
    [
        ("labels", "trainer.kubeflow.org/optimizationjob-name"),
        ("labels", "trainer.kubeflow.org/trial-index"),
        ("annotations", "trainer.kubeflow.org/trial-parameters"),
        ("annotations", "trainer.kubeflow.org/trial-early-stopped"),
        ("annotations", "trainer.kubeflow.org/desired-hash"),
    ],
)
def test_a_template_claiming_what_the_controller_sets_on_a_trial_is_refused(where: str, key: str) -> None:
    obj = optj(template={"metadata": {where: {key: "x", "team": "a"}}})
    (error,) = admit(obj).errors
    assert error == (
        f"spec.trainJobTemplate.metadata.{where}[{key}]: set by the operator on every trial (which "
        "OptimizationJob and trial it is, its parameters); remove it"
    )
    assert admit(optj(template={"metadata": {where: {"team": "a"}}})).allowed


def test_a_template_setting_owner_references_or_other_metadata_is_refused() -> None:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u", "controller": True}]
    for key, value in (("ownerReferences", refs), ("generateName", "x-"), ("uid", "u")):
        (error,) = admit(optj(template={"metadata": {key: value}})).errors
        assert error.startswith(f"spec.trainJobTemplate.metadata.{key}: a trial's metadata is made by the operator")
        assert error.endswith("only labels, annotations and finalizers are taken from the template: remove it")


def test_the_template_env_cannot_set_a_parameters_variable_nor_a_misspelt_one() -> None:
    env = [{"name": "KUBEFLOW_TRAINER_OPT_LR", "value": "1"}, {"name": "KUBEFLOW_TRAINER_OPT_LRATE", "value": "1"}]
    obj = optj(template={"spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"env": env}}})
    assert admit(obj).errors == [
        "spec.trainJobTemplate.spec.trainer.env[KUBEFLOW_TRAINER_OPT_LR]: the variable of parameter 'lr', set on "
        "each trial to the value the search chose: remove it from the template",
        "spec.trainJobTemplate.spec.trainer.env[KUBEFLOW_TRAINER_OPT_LRATE]: no parameter has this variable "
        "(parameter <name> reaches the trainer as KUBEFLOW_TRAINER_OPT_<NAME>): rename it, or add the parameter "
        "to spec.parameters",
    ]


def test_references_to_parameters_in_command_and_args_must_name_one_and_unused_ones_are_warned() -> None:
    bs = {"name": "bs", "searchSpace": {"categorical": {"choices": ["16", "32"]}}}
    trainer = {"command": ["python", "train.py"], "args": ["--lr=$(KUBEFLOW_TRAINER_OPT_LR)"]}
    obj = optj(
        parameters=[LR, bs], template={"spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}}
    )
    v = admit(obj)
    assert v.allowed
    assert v.warnings == [
        "spec.parameters[bs]: the template's trainer command and args use other parameters as $(...) but never "
        "$(KUBEFLOW_TRAINER_OPT_BS); its trainer gets it only from its environment: use it, or remove the parameter"
    ]
    trainer["args"] = ["--lr=$(KUBEFLOW_TRAINER_OPT_LRATE)"]
    errors = admit(obj).errors
    assert errors[0] == (
        "spec.trainJobTemplate.spec.trainer.args[0]: $(KUBEFLOW_TRAINER_OPT_LRATE) names no parameter (it would stay "
        "as written): use one of $(KUBEFLOW_TRAINER_OPT_LR), $(KUBEFLOW_TRAINER_OPT_BS)"
    )
    # Reading the parameters from the environment alone is the common way: nothing to warn of.
    trainer["args"] = ["--epochs=3"]
    assert admit(obj).warnings == []


def test_an_objective_no_trainer_can_report_is_warned_of_when_the_status_server_is_off() -> None:
    off = dataclasses.replace(facts(), status_server=False)
    v = validate_optimizationjob(optj(), None, off)
    assert v.allowed
    assert v.warnings == [
        "spec.objectives[0].metric: the operator runs without its status server (--status-server-port 0), so no "
        "trainer can post 'loss' to status.trainerStatus.metrics and every trial will fail without it: start the "
        "operator with --status-server-port"
    ]
    assert validate_optimizationjob(optj(), None, dataclasses.replace(facts(), status_server=True)).warnings == []


def test_a_templates_queue_is_checked_as_a_trials_and_said_under_the_template() -> None:
    obj = optj(template={"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "nowhere"}}})
    (error,) = admit(obj, gang="volcano", queues=[]).errors
    assert error.startswith(
        "spec.trainJobTemplate.metadata.annotations[scheduling.volcano.sh/queue-name]: Volcano queue 'nowhere' does "
        "not exist"
    )


def test_the_bounds_on_trials_parameters_choices_and_the_grid_are_refused() -> None:
    assert any("spec.numTrials" in e for e in admit(optj(numTrials=10**9)).errors)
    assert any("spec.parallelTrials" in e for e in admit(optj(parallelTrials=101)).errors)
    many = [{"name": f"p{i}", "searchSpace": {"categorical": {"choices": ["a"]}}} for i in range(101)]
    assert any("spec.parameters" in e for e in admit(optj(parameters=many)).errors)
    huge = {"name": "c", "searchSpace": {"categorical": {"choices": [str(i) for i in range(101)]}}}
    assert any("spec.parameters.0.searchSpace.categorical.choices" in e for e in admit(optj(parameters=[huge])).errors)
    wide = [
        {"name": f"g{i}", "searchSpace": {"categorical": {"choices": [str(j) for j in range(100)]}}} for i in range(3)
    ]
    (error,) = admit(optj(searchAlgorithm={"grid": {}}, parameters=wide)).errors
    assert (
        "a grid search over 1000000 points (the product of the parameters' choice counts) is more than "
        f"{MAX_GRID_POINTS}" in error
    )
    assert error.endswith("give fewer choices, or use searchAlgorithm random or tpe")
    assert admit(optj(searchAlgorithm={"random": {}}, parameters=wide)).allowed  # random draws: no grid built
    ten = {"name": "t", "searchSpace": {"categorical": {"choices": [str(j) for j in range(10)]}}}
    eleven = {"name": "t", "searchSpace": {"categorical": {"choices": [str(j) for j in range(11)]}}}
    assert admit(optj(searchAlgorithm={"grid": {}}, parameters=[wide[0], ten])).allowed  # 1000 points
    assert not admit(optj(searchAlgorithm={"grid": {}}, parameters=[wide[0], eleven])).allowed  # 1100


def test_an_update_is_not_checked_against_the_template_again() -> None:
    before = optj(template={"spec": {"runtimeRef": {"name": "gone-since"}}})
    after = optj(suspend=True, template={"spec": {"runtimeRef": {"name": "gone-since"}}})
    assert admit(after, before).allowed


async def test_the_webhook_serves_the_optimizationjob_path() -> None:
    assert VALIDATE["/validate-optimizationjob"].kind == "OptimizationJob"
    server = WebhookServer(None, None, facts())  # type: ignore[arg-type]  # review() reads neither
    request = {"uid": "u", "operation": "CREATE", "namespace": "ns", "object": optj("a" * 60)}
    answer = await server.review("/validate-optimizationjob", request)
    assert answer["response"]["allowed"] is False
    assert "use at most 54" in answer["response"]["status"]["message"]
    assert review_response("u", Verdict())["response"]["allowed"] is True
