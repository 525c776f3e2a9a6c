"""TPE against random search on a synthetic objective, through the controller's own search
(:func:`trainer.optimizationjob.search.next_assignments`), no cluster.

``python -m bench.tuning --seeds 20 --trials 20`` runs, for each seed, an OptimizationJob's search of
``--trials`` trials one after another (each trial's parameters asked of the search given every earlier
trial's value, as the reconciles would) on the 2-D quadratic ``(x - 0.7)**2 + (y + 1.3)**2`` plus Gaussian
noise (standard deviation ``--noise``, drawn from a generator seeded by the job's seed and the trial's
index), over ``x, y`` uniform in [-5, 5]; once with ``random``, once with ``tpe`` (``nStartupTrials``
``--startup``). Printed: for each algorithm, the mean over the seeds of the best value found (lower is
better; the objective's minimum is 0) and its standard deviation. Deterministic: the same arguments print
the same figures.
"""

from __future__ import annotations

import argparse
import random
import statistics
from typing import Any

from trainer.api.optimizationjob import TRIAL_SUCCEEDED, OptimizationJobSpec
from trainer.optimizationjob.search import Observed, next_assignments


def job_spec(algorithm: str, trials: int, startup: int) -> OptimizationJobSpec:
    """The OptimizationJob spec of a search over ``x``, ``y`` in [-5, 5] with ``algorithm`` (``random`` or
    ``tpe``), ``trials`` trials one at a time."""
    chosen: dict[str, Any] = {"tpe": {"nStartupTrials": startup}} if algorithm == "tpe" else {"random": {}}
    space = {"uniform": {"min": "-5", "max": "5"}}
    return OptimizationJobSpec.model_validate(
        {
            "objectives": [{"metric": "loss", "direction": "Minimize"}],
            "searchAlgorithm": chosen,
            "parameters": [{"name": "x", "searchSpace": space}, {"name": "y", "searchSpace": space}],
            "numTrials": trials,
            "parallelTrials": 1,
            "trainJobTemplate": {"spec": {"runtimeRef": {"name": "t"}}},
        }
    )


def objective(x: float, y: float, noise: float, rng: random.Random) -> float:
    """The quadratic ``(x - 0.7)**2 + (y + 1.3)**2`` plus noise of standard deviation ``noise``."""
    return (x - 0.7) ** 2 + (y + 1.3) ** 2 + rng.gauss(0.0, noise)


def best_after(algorithm: str, seed: int, trials: int, noise: float = 0.1, startup: int = 5) -> float:
    """The best (lowest) value the search with ``algorithm`` and ``seed`` finds in ``trials`` trials."""
    spec = job_spec(algorithm, trials, startup)
    done: list[Observed] = []
    for i in range(trials):
        params = next_assignments(spec, seed, done, [i])[i]
        value = objective(float(params["x"]), float(params["y"]), noise, random.Random(f"{seed}:{i}"))
        done.append(Observed(i, params, TRIAL_SUCCEEDED, value))
    return min(o.value for o in done if o.value is not None)


def compare(seeds: int, trials: int, noise: float = 0.1, startup: int = 5) -> dict[str, list[float]]:
    """The best value of each seed ``0 .. seeds - 1``, by algorithm (``random``, ``tpe``)."""
    return {a: [best_after(a, s, trials, noise, startup) for s in range(seeds)] for a in ("random", "tpe")}


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print the mean best value of each algorithm."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--startup", type=int, default=5, help="TPE's nStartupTrials")
    args = parser.parse_args(argv)
    results = compare(args.seeds, args.trials, args.noise, args.startup)
    print(f"{args.seeds} seeds x {args.trials} trials, noise {args.noise}, TPE nStartupTrials {args.startup}")
    for name, bests in results.items():
        print(f"{name:>6}: mean best {statistics.mean(bests):.4f} (stdev {statistics.stdev(bests):.4f})")


if __name__ == "__main__":
    main()
