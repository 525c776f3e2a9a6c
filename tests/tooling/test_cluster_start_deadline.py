"""``LocalCluster.start``'s timeout counts from when its binaries are there: a start that first waits for a
build (its own, or another run's holding localcluster/build.sh's lock) keeps its whole timeout for
starting. A cold ``make test`` lost its session cluster to this: the deadline had passed while the lane
waited for Volcano and Kueue to build beside it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from localcluster import cluster as cluster_module
from localcluster.cluster import LocalCluster


class Started(Exception):
    """Raised in place of the first wait, with its deadline."""


def test_the_timeout_counts_from_when_the_binaries_are_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = LocalCluster(tmp_path, timeout=180.0)
    built: list[float] = []

    def build(**_: Any) -> dict[str, Path]:
        built.append(time.monotonic())  # when a build (or the wait for another run's) ended
        return local.binaries

    def first_wait(what: str, deadline: float, *_: Any, **__: Any) -> float:
        raise Started(what, deadline)

    monkeypatch.setattr(cluster_module, "ensure_binaries", build)
    monkeypatch.setattr(local, "_start_etcd", lambda ports: None)
    monkeypatch.setattr(local, "_wait", first_wait)
    with pytest.raises(Started) as started:
        local.start()
    what, deadline = started.value.args
    assert what == "etcd healthy"
    assert deadline >= built[-1] + local.timeout, "the deadline began before the binaries were there"
