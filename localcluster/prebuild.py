"""Everything the test suite builds, built before it needs it, in two lanes at once (as ``make demo``
builds its part): on a machine with empty caches the suite's modules would otherwise each build what they
need when they first need it, one at a time, between their tests.

- **Go**: every ``localcluster/build.sh`` component (:data:`COMPONENTS`: the cluster, Volcano, Kueue, helm,
  the peers' e2e suites and controllers, Prometheus, Katib), then the real nodes' binaries
  (``localcluster/realnode/build.sh``: kubelet, kube-proxy, CoreDNS, pause). The Go compiler keeps both
  cores busy on its own.
- **Images** (where real nodes can run: :func:`localcluster.realnode.node.unavailable`): the Debian images
  of the real nodes (:data:`localcluster.realnode.images.BUILDERS`), whose ``debootstrap`` and ``dpkg``
  mostly wait on one core and the disk, then the operator image (``buildah build`` of the Dockerfile).

With ``--meanwhile COMMAND...`` (``make test``: the lint and the suite) only what every cluster and the
real nodes need is built first (:data:`CLUSTER`, the node binaries and every image); COMMAND then starts
while the Go lane goes on with the rest (:data:`BESIDE`) at the lowest CPU priority (``nice -n 19``), so
the suite's modules, which keep the cores about two thirds busy, have them when they want them and the
builds take the rest. A module that needs a component not built yet waits for the build under way
(``localcluster/build.sh`` builds one component at a time per cache) and then builds it itself or finds
it built. When COMMAND ends, what is still building beside it is stopped; the exit status is COMMAND's,
or 1 when it passed and a build beside it failed.

What is built already is found and skipped (each builder's own cache check), so on a warm machine this
takes seconds. Prints each step's seconds and the total; exits non-zero when a step fails.

    python -m localcluster.prebuild                       # make prebuild: everything, then exit
    python -m localcluster.prebuild --meanwhile make lint  # the cluster's part, then both at once
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from localcluster.binaries import BUILD_SCRIPT, component_dir, missing_components
from localcluster.operator_image import operator_image
from localcluster.realnode import images
from localcluster.realnode.node import ensure_packages, unavailable

CLUSTER = ("etcd", "kwok", "kubernetes")
"""The ``localcluster/build.sh`` components of every local cluster (:data:`localcluster.binaries.BINARIES`),
built before any module starts."""
SESSION_CLUSTER = ("volcano", "kueue")
"""What the session cluster of ``e2e/conftest.py`` runs besides :data:`CLUSTER`: the first components built
beside the suite, which every end-to-end module waits for."""
BESIDE = (
    *SESSION_CLUSTER,
    "helm",
    "prometheus",
    "upstream",
    "trainer_e2e",
    "mpi_operator",
    "mpi_operator_e2e",
    "kueue_e2e",
    "katib",
)
"""The other components, in the order built: Volcano and Kueue first (the session cluster of
e2e/conftest.py runs both), helm and promtool next (unit modules and the demo run them), the peers'
controllers and e2e suites after."""
BUILDING_BESIDE = "TRAINER_BUILDING_BESIDE"
"""The environment variable :func:`meanwhile` gives its command: the components of :data:`BESIDE` not built
when it started, in the order they are built, space-separated. The root ``conftest.py`` runs the modules
that need one of them (their ``builds`` mark) after the others, the later the build the later the module."""
COMPONENTS = CLUSTER + BESIDE
"""Every component of ``localcluster/build.sh``, in the order built (the cluster's first)."""
NODE_BINARIES = ("kubelet", "kube_proxy", "coredns", "pause")
"""Every component of ``localcluster/realnode/build.sh``."""
NODE_FETCHED = ("kubelet", "kube_proxy", "coredns")
"""The real nodes' components whose modules :class:`Fetch` downloads (pause has none)."""
IMAGES = ("training", "torchtune", "busybox")
"""The real nodes' images (keys of :data:`localcluster.realnode.images.BUILDERS`), the largest first."""


def _say(message: str) -> None:
    print(f"[prebuild] {message}", file=sys.stderr, flush=True)


def step(what: str, build: Callable[[], object], timings: dict[str, float]) -> None:
    """Run one build step and record its seconds in ``timings`` under ``what``."""
    t = time.monotonic()
    build()
    timings[what] = round(time.monotonic() - t, 1)
    _say(f"{what}: {timings[what]}s")


class GoLane:
    """A build script run once per component, one after the other (each build uses both cores).
    ``beside`` another command: each build at the lowest CPU priority. ``fetch``: each run only downloads
    the modules of its component (``--fetch``: network-bound, at normal priority). Either way each run is
    in a process group of its own, which :meth:`stop` ends (with every later run); else in the caller's
    process group, so a Ctrl-C reaches it."""

    def __init__(self, timings: dict[str, float], beside: bool = False, fetch: bool = False) -> None:
        self.timings = timings
        self.beside = beside
        self.fetch = fetch
        self._stopped = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def stoppable(self) -> bool:
        """Whether :meth:`stop` ends the run under way (it runs in a process group of its own)."""
        return self.beside or self.fetch

    def build(self, components: Sequence[str], script: Path | None = None) -> None:
        """Run ``script`` (default :data:`BUILD_SCRIPT`) for ``components`` in order; raises
        ``CalledProcessError`` when one fails (not when stopped)."""
        for component in components:
            if self._stopped.is_set():
                return
            what = f"{component} modules" if self.fetch else component
            step(what, partial(self._run, script or BUILD_SCRIPT, component), self.timings)

    def _run(self, script: Path, component: str) -> None:
        nice = ["nice", "-n", "19"] if self.beside else []
        cmd = [*nice, "bash", str(script), *(["--fetch"] if self.fetch else []), component]
        with self._lock:
            if self._stopped.is_set():
                return
            self._child = subprocess.Popen(cmd, start_new_session=self.stoppable)
        returncode = self._child.wait()
        if returncode and not self._stopped.is_set():
            raise subprocess.CalledProcessError(returncode, cmd)

    def stop(self) -> None:
        """End the run under way (its whole process group: bash and the Go toolchain under it)."""
        with self._lock:
            self._stopped.set()
            child = self._child
        if self.stoppable and child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)


