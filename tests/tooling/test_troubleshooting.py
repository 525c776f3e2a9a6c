"""Every condition type and reason docs/troubleshooting.md names (a backticked ``CamelCase`` word) is one
the code sets: the value of a ``REASON_*`` or ``COND_*`` constant of ``trainer/api/`` or ``trainer/``, or a string
given as a condition's ``reason=``, an ``invalid_reason=`` or the reason of ``problem(...)``. The words
that are not the operator's reasons (kinds, a failure policy action, Kubernetes' own pod and Job reasons
the page quotes) are listed with why."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
NOT_REASONS = {
    "TrainingRuntime": "a kind",
    "ClusterTrainingRuntime": "a kind",
    "FailJobSet": "a failurePolicy rule's action",
    "Pending": "a Volcano PodGroup's phase",
    "ImagePullBackOff": "a pod's waiting reason (kubelet)",
    "ErrImagePull": "a pod's waiting reason (kubelet)",
    "InvalidImageName": "a pod's waiting reason (kubelet)",
    "ErrImageNeverPull": "a pod's waiting reason (kubelet)",
    "CreateContainerConfigError": "a pod's waiting reason (kubelet)",
    "CreateContainerError": "a pod's waiting reason (kubelet)",
    "RunContainerError": "a pod's waiting reason (kubelet)",
    "CrashLoopBackOff": "a pod's waiting reason (kubelet)",
    "Unschedulable": "a pod's condition reason (kube-scheduler)",
    "SchedulingGated": "a pod's condition reason (kube-scheduler)",
    "JobWaitingError": "an SDK exception",
    "PodCannotStartError": "an SDK exception",
    "WaitTimeoutError": "an SDK exception",
    "TimeoutError": "a Python exception",
    "BackoffLimitExceeded": "the Job controller's reason, quoted in the job's message",
}
REASON_KEYWORDS = {"reason", "invalid_reason"}


def named_in_the_page() -> set[str]:
    return set(re.findall(r"`([A-Z][a-z]+(?:[A-Z][A-Za-z]*)*)`", PAGE.read_text()))


def set_by_the_code() -> set[str]:
    out: set[str] = set()
    for path in sorted((ROOT / "trainer").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if any(re.match(r"(REASON|COND)_", n) for n in names) and isinstance(node.value.value, str):
                    out.add(node.value.value)
            elif isinstance(node, ast.Call):
                args = [k.value for k in node.keywords if k.arg in REASON_KEYWORDS]
                if isinstance(node.func, ast.Name) and node.func.id == "problem" and node.args:
                    args.append(node.args[0])
                out |= {a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return out


def test_the_scan_finds_the_reasons_of_each_kind_of_source() -> None:
    code = set_by_the_code()
    assert {"Misconfigured", "TrainJobResourcesCreationFailed", "Suspended"} <= code  # api constants
    assert {"QueueIgnored", "QueueNotLeaf", "PodGroupPending", "AllJobsCompleted", "InvalidSpec"} <= code  # literals
    assert "FailedJobs" in code  # a REASON_ constant of trainer/


def test_every_reason_the_page_names_is_set_by_the_code() -> None:
    named = named_in_the_page()
    assert len(named) >= 20, named
    missing = sorted(named - set_by_the_code() - set(NOT_REASONS))
    assert missing == [], f"docs/troubleshooting.md names reasons no code sets: {missing}"


def test_the_exceptions_are_still_named_and_not_the_codes() -> None:
    named, code = named_in_the_page(), set_by_the_code()
    assert sorted(set(NOT_REASONS) - named) == [], "drop from NOT_REASONS what the page no longer names"
    assert sorted(set(NOT_REASONS) & code) == [], "a reason the code sets is not an exception"
