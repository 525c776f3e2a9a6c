"""Run a module with :mod:`tracemalloc` on, and write where its memory is when asked.

``python -m bench.mem_profile -o PATH -m MODULE [ARGS...]`` runs ``MODULE`` as ``python -m MODULE
ARGS...`` would, tracing every allocation from the start (:data:`FRAMES` frames each). On ``SIGUSR1``
it writes a snapshot of the memory its live objects hold, by where each was allocated, to ``PATH``
(:meth:`tracemalloc.Snapshot.dump`; read it with :func:`top`) and then ``PATH.done``, so a reader knows the
snapshot is whole. Tracing costs CPU and some memory of its own (not counted in the snapshot): use it
for where the memory goes, not for how much CPU or RSS the process takes."""

from __future__ import annotations

import runpy
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

from bench.cpu_profile import command_line

USAGE = "python -m bench.mem_profile -o PATH -m MODULE [ARGS...]"
FRAMES = 16
"""Frames kept per allocation: enough to name the caller of a library's allocation."""


def top(path: Path, limit: int = 15, under: str = "trainer/") -> list[tuple[str, float, int]]:
    """The ``limit`` places under ``under`` (a path fragment) whose allocations hold the most memory in
    the snapshot at ``path``: ``(file:line, MiB, objects)``, largest first. An allocation is charged to the
    innermost of its frames under ``under`` (a dict the cache's projection builds is the projection's, not
    the JSON parser's); one with no such frame to the library its innermost frame is in (``<pydantic>``,
    ``<stdlib>``: module code and classes built at import, buffers of the event loop's I/O)."""
    snapshot = tracemalloc.Snapshot.load(str(path))
    places: dict[str, list[int]] = {}
    for stat in snapshot.statistics("traceback"):
        frames = list(reversed(stat.traceback))  # the most recent first
        ours = next((f for f in frames if under in f.filename), None)
        place = _library(frames[0].filename) if ours is None else f"{ours.filename.split(under, 1)[1]}:{ours.lineno}"
        held = places.setdefault(place, [0, 0])
        held[0] += stat.size
        held[1] += stat.count
    ranked = sorted(places.items(), key=lambda item: -item[1][0])[:limit]
    return [(place, round(size / 2**20, 2), count) for place, (size, count) in ranked]


def _library(filename: str) -> str:
    """``<package>`` of a file in ``site-packages``, ``<stdlib>`` for the standard library, ``<other>``."""
    if "site-packages/" in filename:
        return f"<{filename.split('site-packages/', 1)[1].split('/', 1)[0].removesuffix('.py')}>"
    return "<stdlib>" if "/lib/python3" in filename or filename.startswith("<frozen") else "<other>"


def done_path(out: Path) -> Path:
    """The file written once the snapshot at ``out`` is whole."""
    return out.with_name(out.name + ".done")


def main(argv: list[str] | None = None) -> None:
    """Run ``-o PATH -m MODULE [ARGS...]`` (:func:`bench.cpu_profile.command_line`) traced; its exit
    status is kept."""
    path, module, args = command_line(argv, USAGE)
    out = Path(path)

    def dump(_signum: int, _frame: FrameType | None) -> None:
        tracemalloc.take_snapshot().dump(str(out))
        done_path(out).touch()

    signal.signal(signal.SIGUSR1, dump)
    tracemalloc.start(FRAMES)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
