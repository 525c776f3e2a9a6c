"""``onJobFailureMessagePatterns`` run on RE2, as JobSet's Go ``regexp`` does: linear time whatever the
pattern, RE2 syntax (no backreferences or lookarounds), refused at admission with the field named."""

from __future__ import annotations

import copy

from tests.conftest import load_sample
from trainer.api.jobset_v1alpha2 import FailurePolicy, FailurePolicyRule
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime
from trainer.trainjob.spec.failure_policy import MAX_MESSAGE, decide, matches, pattern_error
from trainer.trainjob.validation import runtime_errors

DEADLINE = "Job was active longer than specified deadline"
REDOS = "^(.|.)*Z$"


def failed_job(message: str) -> dict[str, object]:
    cond = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": message}
    return {
        "metadata": {"name": "j-node-0", "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "node"}},
        "status": {"conditions": [cond]},
    }


def test_a_pattern_that_backtracking_takes_hours_on_returns_at_once() -> None:
    # A backtracking engine tries 2^45 ways of splitting the message before it gives up.
    assert matches(REDOS, DEADLINE) is False
    assert matches(REDOS, DEADLINE + "Z") is True
    assert matches("longer than", DEADLINE) and not matches("^longer", DEADLINE), "unanchored, as MatchString"


def test_the_rule_with_it_does_not_match_and_the_default_applies() -> None:
    rule = FailurePolicyRule(name="redos", action="FailJobSet", on_job_failure_message_patterns=[REDOS])
    d = decide(FailurePolicy(max_restarts=0, rules=[rule]), [failed_job(DEADLINE)], 0)
    assert d is not None and (d.fail, d.reason) == (True, "ReachedMaxRestarts")
    hit = FailurePolicyRule(name="hit", action="FailJobSet", on_job_failure_message_patterns=["deadline$"])
    d = decide(FailurePolicy(max_restarts=3, rules=[hit]), [failed_job(DEADLINE)], 0)
    assert d is not None and d.reason == "FailJobSetFailurePolicyAction"


def test_only_the_first_max_message_characters_are_matched() -> None:
    assert matches("tail$", "x" * MAX_MESSAGE + "tail") is True  # the function itself sees all it is given
    rule = FailurePolicyRule(name="tail", action="FailJobSet", on_job_failure_message_patterns=["tail$"])
    d = decide(FailurePolicy(max_restarts=3, rules=[rule]), [failed_job("x" * MAX_MESSAGE + "tail")], 0)
    assert d is not None and d.reason != "FailJobSetFailurePolicyAction", "the rule saw the capped message"


def test_re2_syntax_is_what_admission_checks() -> None:
    assert pattern_error(r"(a)\1") is not None, "a backreference Python accepts, RE2 (and Go) refuse"
    assert pattern_error(r"(?=a)") is not None
    assert pattern_error(r"^OOM.*killed$") is None and matches(r"(a)\1", "aa") is False
    runtime = load_sample("torch-distributed.yaml")
    policy = {"rules": [{"name": "r", "action": "FailJobSet", "onJobFailureMessagePatterns": ["ok", r"(a)\1"]}]}
    runtime = copy.deepcopy(runtime)
    runtime["spec"]["template"]["spec"]["failurePolicy"] = policy
    errors = runtime_errors(ClusterTrainingRuntime.model_validate(runtime).spec)
    assert any(
        "failurePolicy.rules[0].onJobFailureMessagePatterns" in e and "RE2" in e and "(a)\\\\1" in e for e in errors
    ), errors
