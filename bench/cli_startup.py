"""CPU seconds of short ``trainer`` commands: ``--help``, ``get tj`` and ``get tj -o wide``.

Each command runs ``--repeat`` times as its own process (``python -m trainer.cli``) against the
cluster of ``$KUBECONFIG`` (or ``--kubeconfig``); the user plus system CPU time of each run is read
from ``os.wait4`` and the median, minimum and maximum printed. With ``--compare REF`` (a git ref) the
same commands of REF's code, from a temporary ``git worktree add --detach``, run alternately with this
checkout's, so both see the same machine load, and the ratio of the medians is printed; the load
average is printed before and after, since a busy machine inflates every figure. The ``trainer`` and ``api``
packages of each checkout are byte-compiled first (``compileall``), as an installed package is: with
``PYTHONDONTWRITEBYTECODE`` set, every run would compile them again and measure that too::

    python -m bench.cli_startup --repeat 9
    python -m bench.cli_startup --repeat 9 --compare HEAD~3

A cluster to run against: ``eval "$(python -m localcluster up)"`` and a few TrainJobs
(``kubectl apply -f config/samples/``). The figures are not asserted anywhere: a test checks instead
that ``get`` does not import what makes it slow (``tests/entry/test_cli_imports.py``).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from localcluster import ROOT

COMMANDS: dict[str, list[str]] = {
    "trainer --help": ["--help"],
    "trainer get tj": ["get", "tj"],
    "trainer get tj -o wide": ["get", "tj", "-o", "wide"],
}
"""The commands measured, by the name printed, and their arguments."""


def cpu_seconds(argv: list[str], checkout: Path, env: dict[str, str]) -> float:
    """User plus system CPU seconds of one run of ``argv`` in the directory ``checkout`` (whose
    ``trainer`` and ``api`` packages ``python -m`` then imports first), output discarded. Raises
    ``RuntimeError`` when it exits non-zero: a failing command is not a figure."""
    proc = subprocess.Popen(argv, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err.decode(errors='replace')}")
    return usage.ru_utime + usage.ru_stime


def summary(seconds: list[float]) -> str:
    """``median (min..max, n)`` of CPU seconds, to the millisecond."""
    return f"{statistics.median(seconds):.3f} s ({min(seconds):.3f}..{max(seconds):.3f}, n={len(seconds)})"


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def checkouts(compare: str | None) -> Iterator[dict[str, Path]]:
    """The checkouts measured, by label: this one, and REF's code from a temporary worktree (removed
    on exit) when ``compare`` names a ref. Raises ``CalledProcessError`` for a ref git cannot check out."""
    if compare is None:
        yield {"this": ROOT}
        return
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        ref = Path(tmp) / "ref"
        subprocess.run(["git", "worktree", "add", "--detach", str(ref), compare], cwd=ROOT, check=True)
        try:
            yield {compare: ref, "this": ROOT}
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(ref)], cwd=ROOT, check=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cli_startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (default 7)")
    parser.add_argument("--kubeconfig", help="the cluster's kubeconfig (default: $KUBECONFIG)")
    parser.add_argument("--compare", metavar="REF", help="a git ref to measure too, alternating with this checkout")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    if args.kubeconfig:
        env["KUBECONFIG"] = os.path.abspath(args.kubeconfig)
    with checkouts(args.compare) as trees:
        for path in trees.values():
            for package in ("trainer", "api"):  # a ref before the models moved under trainer/ has api/
                if (path / package).is_dir():
                    compileall.compile_dir(path / package, quiet=1)
        print(f"cores {os.cpu_count()}, load average {load()} (before)")
        for name, command in COMMANDS.items():
            seconds: dict[str, list[float]] = {label: [] for label in trees}
            for _ in range(max(1, args.repeat)):
                for label, path in trees.items():
                    seconds[label].append(cpu_seconds([sys.executable, "-m", "trainer.cli", *command], path, env))
            for label, values in seconds.items():
                print(f"{name + ' [' + label + ']':40} {summary(values)} CPU")
            if args.compare is not None:
                ratio = statistics.median(seconds["this"]) / statistics.median(seconds[args.compare])
                print(f"{name}: this/{args.compare} {ratio:.2f}")
        print(f"load average {load()} (after)")


if __name__ == "__main__":
    main()
