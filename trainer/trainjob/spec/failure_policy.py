"""What a failed Job does to its TrainJob: the runtime's JobSet failure policy, as a pure decision.

Mirrors kubernetes-sigs/jobset ``pkg/controllers/failure_policy.go`` (v0.12): without a policy the
first failed Job fails the TrainJob; with one, the rules are tried in order and the first that
matches a failed Job (the earliest failed one it matches) decides; none matching means
``RestartJobSet``. ``RestartJobSet`` restarts the whole group while fewer than ``maxRestarts``
counted restarts were made, else fails it with ``ReachedMaxRestarts``;
``RestartJobSetAndIgnoreMaxRestarts`` restarts without counting; ``RestartJob`` and
``RestartJobAndIgnoreMaxRestarts`` (JobSet's ``RestartJob`` feature) recreate only the failed Job, the
first counting as ``RestartJobSet`` does; ``FailJobSet`` fails at once with
``FailJobSetFailurePolicyAction``. Counted restarts are JobSet's ``totalRestartsCountTowardsMax``: those
of the whole group plus those of single Jobs. Reasons and messages are JobSet's (``pkg/constants``),
with the failed Job and its own reason appended.

``onJobFailureMessagePatterns`` run on RE2 (google-re2), the linear-time engine and the syntax of Go's
``regexp`` that JobSet matches them with: no pattern a tenant writes can hold the operator (a
backtracking engine takes hours on ``^(.|.)*Z$``). The message matched is capped at
:data:`MAX_MESSAGE` characters. A pattern RE2 refuses (admission refuses it first, naming the field)
matches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import re2

from trainer.api.jobset_v1alpha2 import (
    FAIL_JOBSET,
    RESTART_JOB,
    RESTART_JOB_IGNORE_MAX,
    RESTART_JOBSET,
    RESTART_JOBSET_IGNORE_MAX,
    FailurePolicy,
    FailurePolicyRule,
)
from trainer.api.labels import JOB_INDEX, REPLICATED_JOB_NAME
from trainer.api.trainer_v1alpha1 import REASON_DEADLINE_EXCEEDED
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.jobs.conditions import job_failed

MAX_MESSAGE = 32768
"""Characters of a Job's failure message that the patterns see (a condition message is at most 32 KiB)."""
MAX_PATTERNS = 1024
"""Compiled patterns kept (the least recently used go first)."""
REASON_FAILED_JOBS = "FailedJobs"
REASON_REACHED_MAX_RESTARTS = "ReachedMaxRestarts"
REASON_FAIL_ACTION = "FailJobSetFailurePolicyAction"
REASON_RESTART_ACTION = "RestartJobSetFailurePolicyAction"
REASON_RESTART_IGNORE_MAX_ACTION = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
REASON_RESTART_JOB_ACTION = "RestartJobFailurePolicyAction"
REASON_RESTART_JOB_IGNORE_MAX_ACTION = "RestartJobAndIgnoreMaxRestartsFailurePolicyAction"
RESTARTING_DEFAULT_POLICY = "DefaultFailurePolicy"
"""Reason of JobSet's ``RestartingJobSet`` condition for a restart no rule asked for."""
RESTARTING_RULE_FORMAT = "FailurePolicy_{}"
"""Reason of JobSet's ``RestartingJobSet`` condition for a restart a rule asked for (its name)."""
_MESSAGES = {
    REASON_FAILED_JOBS: "jobset failed due to one or more job failures",
    REASON_REACHED_MAX_RESTARTS: "jobset failed due to reaching max number of restarts",
    REASON_FAIL_ACTION: "applying FailJobSet failure policy action",
    REASON_RESTART_ACTION: "applying RestartJobSet failure policy action",
    REASON_RESTART_IGNORE_MAX_ACTION: "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
    REASON_RESTART_JOB_ACTION: "applying RestartJob failure policy action",
    REASON_RESTART_JOB_IGNORE_MAX_ACTION: "applying RestartJobAndIgnoreMaxRestarts failure policy action",
}


@dataclass(frozen=True)
class Decision:
    """What the failed Jobs call for: ``fail`` (with ``reason``) or a restart (``counted`` towards
    maxRestarts or not), and the message naming the failed Job and its reason. A restart of the
    failed Job alone names it: ``job`` (its name), ``rjob`` and ``index``; else they are None (every
    Job restarts). ``rule``: the name of the rule that decided, None when none did."""

    fail: bool
    reason: str
    message: str
    counted: bool = False
    job: str | None = None
    rjob: str | None = None
    index: int | None = None
    rule: str | None = None

    @property
    def restarts_group(self) -> bool:
        """Whether every Job restarts (``RestartJobSet`` or ``RestartJobSetAndIgnoreMaxRestarts``)."""
        return not self.fail and self.job is None

    @property
    def restarting_reason(self) -> str:
        """The reason of JobSet's ``RestartingJobSet`` condition: ``FailurePolicy_<rule>`` or
        ``DefaultFailurePolicy``."""
        return RESTARTING_RULE_FORMAT.format(self.rule) if self.rule is not None else RESTARTING_DEFAULT_POLICY


