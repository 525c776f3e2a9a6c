"""Where the kube-apiserver's CPU goes in each window of a burst: its own CPU profiles, read by ``go tool pprof``.

A burst's time after every child is mostly the apiserver's (:mod:`bench.cluster_load`). With
``--apiserver-profile DIR``, ``bench.burst`` starts its local cluster's apiserver with ``--profiling=true``
and :class:`Profiler` takes its CPU profile (``GET /debug/pprof/profile?seconds=S``, the Go runtime's
pprof handler) back to back from the first create to the end of the last window, each into
``DIR/<window>-<n>.pb.gz``, named by the window it began in (a profile that spans the end of a window is
counted in the one it began in). :func:`places` reads the text of ``go tool pprof -top -cum`` over a
window's profiles into the CPU seconds of a few places of the apiserver's code (:data:`PLACES`), from
k8s.io/kubernetes v1.37.2 (``staging/src/k8s.io/apiserver``, ``staging/src/k8s.io/apiextensions-apiserver``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from trainer.framework.kube.client import Kube

SECONDS = 5
"""Seconds of each profile (the apiserver samples at 100 Hz)."""
PLACES: dict[str, str] = {
    "custom resource status writes": "k8s.io/apiextensions-apiserver/pkg/registry/customresource.(*StatusREST).Update",
    "creates": "k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1.2",
    "updates of built-in kinds": "k8s.io/apiserver/pkg/endpoints/handlers.UpdateResource.func1.4",
    "  of writes: managed fields": "k8s.io/apimachinery/pkg/util/managedfields/internal.(*FieldManager).Update",
    "  of writes: CEL rules": "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel.(*Validator).Validate",
    "  of writes: merge patches": "k8s.io/apiserver/pkg/endpoints/handlers.(*jsonPatcher).applyPatchToCurrentObject",
    "watch events sent": "k8s.io/apiserver/pkg/endpoints/handlers.(*WatchServer).HandleHTTP",
    "garbage collection": "runtime.gcBgMarkWorker",
}
"""Label -> the function whose cumulative CPU seconds it is: each top-level kind of work once (a custom
resource's status write; a create; a PUT of a built-in kind: a Job's status, Endpoints) and, indented,
parts of them that cut across (managed fields, CEL validation rules, a merge patch's decode and apply),
which overlap one another (a patch's managed fields are tracked while it is applied)."""
_TOTAL = re.compile(r"Total samples = ([0-9.]+)(ms|s)\b")
_ROW = re.compile(r"^\s*\S+\s+\S+%\s+\S+%\s+([0-9.]+)(ms|s)\s+\S+%\s+(.+?)\s*$")


def _seconds(value: str, unit: str) -> float:
    return float(value) / (1000 if unit == "ms" else 1)


def places(top: str) -> dict[str, float]:
    """From the text of ``go tool pprof -top -cum -nodecount=N`` over a window's profiles: ``total`` (the
    samples' CPU seconds) and the cumulative CPU seconds of each of :data:`PLACES` (0.0 when pprof lists
    it not: it took none, or less than pprof's cut-off). Raises ``ValueError`` when the text has no
    ``Total samples`` line (not pprof's)."""
    total = _TOTAL.search(top)
    if total is None:
        raise ValueError("not go tool pprof -top output: no 'Total samples' line")
    cum: dict[str, float] = {}
    for line in top.splitlines():
        row = _ROW.match(line)
        if row is not None:
            cum.setdefault(row.group(3), _seconds(row.group(1), row.group(2)))
    out = {"total": _seconds(total.group(1), total.group(2))}
    out.update({label: cum.get(function, 0.0) for label, function in PLACES.items()})
    return out


def window_files(directory: Path) -> dict[str, list[Path]]:
    """The profiles in ``directory`` by the window they began in (``<window>-<n>.pb.gz``), windows in
    the order of their first profile, profiles in order."""
    out: dict[str, list[Path]] = {}
    for path in sorted(directory.glob("*-*.pb.gz"), key=lambda p: int(p.name.rsplit("-", 1)[1].split(".")[0])):
        out.setdefault(path.name.rsplit("-", 1)[0], []).append(path)
    return out


def read_places(files: Sequence[Path]) -> dict[str, float] | None:
    """:func:`places` of ``files`` merged (``go tool pprof -top -cum``), or None when ``go`` is not on
    ``PATH``. Raises ``subprocess.CalledProcessError`` when pprof fails."""
    go = shutil.which("go")
    if go is None or not files:
        return None
    cmd = [
        go,
        "tool",
        "pprof",
        "-top",
        "-cum",
        "-nodecount=100000",
        "-nodefraction=0",
        "-edgefraction=0",
        *map(str, files),
    ]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return places(done.stdout)


class Profiler:
    """CPU profiles of the apiserver ``kube`` talks to, back to back into ``directory`` while running,
    each named by the window current when it began (:meth:`window`)."""

    def __init__(self, kube: Kube, directory: Path, seconds: int = SECONDS) -> None:
        self.kube, self.directory, self.seconds = kube, directory, seconds
        self.label = ""
        """The window of the profiles that begin now (set by :meth:`window` before the first)."""
        self._task: asyncio.Task[None] | None = None

    def window(self, label: str) -> None:
        """The profiles that begin from now on belong to window ``label`` (the first call starts them,
        after deleting the profiles of an earlier run in :attr:`directory`)."""
        self.label = label
        if self._task is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            for old in self.directory.glob("*-*.pb.gz"):
                old.unlink()
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop; the profile in flight is lost (the apiserver stops it when the connection closes).
        Raises what stopped the profiles earlier (``RuntimeError`` for an answer other than 200, the
        client's errors when no answer came)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        query = [("seconds", self.seconds)]
        for n in itertools.count():
            label = self.label
            resp = await self.kube.open(
                "GET", "/debug/pprof/profile", query, accept="application/octet-stream", timeout=self.seconds + 30
            )
            try:
                if resp.status != 200:
                    raise RuntimeError(f"apiserver profile: HTTP {resp.status}: {(await resp.read())[:200]!r}")
                (self.directory / f"{label}-{n}.pb.gz").write_bytes(await resp.read())
            finally:
                resp.release()


def print_places(directory: Path) -> dict[str, dict[str, float]]:
    """Print, per window of the profiles in ``directory``, the CPU seconds of :data:`PLACES` (when ``go``
    is on ``PATH``) and the command that reads them; returns what it printed (window -> :func:`places`)."""
    windows = window_files(directory)
    out = {w: p for w, files in windows.items() if (p := read_places(files)) is not None}
    print(f"  the apiserver's CPU profiles ({SECONDS} s each, by the window each began in): {directory}")
    if out:
        width = max(12, *(len(w) + 2 for w in out))
        print(f"    {'':<40}" + "".join(f"{w:>{width}}" for w in out))
        for label in ("total", *PLACES):
            print(f"    {label + ' (CPU s)':<40}" + "".join(f"{out[w][label]:>{width}.2f}" for w in out))
    for w, files in windows.items():
        print(f"    {w}: go tool pprof -top -cum {' '.join(str(f) for f in files)}")
    return out
