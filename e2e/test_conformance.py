"""Upstream and ours, pod for pod, for a few cases (:mod:`bench.conformance`): upstream Kubeflow Trainer
v2.3.0 + JobSet v0.12.0 on one local cluster, this operator on another (each started and stopped here,
one after the other), the same runtime and TrainJobs applied to both, and the Jobs' specs (pod templates
included), labels and annotations compared after normalising. Fails on any difference that
:data:`bench.conformance.EXPLAINED` (and docs/api.md "Conformance with upstream, pod for pod") does not
explain, printing each. The whole set of cases: ``python -m bench.conformance``."""

from __future__ import annotations

import pytest

from bench.conformance import report, run

pytestmark = [pytest.mark.e2e, pytest.mark.builds("upstream")]

CASES = ["torch-distributed", "torchtune-llama3.2-1b", "01-multi-node", "05-multi-step"]
"""The torch runtime, a runtime with initializers on a volume claim, and two of upstream's examples."""


def test_upstream_and_ours_create_the_same_jobs() -> None:
    cases, diffs = run(CASES, quiet=6.0, timeout=90.0, log=print)
    lines: list[str] = []
    unexplained = report(cases, diffs, lines.append)
    print("\n".join(lines))
    assert all(c.trainjobs for c in cases)
    assert unexplained == 0, "\n".join(line for line in lines if "UNEXPLAINED" in line)
