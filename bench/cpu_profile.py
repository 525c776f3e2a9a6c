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


def command_line(argv: list[str] | None, usage: str) -> tuple[str, str, list[str]]:
    """``(PATH, MODULE, ARGS)`` of ``-o PATH -m MODULE [ARGS...]`` (``sys.argv[1:]`` when ``argv`` is
    None; every argument after ``MODULE`` is its own). A malformed command line exits 2 with ``usage``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 4 or argv[0] != "-o" or argv[2] != "-m":
        sys.exit(f"usage: {usage}")
    return argv[1], argv[3], argv[4:]


def main(argv: list[str] | None = None) -> None:
    """Run ``-o PATH -m MODULE [ARGS...]`` (:func:`command_line`) profiled; its exit status is kept."""
    out, module, args = command_line(argv, USAGE)
    sys.argv = [module, *args]
    profiler = cProfile.Profile(time.process_time)
    try:
        profiler.runcall(runpy.run_module, module, run_name="__main__", alter_sys=True)
    finally:
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
