"""The pure parts of ``bench.gang``: the apiserver's admission histogram, the big TrainJob, its flags.
No timings are asserted."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench.gang import ADMISSION_METRIC, admission, admission_delta, big_trainjob, bound, parse_args


def apiserver_text(calls: dict[tuple[str, str], list[float]]) -> str:
    """The apiserver's admission histogram after these calls, by ``(webhook name, type)``."""
    r = CollectorRegistry()
    h = Histogram(ADMISSION_METRIC, "admission", ["name", "operation", "rejected", "type"], registry=r)
    for (name, kind), seconds in calls.items():
        for s in seconds:
            h.labels(name, "CREATE", "false", kind).observe(s)
    return generate_latest(r).decode()


def test_admission_sums_this_projects_webhooks_only() -> None:
    text = apiserver_text(
        {
            ("validate.trainjobs.trainer.kubeflow.org", "validating"): [0.002, 0.004],
            ("default.pods.core", "admit"): [0.001],
            ("mjobset.kb.io", "admit"): [0.5],
        }
    )
    got = admission(text)
    assert set(got) == {"validate.trainjobs.trainer.kubeflow.org", "default.pods.core"}
    calls, seconds = got["validate.trainjobs.trainer.kubeflow.org"]
    assert calls == 2 and seconds == pytest.approx(0.006)


def test_admission_delta_gives_calls_and_mean_ms_of_what_moved() -> None:
    before = {"a": (2.0, 0.01), "b": (1.0, 0.5)}
    after = {"a": (4.0, 0.03), "b": (1.0, 0.5), "c": (1.0, 0.004)}
    assert admission_delta(before, after) == {"a": {"calls": 2.0, "mean_ms": 10.0}, "c": {"calls": 1.0, "mean_ms": 4.0}}


def test_big_trainjob_has_the_nodes_and_small_requests() -> None:
    tj = big_trainjob(1000)
    assert tj["metadata"] == {"name": "gang-1000", "namespace": "bench"}
    assert tj["spec"]["trainer"]["numNodes"] == 1000
    assert tj["spec"]["trainer"]["resourcesPerNode"]["requests"] == {"cpu": "10m", "memory": "16Mi"}
    assert bound({"spec": {"nodeName": "n1"}}) and not bound({"spec": {}})


def test_gang_flags() -> None:
    assert parse_args([]).nodes == 1000
    with pytest.raises(SystemExit):
        parse_args(["--nodes", "0"])
