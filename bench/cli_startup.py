"""CPU seconds of short ``trainer`` commands: ``--help``, ``get tj`` and ``get tj -o wide``.

Each command runs ``--repeat`` times as its own process (``python -m trainer.cli``) against the
cluster of ``$KUBECONFIG`` (or ``--kubeconfig``); the user plus system CPU time of each run is read
from ``os.wait4`` and the median, minimum and maximum printed. With ``--baseline DIR`` (another
checkout of this repository, e.g. a ``git worktree`` of an older commit) the same commands of that
checkout run alternately with this one's, so both see the same machine load; the load average is
printed before and after, since a busy machine inflates every figure. The ``trainer`` and ``api``
packages of each checkout are byte-compiled first (``compileall``), as an installed package is: with
``PYTHONDONTWRITEBYTECODE`` set, every run would compile them again and measure that too::

    python -m bench.cli_startup --repeat 9
    python -m bench.cli_startup --repeat 9 --baseline ../trainer-main

A cluster to run against: ``eval "$(python -m localcluster up)"`` and a few TrainJobs
(``kubectl apply -f config/samples/``). The figures are not asserted anywhere: a test checks instead
that ``get`` does not import what makes it slow (``tests/cli/test_cli_imports.py``).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cli_startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (default 7)")
    parser.add_argument("--kubeconfig", help="the cluster's kubeconfig (default: $KUBECONFIG)")
    parser.add_argument("--baseline", type=Path, help="another checkout whose CLI runs alternately")
    args = parser.parse_args(argv)
    checkouts = {"this": ROOT}
    if args.baseline is not None:
        checkouts["baseline"] = args.baseline.resolve()
    env = dict(os.environ)
    if args.kubeconfig:
        env["KUBECONFIG"] = os.path.abspath(args.kubeconfig)
    for path in checkouts.values():
        for package in ("trainer", "api"):
            compileall.compile_dir(path / package, quiet=1)
    print(f"cores {os.cpu_count()}, load average {load()} (before)")
    for name, command in COMMANDS.items():
        seconds: dict[str, list[float]] = {checkout: [] for checkout in checkouts}
        for _ in range(max(1, args.repeat)):
            for checkout, path in checkouts.items():
                seconds[checkout].append(cpu_seconds([sys.executable, "-m", "trainer.cli", *command], path, env))
        for checkout, values in seconds.items():
            label = f"{name} [{checkout}]" if args.baseline is not None else name
            print(f"{label:40} {summary(values)} CPU")
    print(f"load average {load()} (after)")


if __name__ == "__main__":
    main()
