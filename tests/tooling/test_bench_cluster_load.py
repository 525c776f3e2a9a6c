"""bench.cluster_load: the apiserver's writes read from its metrics, and what a window between two
snapshots holds."""

from __future__ import annotations

import pytest

from bench.cluster_load import Snapshot, cluster_writes, print_windows, window


def sample(verb: str, resource: str, subresource: str, code: str, value: int) -> str:
    """One line of ``apiserver_request_total`` as the kube-apiserver writes it."""
    labels = (
        f'code="{code}",component="apiserver",dry_run="",group="",resource="{resource}",scope="resource",'
        f'subresource="{subresource}",verb="{verb}",version="v1"'
    )
    return f"apiserver_request_total{{{labels}}} {value}"


METRICS = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests.",
        "# TYPE apiserver_request_total counter",
        sample("POST", "jobs", "", "201", 10),
        sample("POST", "jobs", "", "409", 2),
        sample("PUT", "jobs", "status", "200", 7),
        sample("LIST", "jobs", "", "200", 40),
        sample("WATCH", "jobs", "", "200", 3),
        sample("GET", "pods", "", "200", 9),
        sample("PATCH", "trainjobs", "status", "200", 5),
        "# HELP apiserver_current_inflight_requests Maximal number of currently used inflight request limitation.",
        "# TYPE apiserver_current_inflight_requests gauge",
        'apiserver_current_inflight_requests{request_kind="mutating"} 4',
        "",
    ]
)


def test_writes_are_every_verb_but_reads_summed_over_codes_and_keyed_by_subresource() -> None:
    assert cluster_writes(METRICS) == {"POST jobs": 12.0, "PUT jobs/status": 7.0, "PATCH trainjobs/status": 5.0}


def test_text_the_parser_refuses_raises() -> None:
    with pytest.raises(ValueError):
        cluster_writes('apiserver_request_total{verb="POST" 1\n')


def test_a_window_holds_what_moved_between_its_snapshots() -> None:
    before = Snapshot(10.0, {"operator": 1.0, "kube-apiserver": 5.0, "etcd": 2.0}, {"POST jobs": 3.0, "POST leases": 4})
    after = Snapshot(
        30.0,
        {"operator": 4.5, "kube-apiserver": 25.0, "kube-scheduler": 9.0},
        {"POST jobs": 13.0, "POST leases": 4, "PATCH trainjobs/status": 5.0},
    )
    out = window(before, after)
    assert out["seconds"] == 20.0
    # etcd gone by the second snapshot, the scheduler not there at the first: neither is counted.
    assert out["cpu_seconds"] == {"kube-apiserver": 20.0, "operator": 3.5}
    assert list(out["cpu_seconds"]) == ["kube-apiserver", "operator"]
    assert out["cpu_total"] == 23.5
    assert out["writes"] == {"POST jobs": 10, "PATCH trainjobs/status": 5}
    assert list(out["writes"]) == ["POST jobs", "PATCH trainjobs/status"]
    assert out["writes_total"] == 15


def test_windows_print_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    a = Snapshot(0.0, {"operator": 0.0, "kube-apiserver": 0.0}, {})
    b = Snapshot(10.0, {"operator": 2.0, "kube-apiserver": 14.0}, {"POST jobs": 100.0})
    c = Snapshot(15.0, {"operator": 3.0, "kube-apiserver": 20.0}, {"POST jobs": 100.0, "POST events": 50.0})
    print_windows({"to every child": window(a, b), "then": window(b, c)})
    lines = {line.split("  ")[2].strip(): line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert lines["cores busy"][-2:] == ["1.60", "1.40"]
    assert lines["POST jobs"][-2:] == ["100", "0"]
    assert lines["POST events"][-2:] == ["0", "50"]
    assert lines["every write"][-2:] == ["100", "50"]
