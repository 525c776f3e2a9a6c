"""Run a module under :mod:`cProfile` timed by the process's CPU time, not by the wall clock.

``python -m bench.cpu_profile -o PATH -m MODULE [ARGS...]`` (``python -m cProfile``'s form) runs
``MODULE`` as ``python -m MODULE ARGS...`` would and writes the statistics to ``PATH`` when it exits
(read them with :mod:`pstats`). The timer is :func:`time.process_time` (seconds of CPU, every thread of
the process): ``python -m cProfile`` times by the wall clock, so on a busy machine a call during which
the process lost its core (a socket write that woke the apiserver) is charged the time it waited, and
the idle event loop shows as the top entry."""

from __future__ import annotations

import cProfile
import runpy
import sys
import time

USAGE = "python -m bench.cpu_profile -o PATH -m MODULE [ARGS...]"


def main(argv: list[str] | None = None) -> None:
    """Run ``-o PATH -m MODULE [ARGS...]`` (every argument after ``MODULE`` is its own) profiled; its
    exit status is kept. A malformed command line exits 2 with the usage."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 4 or argv[0] != "-o" or argv[2] != "-m":
        sys.exit(f"usage: {USAGE}")
    out, module, args = argv[1], argv[3], argv[4:]
    sys.argv = [module, *args]
    profiler = cProfile.Profile(time.process_time)
    try:
        profiler.runcall(runpy.run_module, module, run_name="__main__", alter_sys=True)
    finally:
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
