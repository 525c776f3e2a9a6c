"""The pure parts of ``bench.conformance``: a Job normalised (uids, hashes, server-set fields, the Job
controller's labels), two normalised Jobs diffed (named lists by name, others by position), a case's Jobs
compared (a Job on one side only, no Job at all), explained differences and the report's counts."""

from __future__ import annotations

from typing import Any

import pytest

from bench.conformance import (
    ABSENT,
    Case,
    Difference,
    compare_case,
    diff,
    dns_name,
    explain,
    job_key,
    normalise_job,
    report,
    runtime_case,
    select,
)

UID = "0b9e6a4e-1c2d-4f5e-9a8b-7c6d5e4f3a2b"


def job(name: str, env: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    container = {"name": "node", "image": "img", "env": env or []}
    return {
        "metadata": {
            "name": name,
            "uid": UID,
            "resourceVersion": "7",
            "ownerReferences": [{"kind": "JobSet", "name": "tj", "uid": UID}],
            "labels": {"controller-uid": UID, **(labels or {})},
            "annotations": {},
        },
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}},
            "template": {
                "metadata": {"labels": {"batch.kubernetes.io/controller-uid": UID, "controller-uid": UID}},
                "spec": {"containers": [container]},
            },
        },
        "status": {"active": 1},
    }


def test_normalise_drops_server_set_fields_and_reads_uids_and_hashes() -> None:
    j = job("tj-node-0", labels={"jobset.sigs.k8s.io/job-key": "a" * 40, "owner": f"x-{UID}"})
    out = normalise_job(j, [UID])
    assert out["metadata"]["labels"] == {"jobset.sigs.k8s.io/job-key": "<hash>", "owner": "x-<uid>"}
    assert "selector" not in out["spec"] and "status" not in out
    assert out["spec"]["template"]["metadata"]["labels"] == {}
    j["metadata"]["annotations"]["trainer.kubeflow.org/desired-hash"] = "0123abcd"
    assert normalise_job(j, [UID])["metadata"]["annotations"] == {}


def test_diff_matches_named_items_by_name_and_reports_order() -> None:
    a = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    b = {"env": [{"name": "B", "value": "2"}, {"name": "A", "value": "3"}, {"name": "C", "value": "4"}]}
    assert diff(a, b) == [("env[A].value", "1", "3"), ("env[C]", ABSENT, {"name": "C", "value": "4"})]
    assert diff({"env": [{"name": "A"}, {"name": "B"}]}, {"env": [{"name": "B"}, {"name": "A"}]}) == [
        ("env(order)", ["A", "B"], ["B", "A"])
    ]
    assert diff({"args": ["a", "b"]}, {"args": ["a", "c"]}) == [("args[1]", "b", "c")]
    assert diff({"args": ["a"]}, {"args": ["a", "c"]}) == [("args", ["a"], ["a", "c"])]
    assert diff({"x": 1}, {"x": 1}) == []


def test_compare_case_names_jobs_on_one_side_and_value_differences() -> None:
    case = Case("c", [], ["tj"])
    up = {"tj": [job("tj-node-0", [{"name": "A", "value": "1"}]), job("tj-init-0")]}
    ours = {"tj": [job("tj-node-0", [{"name": "A", "value": "2"}])]}
    got = compare_case(case, up, ours, [UID])
    assert [(d.where, d.upstream, d.ours) for d in got] == [
        ("tj/init-0: <job>", "present", ABSENT),
        ("tj/node-0: spec.template.spec.containers[node].env[A].value", "1", "2"),
    ]
    assert all(d.reason is None for d in got)
    (none,) = compare_case(Case("c", [], ["gone"]), {}, {}, [])
    assert none.reason is None and "no Job" in none.where


def test_explain_matches_case_and_path() -> None:
    rules = [("^torch", r"node-0: spec\.template\.spec\.x$", "why")]
    assert explain("torch-distributed", "tj/node-0: spec.template.spec.x", rules) == "why"
    assert explain("mlx", "tj/node-0: spec.template.spec.x", rules) is None
    env = "rt-torch-distributed/node-0: spec.template.spec.containers[node].env"
    assert explain("torch-distributed", env) is not None  # upstream sets no env without spec.trainer
    assert explain("torch-distributed", env.replace("rt-", "rt2-")) is None


def test_report_counts_unexplained() -> None:
    cases = [Case("a", [], [], (2, 2)), Case("b", [], [])]
    diffs = [Difference("a", "w", 1, 2, None), Difference("a", "v", 1, 2, "why"), Difference("b", "u", 1, 2, "why")]
    lines: list[str] = []
    assert report(cases, diffs, lines.append) == 1
    assert lines[1].split() == ["a", "2/2", "2", "1", "1"] and lines[2].split() == ["b", "-", "1", "1", "0"]
    assert lines[3].split() == ["total", "3", "2", "1"]
    assert "UNEXPLAINED" in lines[4] and "explained: why" in lines[5]


def test_cases_and_names() -> None:
    rt = {"kind": "ClusterTrainingRuntime", "metadata": {"name": "torchtune-llama3.2-1b"}, "spec": {}}
    case = runtime_case(rt)
    assert dns_name("Qwen2.5_1.5B") == "qwen2-5-1-5b"
    assert case.trainjobs == ["rt-torchtune-llama3-2-1b", "rt2-torchtune-llama3-2-1b"]
    assert case.objects[1]["spec"] == {"runtimeRef": {**case.objects[2]["spec"]["runtimeRef"]}}
    assert case.objects[2]["spec"]["runtimeRef"]["name"] == "torchtune-llama3.2-1b"
    assert case.objects[2]["spec"]["trainer"] == {"numNodes": 2}
    assert job_key({"metadata": {"name": "tj-node-0"}}, "tj") == "node-0"
    assert select([case], []) == [case]
    with pytest.raises(ValueError, match="no case nope"):
        select([case], ["nope"])
