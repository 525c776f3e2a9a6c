"""The search (:mod:`trainer.optimizationjob.search`), a pure function of the trials observed: a seeded
random sequence is reproduced whatever the history, the batching or the operator; a grid visits each point
once; values stay in their spaces."""

from __future__ import annotations

import statistics
from typing import Any

from bench.tuning import compare
from tests.conftest import load_sample
from trainer.api.optimizationjob import OptimizationJobSpec
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


def test_the_digits_samples_seeded_random_search_draws_a_fixed_sequence() -> None:
    # config/samples/digits/optimizationjob.yaml (random, seed 7): the sequence its trials get on any
    # cluster and after any restart (e2e/test_optimizationjob_real.py ran these on real nodes). Another
    # Optuna or NumPy that drew otherwise would give a seeded job other trials than it gave before.
    sample = OptimizationJobSpec.model_validate(load_sample("digits/optimizationjob.yaml")["spec"])
    assert sample.search_algorithm is not None and sample.search_algorithm.random is not None
    seed = sample.search_algorithm.random.seed
    assert seed == 7
    drawn = next_assignments(sample, seed, [], range(6))
    assert drawn == {
        0: {"lr": "0.018746954277831", "momentum": "0.9340776933694231"},
        1: {"lr": "0.0044326160327140445", "momentum": "0.8459274045064922"},
        2: {"lr": "0.030231976427060277", "momentum": "0.7024072916357499"},
        3: {"lr": "0.014955355848750242", "momentum": "0.5532319089205068"},
        4: {"lr": "0.002642494767791877", "momentum": "0.6636051008956594"},
        5: {"lr": "0.028440480188660064", "momentum": "0.7405974712069207"},
    }
    # The same sequence one trial at a time, each after the earlier ones finished (as the controller asks).
    observed: list[Observed] = []
    for i in range(6):
        assert next_assignments(sample, seed, observed, [i]) == {i: drawn[i]}
        observed.append(Observed(i, drawn[i], "Succeeded", 0.5 + i / 100))


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


def tpe_spec(**tpe: Any) -> OptimizationJobSpec:
    return spec(searchAlgorithm={"tpe": {"seed": 3, **tpe}})


def test_tpe_is_a_function_of_the_seed_and_the_outcomes_and_asks_only_new_indices() -> None:
    s = tpe_spec(nStartupTrials=2)
    observed: list[Observed] = []
    for i in range(6):
        (got,) = next_assignments(s, 3, observed, [i]).values()
        observed.append(Observed(i, got, "Succeeded", float(i)))
    # The same seed and outcomes: the same parameters, asked one at a time or from a fresh study.
    again = next_assignments(s, 3, observed[:5], [5])
    assert again == {5: observed[5].parameters}
    # Other outcomes of the same trials: the estimator proposes otherwise once past the startup trials.
    flipped = [Observed(o.index, o.parameters, o.state, -float(o.index)) for o in observed[:5]]
    assert next_assignments(s, 3, flipped, [5]) != again
    # Startup trials are seeded draws: the outcomes do not change them.
    assert next_assignments(s, 3, flipped[:1], [1]) == next_assignments(s, 3, observed[:1], [1])
    # Only the indices asked for are answered: those the trials hold are never asked again.
    assert sorted(next_assignments(s, 3, observed[:3], [3, 4])) == [3, 4]


def test_tpe_takes_early_stopped_running_failed_and_unreadable_trials() -> None:
    s = tpe_spec(nStartupTrials=1)
    first = next_assignments(s, 3, [], [0, 1, 2, 3])
    observed = [
        Observed(0, first[0], "Succeeded", 0.5),
        Observed(1, first[1], "EarlyStopped", None, ((10, 2.0), (20, 3.0))),
        Observed(2, first[2], "Running"),
        Observed(3, {"lr": "nan"}, "Failed"),
    ]
    got = next_assignments(s, 3, observed, [4, 5])
    assert sorted(got) == [4, 5]
    for d in got.values():
        assert 0.0001 <= float(d["lr"]) <= 0.1 and d["opt"] in {"sgd", "adam"}


def test_tpe_finds_better_values_than_random_search_on_a_noisy_quadratic() -> None:
    # 20 seeds x 20 trials, one at a time (bench/tuning.py prints the figures).
    results = compare(seeds=20, trials=20)
    random_mean, tpe_mean = statistics.mean(results["random"]), statistics.mean(results["tpe"])
    assert tpe_mean < random_mean * 0.6, (tpe_mean, random_mean)
