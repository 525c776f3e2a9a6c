"""Admission of a change of ``spec.trainer``: every field may change only while the TrainJob is suspended
(``spec.suspend`` true before the update) and its Jobs have no active pods; ``numNodes`` stays fixed under
the Workload API gang. The CRD's own rule on ``numNodes`` and ``resourcesPerNode`` is checked on the
apiserver (e2e/test_resize.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conftest import load_sample
from trainer.api.trainer_v1alpha1 import ELASTIC_STATUS, RESIZE_FIELDS, Trainer, changed_only_while_suspended
from trainer.framework.json_codec import JSON
from trainer.webhook import rules

RUNTIME = load_sample("torch-distributed.yaml")

CHANGES: dict[str, tuple[Any, Any]] = {
    "image": ("busybox:1", "busybox:2"),
    "command": (["a"], ["b"]),
    "args": (["--x"], ["--y"]),
    "env": ([{"name": "A", "value": "1"}], [{"name": "A", "value": "2"}]),
    "numNodes": (2, 1),
    "resourcesPerNode": ({"requests": {"cpu": "1"}}, {"requests": {"cpu": "2"}}),
    "resourceClaimsPerNode": (
        [{"name": "gpu", "resourceClaimTemplateName": "a"}],
        [{"name": "gpu", "resourceClaimTemplateName": "b"}],
    ),
    "numProcPerNode": (1, 2),
}
"""A value before and after for every field of ``spec.trainer``."""


def test_every_field_of_trainer_has_a_change() -> None:
    assert set(CHANGES) == {f.alias or name for name, f in Trainer.model_fields.items()}


def facts(active: int = 0, gang: str = "none") -> rules.AdmissionFacts:
    return rules.AdmissionFacts(
        runtime=lambda kind, name, ns: RUNTIME if name == "torch-distributed" else None,
        active_pods=lambda kind, ns, name: active,
        volcano_queues=lambda: None,
        local_queue_exists=lambda ns, name: None,
        gang=gang,
    )


def tj(suspend: bool, **trainer: Any) -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": suspend, "trainer": trainer},
    }


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_field_of_trainer_changes_only_while_suspended(name: str) -> None:
    before, after = CHANGES[name]
    for was, now in ((False, False), (False, True)):  # running, or suspended by this very update
        (error,) = rules.check_trainer_change(tj(now, **{name: after}), tj(was, **{name: before}), facts())
        assert error.startswith(f"spec.trainer.{name}: may change only while the TrainJob is suspended"), error
    for now in (True, False):  # suspended, or resumed by this very update (Kueue's admission)
        assert rules.check_trainer_change(tj(now, **{name: after}), tj(True, **{name: before}), facts()) == []
    (error,) = rules.check_trainer_change(tj(True, **{name: after}), tj(True, **{name: before}), facts(active=2))
    assert error == (
        f"spec.trainer.{name}: cannot change while the TrainJob's Jobs still have 2 active pods; keep "
        f"spec.suspend true until its pods are gone, then change spec.trainer.{name}"
    )


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_setting_or_unsetting_a_field_is_a_change_and_the_same_value_is_none(name: str) -> None:
    before, _ = CHANGES[name]
    assert rules.check_trainer_change(tj(False, **{name: before}), tj(False), facts())
    assert rules.check_trainer_change(tj(False), tj(False, **{name: before}), facts())
    assert rules.check_trainer_change(tj(False, **{name: before}), tj(False, **{name: before}), facts()) == []
    assert rules.changed_trainer_fields(tj(False, **{name: before}), tj(False, **{name: before})) == []


def test_each_changed_field_is_named_and_other_fields_pass() -> None:
    old, new = tj(False, numNodes=2, image="a"), tj(False, numNodes=1, image="b")
    errors = rules.check_trainer_change(new, old, facts())
    assert [e.split(":")[0] for e in errors] == ["spec.trainer.numNodes", "spec.trainer.image"]
    unchanged = copy.deepcopy(old)
    unchanged["spec"]["suspend"] = True  # suspend alone: no field of trainer changed
    assert rules.validate_trainjob(unchanged, old, facts()).allowed


def test_a_resize_of_a_suspended_job_is_admitted_whole_and_refused_while_it_runs() -> None:
    old, new = tj(True, numNodes=2), tj(False, numNodes=1, resourcesPerNode={"requests": {"cpu": "2"}})
    assert rules.validate_trainjob(new, old, facts()).allowed
    running = rules.validate_trainjob(tj(False, numNodes=1), tj(False, numNodes=2), facts())
    assert running.errors == [
        "spec.trainer.numNodes: may change only while the TrainJob is suspended (spec.suspend true before the "
        "update); set spec.suspend to true first, then change numNodes (the update that resumes the job may carry it)"
    ]


def test_the_crd_rule_covers_the_resize_fields_at_their_path() -> None:
    rule = changed_only_while_suspended("numNodes")
    assert rule["fieldPath"] == ".spec.trainer.numNodes"
    assert str(rule["rule"]).startswith("(has(oldSelf.spec.suspend) && oldSelf.spec.suspend) || ")
    elastic = changed_only_while_suspended("numNodes", ELASTIC_STATUS)
    assert str(elastic["rule"]) == f"({ELASTIC_STATUS}) || {rule['rule']}"
    assert "numNodes may change only while the TrainJob is suspended" in str(rule["message"])
    assert RESIZE_FIELDS == ("numNodes", "resourcesPerNode")
