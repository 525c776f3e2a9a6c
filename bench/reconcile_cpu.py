"""The CPU one TrainJob's reconciles cost, with no cluster: the pure core and the I/O shell of this
checkout, or of another commit beside it, on the same machine at the same moment.

``python -m bench.reconcile_cpu --n 400`` stores the torch ClusterTrainingRuntime sample and N TrainJobs
(``numNodes: 2``) in the recording double of ``Kube`` (``tests/kube_double.py``) under the real manager,
informers and reconciler (``tests/harness.py``'s ``World``), then reconciles each TrainJob three times
(its children and first status, then the settled reconciles that write nothing) and prints the process
CPU time per TrainJob in milliseconds (``time.process_time``; logging at ``warning``, the first TrainJob
as warm-up).

``--compare REF`` (a git ref) measures REF's code too, from a temporary ``git worktree add --detach`` of
it (removed after), each measurement in a fresh interpreter whose ``sys.path`` starts with its tree;
``--rounds`` rounds alternate REF and this checkout, so a machine that slows down slows both. Printed:
each run, the median of each side and their ratio this/REF. What it does not see: the apiserver, the
network and the watch traffic of a real cluster (``bench.burst`` measures those).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURE = """
import asyncio, copy, sys, time
from tests.harness import World
from trainer.framework.kube.cache import key_of
from trainer.main import configure_logging

configure_logging("json", "warning")
N = int(sys.argv[1])


async def run() -> float:
    w = World("torch", "none")
    base = copy.deepcopy(w.obj)
    keys = []
    for i in range(N + 1):
        obj = copy.deepcopy(base)
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            obj["metadata"].pop(k, None)
        obj["metadata"]["name"] = f"tj-{i}"
        obj.pop("status", None)
        keys.append(key_of(w.kube.put(obj)))
    reconcile = w.manager.reconcilers[w.controller]
    await reconcile(keys[0])
    began = time.process_time()
    for key in keys[1:]:
        for _ in range(3):
            await reconcile(key)
    return (time.process_time() - began) / N * 1000


print(f"{asyncio.run(run()):.4f}")
"""
"""The measurement, run in the tree measured (it uses only what ``tests/harness.py`` has had for long)."""


def measure(tree: Path, n: int) -> float:
    """CPU ms per TrainJob of ``n`` TrainJobs reconciled by the code of ``tree``. Raises
    ``subprocess.CalledProcessError`` when the run fails."""
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(n)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.reconcile_cpu", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=400, help="TrainJobs per measurement")
    p.add_argument("--rounds", type=int, default=3, help="measurements of each side")
    p.add_argument("--compare", metavar="REF", help="a git ref to measure too, alternating with this checkout")
    args = p.parse_args(argv)
    print(f"N = {args.n} TrainJobs, 3 reconciles each, {args.rounds} rounds")
    if args.compare is None:
        runs = [measure(ROOT, args.n) for _ in range(args.rounds)]
        print(f"this: {', '.join(f'{r:.3f}' for r in runs)} ms per TrainJob; median {statistics.median(runs):.3f}")
        return 0
    with tempfile.TemporaryDirectory(prefix="reconcile-cpu-") as tmp:
        ref = Path(tmp) / "ref"
        subprocess.run(["git", "worktree", "add", "--detach", str(ref), args.compare], cwd=ROOT, check=True)
        try:
            pairs = [(measure(ref, args.n), measure(ROOT, args.n)) for _ in range(args.rounds)]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(ref)], cwd=ROOT, check=False)
    theirs, ours = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    for i, (a, b) in enumerate(pairs, 1):
        print(f"round {i}: {args.compare} {a:.3f}, this {b:.3f} ms per TrainJob")
    print(f"median: {args.compare} {theirs:.3f}, this {ours:.3f}; this/{args.compare} {ours / theirs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
