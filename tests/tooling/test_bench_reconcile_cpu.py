"""``python -m bench.reconcile_cpu`` measures: a few TrainJobs reconciled by this checkout's code cost
some CPU, printed per TrainJob."""

from __future__ import annotations

import pytest

from bench import reconcile_cpu


def test_a_measurement_of_this_checkout_is_a_positive_cost() -> None:
    assert reconcile_cpu.measure(reconcile_cpu.ROOT, 3) > 0


def test_the_printed_run_names_n_and_the_median(capsys: pytest.CaptureFixture[str]) -> None:
    assert reconcile_cpu.main(["--n", "3", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("N = 3 TrainJobs, 3 reconciles each, 1 rounds")
    assert "ms per TrainJob; median" in out