class Fetch:
    """The modules of every Go component not built yet, downloaded ahead of its build in a lane of their
    own (:class:`GoLane` with ``fetch``), while the Go lane compiles: a build then only compiles. With an
    empty module cache Kubernetes' modules took 41 to 176 s to download (2026-12-01). The order is
    the builds': Kubernetes (etcd's and KWOK's builds come first and download their own), the real
    nodes' (when ``real`` and their kubelet is not built), then :data:`BESIDE`. Errors are reported by
    the builds, not here."""

    def __init__(self, timings: dict[str, float], real: bool) -> None:
        self.lane = GoLane(timings, fetch=True)
        kubelet = component_dir("kubernetes") / "kubelet"
        self.order: list[tuple[Path, Sequence[str]]] = [
            (BUILD_SCRIPT, missing_components(("kubernetes",))),
            (images.BUILD_SCRIPT, NODE_FETCHED if real and not kubelet.exists() else ()),
            (BUILD_SCRIPT, missing_components(BESIDE)),
        ]
        """``(build script, its components)``, in the order fetched."""
        self._thread = threading.Thread(target=self._run, name="fetch", daemon=True)

    def _run(self) -> None:
        try:
            for script, components in self.order:
                self.lane.build(components, script)
        except subprocess.CalledProcessError as e:
            _say(f"fetching modules stopped: {e}")

    def start(self) -> Fetch:
        """Start the lane (returns at once; nothing to start when everything is built)."""
        if any(components for _, components in self.order):
            self._thread.start()
        return self

    def stop(self) -> None:
        """End the download under way and every later one."""
        self.lane.stop()
        if self._thread.is_alive():
            self._thread.join()


def image_lane(timings: dict[str, float]) -> None:
    """The Debian packages real nodes need (busybox-static is the busybox image's), then the images, one
    after the other."""
    step("real node packages", ensure_packages, timings)
    for name in IMAGES:
        step(f"{name} image", images.BUILDERS[name], timings)
    step("operator image", operator_image, timings)


def lanes(first: Sequence[str], timings: dict[str, float], real: bool) -> list[BaseException]:
    """The Go lane (``first``, then the real nodes' binaries when ``real``) beside the image lane (when
    ``real``); the errors of the lanes that failed."""

    def go() -> None:
        GoLane(timings).build(first)
        if real:
            step("real node binaries", lambda: images.ensure_built(*NODE_BINARIES), timings)

    work = [go, *([lambda: image_lane(timings)] if real else [])]
    with ThreadPoolExecutor(len(work)) as pool:
        futures = [pool.submit(lane) for lane in work]
        errors = [f.exception() for f in futures]
    return [e for e in errors if e is not None]


def meanwhile(command: Sequence[str], timings: dict[str, float]) -> int:
    """Run ``command`` while the Go lane builds :data:`BESIDE` at the lowest CPU priority (telling it which
    in :data:`BUILDING_BESIDE`); stop those builds when ``command`` ends. Returns ``command``'s exit status,
    or 1 when it was 0 and a build beside it failed."""
    lane = GoLane(timings, beside=True)
    failed: list[BaseException] = []
    env = {**os.environ, BUILDING_BESIDE: " ".join(missing_components(BESIDE))}

    def beside() -> None:
        try:
            lane.build(BESIDE)
        except Exception as e:
            failed.append(e)

    thread = threading.Thread(target=beside, name="beside", daemon=True)
    thread.start()
    _say(f"running {' '.join(command)} while {', '.join(BESIDE)} build beside it (nice 19)")
    try:
        returncode = subprocess.run(command, check=False, env=env).returncode
    finally:
        lane.stop()
        thread.join()
    for error in failed:
        _say(f"beside the command, failed: {error}")
    return returncode or (1 if failed else 0)


def main(argv: Sequence[str] = ()) -> int:
    command = list(argv[1:]) if argv[:1] == ["--meanwhile"] else []
    if argv and not command:
        _say("usage: python -m localcluster.prebuild [--meanwhile COMMAND...]")
        return 2
    began = time.monotonic()
    why_not = unavailable()
    real = why_not is None
    if not real:
        _say(f"no real nodes here ({why_not}): Go builds only")
    timings: dict[str, float] = {}
    fetch = Fetch(timings, real).start()
    try:
        failed = lanes(CLUSTER if command else COMPONENTS, timings, real)
        for error in failed:
            _say(f"failed: {error}")
        _say(f"built in {time.monotonic() - began:.1f}s; steps (s): {timings}")
        if failed:
            return 1
        if not command:
            return 0
        returncode = meanwhile(command, timings)
    finally:
        fetch.stop()
    _say(f"total {time.monotonic() - began:.1f}s; steps (s): {timings}")
    return returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
