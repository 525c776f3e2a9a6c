"""The pure parts of ``bench.statusserver``: the reports posted, what counts as a trainerStatus write,
the figures of a phase, the operator's requests by code, its flags. No timings are asserted."""

from __future__ import annotations

import json

import pytest

from bench.statusserver import (
    RUNTIME,
    Tally,
    by_code,
    figures,
    parse_args,
    report,
    runtime,
    trainer_status_changed,
    trainjob,
)
from trainer.statusserver.payload import parse_update


def test_every_post_is_a_report_the_status_server_accepts_and_each_differs() -> None:
    bodies = [report(3, step) for step in range(300)]
    for body in bodies:
        assert parse_update(json.dumps(body).encode()) is not None
    assert len({str(b) for b in bodies}) == 300
    assert bodies[101]["trainerStatus"]["progressPercentage"] == 0, "progress stays within 0-100"


def test_a_write_is_a_change_of_trainer_status_only() -> None:
    a = {"status": {"trainerStatus": {"progressPercentage": 1}, "conditions": []}}
    b = {"status": {"trainerStatus": {"progressPercentage": 2}, "conditions": []}}
    c = {"status": {"trainerStatus": {"progressPercentage": 2}, "conditions": [{"type": "Created"}]}}
    assert trainer_status_changed(None, a)
    assert trainer_status_changed(a, b)
    assert not trainer_status_changed(b, c), "the reconciler's status write is not a report"
    assert not trainer_status_changed(None, {"status": {}})


def test_figures_count_posts_answered_200_and_writes_per_post() -> None:
    t = Tally(start=100.0)
    for i in range(8):
        t.add(200, 100.0 + i, 0.01 * (i + 1))
    t.add(429, 107.5, 0.5)
    got = figures(t, 4.0, 2, 1.5, interval=5.0)
    assert got["posts"] == 8 and got["posts_per_second"] == 2.0
    assert got["codes"] == {"200": 8, "429": 1}
    assert got["writes"] == 2 and got["writes_per_post"] == 0.25
    assert got["latency"]["max"] == 0.5
    assert got["latency_after_first_interval"]["median"] == 0.075, "posts sent at 5, 6, 7 and 7.5 s"
    assert figures(Tally(), 1.0, 0, 0.0, 5.0)["writes_per_post"] is None
    with pytest.raises(ValueError):
        figures(t, 0.0, 2, 0.0, 5.0)


def test_requests_by_code_are_what_moved_between_scrapes() -> None:
    before = {("PATCH", "trainjobs/status", "200"): 10.0, ("POST", "tokenreviews", "201"): 4.0}
    after = {
        ("PATCH", "trainjobs/status", "200"): 30.0,
        ("PATCH", "trainjobs/status", "409"): 3.0,
        ("POST", "tokenreviews", "201"): 4.0,
    }
    assert by_code(before, after, "PATCH", "trainjobs/status") == {"200": 20.0, "409": 3.0}
    assert by_code(before, after, "POST", "tokenreviews") == {}


def test_the_trainjobs_run_pods_per_job_trainer_pods_of_the_runtime() -> None:
    rt = runtime(4)
    assert rt["spec"]["mlPolicy"]["numNodes"] == 4
    (node,) = rt["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["template"]["spec"]["template"]["spec"]["serviceAccountName"] == "default"
    tj = trainjob(7, 4)
    assert tj["metadata"]["name"] == "s-7"
    assert tj["spec"] == {"runtimeRef": {"name": RUNTIME, "kind": "TrainingRuntime"}, "trainer": {"numNodes": 4}}


def test_flags() -> None:
    args = parse_args([])
    assert (args.pods, args.pods_per_job, args.period) == (1000, 1, [0.0, 1.0])
    assert parse_args(["--pods", "100", "--pods-per-job", "10", "--period", "2"]).period == [2.0]
    with pytest.raises(SystemExit):
        parse_args(["--pods", "100", "--pods-per-job", "3"])
