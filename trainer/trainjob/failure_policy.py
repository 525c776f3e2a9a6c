"""What a failed Job does to its TrainJob: the runtime's JobSet failure policy, as a pure decision.

Mirrors kubernetes-sigs/jobset ``pkg/controllers/failure_policy.go`` (v0.12): without a policy the
first failed Job fails the TrainJob; with one, the rules are tried in order and the first that
matches a failed Job (the earliest failed one it matches) decides; none matching means
``RestartJobSet``. ``RestartJobSet`` restarts the whole group while fewer than ``maxRestarts``
counted restarts were made, else fails it with ``ReachedMaxRestarts``;
``RestartJobSetAndIgnoreMaxRestarts`` restarts without counting; ``FailJobSet`` fails at once with
``FailJobSetFailurePolicyAction``. Reasons and messages are JobSet's (``pkg/constants``), with the
failed Job and its own reason appended.

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

from api.jobset_v1alpha2 import (
    FAIL_JOBSET,
    RESTART_JOBSET,
    RESTART_JOBSET_IGNORE_MAX,
    FailurePolicy,
    FailurePolicyRule,
)
from api.trainer_v1alpha1 import REASON_DEADLINE_EXCEEDED
from trainer.builders.labels import REPLICATED_JOB_NAME
from trainer.json_codec import JSON

MAX_MESSAGE = 32768
"""Characters of a Job's failure message that the patterns see (a condition message is at most 32 KiB)."""
MAX_PATTERNS = 1024
"""Compiled patterns kept (the least recently used go first)."""
REASON_FAILED_JOBS = "FailedJobs"
REASON_REACHED_MAX_RESTARTS = "ReachedMaxRestarts"
REASON_FAIL_ACTION = "FailJobSetFailurePolicyAction"
REASON_RESTART_ACTION = "RestartJobSetFailurePolicyAction"
REASON_RESTART_IGNORE_MAX_ACTION = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
_MESSAGES = {
    REASON_FAILED_JOBS: "jobset failed due to one or more job failures",
    REASON_REACHED_MAX_RESTARTS: "jobset failed due to reaching max number of restarts",
    REASON_FAIL_ACTION: "applying FailJobSet failure policy action",
    REASON_RESTART_ACTION: "applying RestartJobSet failure policy action",
    REASON_RESTART_IGNORE_MAX_ACTION: "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
}


@dataclass(frozen=True)
class Decision:
    """What the failed Jobs call for: ``fail`` (with ``reason``) or a restart (``counted`` towards
    maxRestarts or not), and the message naming the failed Job and its reason."""

    fail: bool
    reason: str
    message: str
    counted: bool = False


def failure(job: JSON) -> JSON | None:
    """The ``Failed`` condition of a batch/v1 Job when it is True, else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return dict(cond)
    return None


def _failed_at(job: JSON) -> str:
    return str((failure(job) or {}).get("lastTransitionTime") or "")


def _applies(rule: FailurePolicyRule, job: JSON) -> bool:
    cond = failure(job) or {}
    if rule.on_job_failure_reasons and cond.get("reason") not in rule.on_job_failure_reasons:
        return False
    message = str(cond.get("message") or "")[:MAX_MESSAGE]
    if rule.on_job_failure_message_patterns and not any(
        matches(p, message) for p in rule.on_job_failure_message_patterns
    ):
        return False
    rjob = ((job.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME)
    if not rjob:
        return False
    return not rule.target_replicated_jobs or rjob in rule.target_replicated_jobs


def _message(reason: str, job: JSON) -> str:
    cond = failure(job) or {}
    name = (job.get("metadata") or {}).get("name")
    detail = f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    return f"{_MESSAGES[reason]} (first failed job: {name}){': ' + detail if detail else ''}"


def decide(policy: FailurePolicy | None, failed: list[JSON], counted_restarts: int) -> Decision | None:
    """The decision for the failed Jobs of the current attempt (None when there are none).
    ``counted_restarts`` is ``status.restartsCountTowardsMax``. Raises nothing: an invalid pattern
    is refused at admission."""
    if not failed:
        return None
    earliest = min(failed, key=_failed_at)
    if policy is None:
        # No policy: the first failed Job fails the TrainJob; a Job's own deadline keeps its reason.
        cond = failure(earliest) or {}
        reason = REASON_DEADLINE_EXCEEDED if cond.get("reason") == REASON_DEADLINE_EXCEEDED else REASON_FAILED_JOBS
        name = (earliest.get("metadata") or {}).get("name")
        return Decision(True, reason, f"Job {name} failed: {cond.get('reason', '')}: {cond.get('message', '')}")
    action, job = RESTART_JOBSET, earliest
    for rule in policy.rules or []:
        matching = [j for j in failed if _applies(rule, j)]
        if matching:
            action, job = rule.action, min(matching, key=_failed_at)
            break
    if action == FAIL_JOBSET:
        return Decision(True, REASON_FAIL_ACTION, _message(REASON_FAIL_ACTION, job))
    if action == RESTART_JOBSET_IGNORE_MAX:
        return Decision(False, REASON_RESTART_IGNORE_MAX_ACTION, _message(REASON_RESTART_IGNORE_MAX_ACTION, job))
    if counted_restarts >= policy.max_restarts:
        return Decision(True, REASON_REACHED_MAX_RESTARTS, _message(REASON_REACHED_MAX_RESTARTS, job))
    return Decision(False, REASON_RESTART_ACTION, _message(REASON_RESTART_ACTION, job), counted=True)


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