def _failed_at(job: JSON) -> str:
    return str((job_failed(job) or {}).get("lastTransitionTime") or "")


def _applies(rule: FailurePolicyRule, job: JSON) -> bool:
    cond = job_failed(job) or {}
    if rule.on_job_failure_reasons and cond.get("reason") not in rule.on_job_failure_reasons:
        return False
    message = str(cond.get("message") or "")[:MAX_MESSAGE]
    if rule.on_job_failure_message_patterns and not any(
        matches(p, message) for p in rule.on_job_failure_message_patterns
    ):
        return False
    rjob = meta(job).labels.get(REPLICATED_JOB_NAME)
    if not rjob:
        return False
    return not rule.target_replicated_jobs or rjob in rule.target_replicated_jobs


def _message(reason: str, job: JSON) -> str:
    cond = job_failed(job) or {}
    name = meta(job).name
    detail = f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    return f"{_MESSAGES[reason]} (first failed job: {name}){': ' + detail if detail else ''}"


def decide(policy: FailurePolicy | None, failed: list[JSON], counted_restarts: int) -> Decision | None:
    """The decision for the failed Jobs of the current attempt (None when there are none).
    ``counted_restarts`` is every restart counted so far: ``status.restartsCountTowardsMax`` plus the
    sum of ``jobRestartsCountTowardsMax`` (JobSet's ``totalRestartsCountTowardsMax``). Raises nothing:
    an invalid pattern is refused at admission."""
    if not failed:
        return None
    earliest = min(failed, key=_failed_at)
    if policy is None:
        # No policy: the first failed Job fails the TrainJob; a Job's own deadline keeps its reason.
        cond = job_failed(earliest) or {}
        reason = REASON_DEADLINE_EXCEEDED if cond.get("reason") == REASON_DEADLINE_EXCEEDED else REASON_FAILED_JOBS
        name = meta(earliest).name
        return Decision(True, reason, f"Job {name} failed: {cond.get('reason', '')}: {cond.get('message', '')}")
    action, job, rule_name = RESTART_JOBSET, earliest, None
    for rule in policy.rules or []:
        matching = [j for j in failed if _applies(rule, j)]
        if matching:
            action, job, rule_name = rule.action, min(matching, key=_failed_at), rule.name
            break
    if action == FAIL_JOBSET:
        return Decision(True, REASON_FAIL_ACTION, _message(REASON_FAIL_ACTION, job), rule=rule_name)
    if action == RESTART_JOBSET_IGNORE_MAX:
        reason = REASON_RESTART_IGNORE_MAX_ACTION
        return Decision(False, reason, _message(reason, job), rule=rule_name)
    alone = _restart_alone(action, job, rule_name) if action in (RESTART_JOB, RESTART_JOB_IGNORE_MAX) else None
    if alone is not None and (not alone.counted or counted_restarts < policy.max_restarts):
        return alone
    if counted_restarts >= policy.max_restarts:
        return Decision(True, REASON_REACHED_MAX_RESTARTS, _message(REASON_REACHED_MAX_RESTARTS, job), rule=rule_name)
    return Decision(False, REASON_RESTART_ACTION, _message(REASON_RESTART_ACTION, job), counted=True, rule=rule_name)


def _restart_alone(action: str, job: JSON, rule: str | None) -> Decision | None:
    """The restart of ``job`` alone by ``action`` (``RestartJob`` or ``RestartJobAndIgnoreMaxRestarts``),
    or None when the Job lacks its replicated job or index label (JobSet then errs and retries; here no
    Job of ours lacks them)."""
    labels = meta(job).labels
    rjob, index = labels.get(REPLICATED_JOB_NAME), str(labels.get(JOB_INDEX) or "")
    if not rjob or not index.isdigit():
        return None
    counted = action == RESTART_JOB
    reason = REASON_RESTART_JOB_ACTION if counted else REASON_RESTART_JOB_IGNORE_MAX_ACTION
    name = meta(job).name
    return Decision(False, reason, _message(reason, job), counted, str(name), str(rjob), int(index), rule)


def pattern_error(pattern: str) -> str | None:
    """Why RE2 (Go's ``regexp`` syntax) refuses ``pattern``, or None when it compiles."""
    try:
        _compiled(pattern)
    except re2.error as e:
        reason = e.args[0] if e.args else e
        return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
    return None


def matches(pattern: str, message: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``message``, as Go's ``regexp.MatchString``: in time
    linear in the message, whatever the pattern. A pattern RE2 refuses matches nothing."""
    try:
        compiled = _compiled(pattern)
    except re2.error:
        return False
    return compiled.search(message) is not None


@lru_cache(maxsize=MAX_PATTERNS)
def _compiled(pattern: str) -> re2._Regexp[str]:
    """``pattern`` compiled by RE2 (its parse errors not logged by the library). Raises ``re2.error``."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)
