"""The search (:mod:`trainer.optimizationjob.search`), a pure function of the trials observed: a seeded
random sequence is reproduced whatever the history, the batching or the operator; a grid visits each point
once; values stay in their spaces."""

from __future__ import annotations

from typing import Any

from api.optimizationjob import OptimizationJobSpec
from trainer.optimizationjob.search import Observed, grid_size, next_assignments, seed_of, trial_seed


def spec(**fields: Any) -> OptimizationJobSpec:
    base: dict[str, Any] = {
        "objectives": [{"metric": "loss"}],
        "searchAlgorithm": {"random": {"seed": 7}},
        "parameters": [
            {"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "0.1"}}},
            {"name": "layers", "searchSpace": {"uniform": {"min": "1", "max": "8", "type": "Int"}}},
            {"name": "momentum", "searchSpace": {"uniform": {"min": "0.5", "max": "0.99"}}},
            {"name": "opt", "searchSpace": {"categorical": {"choices": ["sgd", "adam"]}}},
        ],
        "numTrials": 20,
        "parallelTrials": 4,
        "trainJobTemplate": {"spec": {"runtimeRef": {"name": "t"}}},
    }
    return OptimizationJobSpec.model_validate({**base, **fields})


def test_a_seeded_random_sequence_is_reproduced_whatever_the_history_and_batching() -> None:
    s = spec()
    all_at_once = next_assignments(s, 7, [], range(20))
    assert len(all_at_once) == 20
    # One at a time, each earlier trial observed with some outcome, as reconciles would see them.
    observed: list[Observed] = []
    for i in range(20):
        (got,) = next_assignments(s, 7, observed, [i]).values()
        assert got == all_at_once[i], i
        state = ("Succeeded", "Failed", "Running")[i % 3]
        observed.append(Observed(i, got, state, float(i) if state == "Succeeded" else None))
    # Out of order, with gaps (a refused create tried again later).
    assert next_assignments(s, 7, observed[:3] + observed[5:], [3, 4]) == {3: all_at_once[3], 4: all_at_once[4]}
    # Another seed, another sequence.
    assert next_assignments(s, 8, [], range(20)) != all_at_once


def test_random_values_are_in_their_spaces_and_vary() -> None:
    drawn = list(next_assignments(spec(), 1234, [], range(20)).values())
    assert len({d["lr"] for d in drawn}) == 20
    for d in drawn:
        assert 0.0001 <= float(d["lr"]) <= 0.1
        assert d["layers"] == str(int(d["layers"])) and 1 <= int(d["layers"]) <= 8
        assert 0.5 <= float(d["momentum"]) <= 0.99
    assert {d["opt"] for d in drawn} == {"sgd", "adam"}


def test_grid_visits_every_point_once_in_a_fixed_order() -> None:
    grid = spec(
        searchAlgorithm={"grid": {}},
        parameters=[
            {"name": "bs", "searchSpace": {"categorical": {"choices": ["16", "32", "64"]}}},
            {"name": "opt", "searchSpace": {"categorical": {"choices": ["sgd", "adam"]}}},
        ],
    )
    assert grid_size(grid) == 6
    points = next_assignments(grid, 0, [], range(20))
    assert sorted(points) == list(range(6))  # nothing past the grid
    assert len({tuple(sorted(p.items())) for p in points.values()}) == 6
    done = [Observed(i, points[i], "Failed") for i in (0, 2)]
    assert next_assignments(grid, 0, done, [1, 3, 4, 5]) == {i: points[i] for i in (1, 3, 4, 5)}


def test_a_trial_whose_parameters_are_not_in_the_space_still_counts() -> None:
    bad = [Observed(0, {"lr": "7", "layers": "x"}, "Succeeded", 1.0), Observed(1, {}, "Running")]
    got = next_assignments(spec(), 7, bad, [2])
    assert got == {2: next_assignments(spec(), 7, [], [2])[2]}


def test_seeds() -> None:
    assert trial_seed(7, 0) == trial_seed(7, 0) != trial_seed(7, 1)
    assert 0 <= trial_seed(-(2**63), 99) < 2**32
    assert seed_of("uid-a") != seed_of("uid-b") and -(2**63) <= seed_of("uid-a") < 2**63
