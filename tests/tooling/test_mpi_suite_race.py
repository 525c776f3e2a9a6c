"""Which failures of mpi-operator's own e2e suite are run once more: only the suite's update of the MPIJob
it just created, refused for a stale resourceVersion (e2e/test_mpi_operator_e2e.py)."""

from __future__ import annotations

from e2e.test_mpi_operator_e2e import raced

CONFLICT = (
    'Operation cannot be fulfilled on mpijobs.kubeflow.org "pi": the object has been modified; please apply'
    " your changes to the latest version and try again"
)


def test_the_suites_own_stale_update_is_the_race() -> None:
    output = f"STEP: Resuming MPIJob\n• Failure [0.056 seconds]\n{CONFLICT}\nSummarizing 1 Failure:\n"
    assert raced(output)


def test_any_other_failure_is_not_rerun() -> None:
    assert not raced("Timed out after 200.000s.\nExpected <bool>: false to be true\nSummarizing 1 Failure:\n")
    conflict_on_a_job = CONFLICT.replace("mpijobs.kubeflow.org", "jobs.batch")
    assert not raced(f"{conflict_on_a_job}\nSummarizing 1 Failure:\n")
