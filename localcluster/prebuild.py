"""Everything the test suite builds, built once before it runs, in two lanes at once (as ``make demo``
builds its part): on a machine with empty caches the suite's modules would otherwise each build what they
need when they first need it, one at a time, between their tests.

- **Go**: every ``localcluster/build.sh`` component (:data:`COMPONENTS`: the cluster, Volcano, Kueue, helm,
  the peers' e2e suites and controllers, Prometheus), then the real nodes' binaries
  (``localcluster/realnode/build.sh``: kubelet, kube-proxy, CoreDNS, pause). The Go compiler keeps both
  cores busy on its own.
- **Images** (where real nodes can run: :func:`localcluster.realnode.node.unavailable`): the Debian images
  of the real nodes (:data:`localcluster.realnode.images.BUILDERS`), whose ``debootstrap`` and ``dpkg``
  mostly wait on one core and the disk, then the operator image (``buildah build`` of the Dockerfile).

What is built already is found and skipped (each builder's own cache check), so on a warm machine this
takes seconds. Prints each step's seconds and the total; exits non-zero when a step fails.

    python -m localcluster.prebuild      # make prebuild; make test runs it first
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from localcluster.binaries import BUILD_SCRIPT
from localcluster.operator_image import operator_image
from localcluster.realnode import images
from localcluster.realnode.node import ensure_packages, unavailable

COMPONENTS = (
    "etcd",
    "kwok",
    "kubernetes",
    "volcano",
    "kueue",
    "helm",
    "trainer_e2e",
    "upstream",
    "mpi_operator",
    "mpi_operator_e2e",
    "kueue_e2e",
    "prometheus",
    "katib",
)
"""Every component of ``localcluster/build.sh``, in the order built (the cluster's first)."""
NODE_BINARIES = ("kubelet", "kube_proxy", "coredns", "pause")
"""Every component of ``localcluster/realnode/build.sh``."""
IMAGES = ("training", "torchtune", "ompi5", "busybox")
"""The real nodes' images (keys of :data:`localcluster.realnode.images.BUILDERS`), the largest first."""


def _say(message: str) -> None:
    print(f"[prebuild] {message}", file=sys.stderr, flush=True)


def step(what: str, build: Callable[[], object], timings: dict[str, float]) -> None:
    """Run one build step and record its seconds in ``timings`` under ``what``."""
    t = time.monotonic()
    build()
    timings[what] = round(time.monotonic() - t, 1)
    _say(f"{what}: {timings[what]}s")


def go_lane(timings: dict[str, float], real: bool) -> None:
    """The Go builds, one after the other (each uses both cores)."""
    for component in COMPONENTS:
        step(component, partial(subprocess.run, ["bash", str(BUILD_SCRIPT), component], check=True), timings)
    if real:
        step("real node binaries", lambda: images.ensure_built(*NODE_BINARIES), timings)


def image_lane(timings: dict[str, float]) -> None:
    """The Debian packages real nodes need (busybox-static is the busybox image's), then the images, one
    after the other."""
    step("real node packages", ensure_packages, timings)
    for name in IMAGES:
        step(f"{name} image", images.BUILDERS[name], timings)
    step("operator image", operator_image, timings)


def main() -> int:
    began = time.monotonic()
    why_not = unavailable()
    real = why_not is None
    if not real:
        _say(f"no real nodes here ({why_not}): Go builds only")
    timings: dict[str, float] = {}
    lanes = [lambda: go_lane(timings, real), *([lambda: image_lane(timings)] if real else [])]
    with ThreadPoolExecutor(len(lanes)) as pool:
        futures = [pool.submit(lane) for lane in lanes]
        errors = [f.exception() for f in futures]
    failed = [e for e in errors if e is not None]
    for error in failed:
        _say(f"failed: {error}")
    _say(f"total {time.monotonic() - began:.1f}s; steps (s): {timings}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
