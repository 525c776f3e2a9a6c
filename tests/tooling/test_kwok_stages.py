"""The local cluster's KWOK stages with pod delays asked for (``LocalCluster(pod_ready_delay=...,
pod_complete_delay=...)``): only the default delays of those two stages change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from localcluster.cluster import STAGES_FILE, LocalCluster


def stages(path: Path) -> dict[str, Any]:
    return {stage["metadata"]["name"]: stage for stage in yaml.safe_load_all(path.read_text())}


def test_without_delays_the_cluster_uses_the_stages_file_as_it_is(tmp_path: Path) -> None:
    assert LocalCluster(tmp_path)._stages_file() == STAGES_FILE


def test_pod_delays_change_the_default_delays_of_the_ready_and_complete_stages_only(tmp_path: Path) -> None:
    path = LocalCluster(tmp_path, pod_ready_delay=2, pod_complete_delay=15.5)._stages_file()
    assert path.parent == tmp_path
    got, original = stages(path), stages(STAGES_FILE)
    assert got["pod-ready"]["spec"]["delay"]["durationMilliseconds"] == 2000
    assert got["pod-complete"]["spec"]["delay"]["durationMilliseconds"] == 15500
    # An annotated pod still sets its own delay.
    assert (
        got["pod-complete"]["spec"]["delay"]["durationFrom"]
        == original["pod-complete"]["spec"]["delay"]["durationFrom"]
    )
    for name in ("pod-ready", "pod-complete"):
        got[name]["spec"]["delay"]["durationMilliseconds"] = original[name]["spec"]["delay"]["durationMilliseconds"]
    assert got == original


def test_one_delay_leaves_the_other_stage_as_it_is(tmp_path: Path) -> None:
    got = stages(LocalCluster(tmp_path, pod_complete_delay=3)._stages_file())
    assert got["pod-ready"]["spec"]["delay"]["durationMilliseconds"] == 0
    assert got["pod-complete"]["spec"]["delay"]["durationMilliseconds"] == 3000
