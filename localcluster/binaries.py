"""Locate the cluster binaries built by ``localcluster/build.sh``, building them when one is missing.

``localcluster/build.sh`` puts every binary in ``$TRAINER_CACHE/bin/<component>-<version>/`` (the cache
defaults to ``~/.cache/trainer``) with the versions pinned in ``localcluster/versions.env``. The optional
components (Volcano, Kueue) also keep the CRDs they need next to their binaries, in ``crds/``. The
tools the tests run (helm, for ``charts/trainer``; Prometheus and promtool, for its rules) are built
the same way, by :func:`ensure`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build.sh"
VERSIONS_FILE = HERE / "versions.env"

# binary name -> (versions.env variable, build.sh component, which is also the bin sub-directory prefix)
BINARIES: dict[str, tuple[str, str]] = {
    "etcd": ("ETCD_VERSION", "etcd"),
    "kube-apiserver": ("KUBERNETES_VERSION", "kubernetes"),
    "kube-controller-manager": ("KUBERNETES_VERSION", "kubernetes"),
    "kube-scheduler": ("KUBERNETES_VERSION", "kubernetes"),
    "kubectl": ("KUBERNETES_VERSION", "kubernetes"),
    "kwok": ("KWOK_VERSION", "kwok"),
}
# The binaries of the optional components, built only when a cluster asks for them.
OPTIONAL_BINARIES: dict[str, tuple[str, str]] = {
    "vc-scheduler": ("VOLCANO_VERSION", "volcano"),
    "vc-controller-manager": ("VOLCANO_VERSION", "volcano"),
    "vc-webhook-manager": ("VOLCANO_VERSION", "volcano"),
    "kueue": ("KUEUE_VERSION", "kueue"),
}
# Client tools the tests run (not cluster components), built on first use by ensure().
TOOLS: dict[str, tuple[str, str]] = {
    "helm": ("HELM_VERSION", "helm"),
    # Kubeflow Trainer's own e2e suite (test/e2e), compiled (e2e/test_upstream_e2e.py runs it).
    "e2e.test": ("UPSTREAM_TRAINER_VERSION", "trainer_e2e"),
    # kubeflow/mpi-operator's own e2e suite (test/e2e), compiled (e2e/test_mpi_operator_e2e.py runs it).
    "mpi-operator-e2e.test": ("MPI_OPERATOR_VERSION", "mpi_operator_e2e"),
    # Kueue's own extended e2e suites (test/e2e/singlecluster/extended, test/e2e/tas/extended), compiled.
    "singlecluster-extended.test": ("KUEUE_VERSION", "kueue_e2e"),
    "tas-extended.test": ("KUEUE_VERSION", "kueue_e2e"),
    # JobSet's manager at the version Kueue requires, deployed for the suites' feature:trainjob Its.
    "jobset-manager": ("KUEUE_VERSION", "kueue_e2e"),
    # The chart's alerting rules: promtool checks and unit-tests them, a real Prometheus scrapes the
    # operator and evaluates them (tests/tooling/test_prometheus_rules.py, e2e/test_observability_real.py).
    "prometheus": ("PROMETHEUS_VERSION", "prometheus"),
    "promtool": ("PROMETHEUS_VERSION", "prometheus"),
    # Upstream Kubeflow Trainer's controller manager and the JobSet controller (bench/upstream.py: the bench's
    # upstream side, e2e/test_migration.py, e2e/test_conformance.py; bench.upstream.missing checks the rest).
    "trainer-controller-manager": ("UPSTREAM_TRAINER_VERSION", "upstream"),
    "jobset-controller": ("UPSTREAM_TRAINER_VERSION", "upstream"),
    # kubeflow/mpi-operator's controller, which starts the MPIJobs handed over (e2e/test_mpijob_migration.py).
    "mpi-operator": ("MPI_OPERATOR_VERSION", "mpi_operator"),
    # Katib, for the kubeflow SDK's OptimizerClient with this operator's TrainJobs as trials (e2e/test_katib.py,
    # localcluster/katib.py): each binary goes into an image of its own.
    "katib-controller": ("KATIB_VERSION", "katib"),
    "katib-db-manager": ("KATIB_VERSION", "katib"),
    "file-metricscollector": ("KATIB_VERSION", "katib"),
    "goptuna-suggestion": ("KATIB_VERSION", "katib"),
}
# build.sh components that also install CRDs into their crds/ directory.
COMPONENTS_WITH_CRDS = ("volcano", "kueue")
# Other directories a build.sh component installs beside its binaries (present, possibly empty).
COMPONENT_DIRS: dict[str, tuple[str, ...]] = {
    "kueue": ("conversion", "webhooks"),
    "trainer_e2e": ("runtimes", "flux", "crds"),
    "kueue_e2e": ("jobset-config",),
    "katib": ("manifests",),
}


def cache_dir() -> Path:
    """The build cache: ``$TRAINER_CACHE`` or ``~/.cache/trainer``."""
    return Path(os.environ.get("TRAINER_CACHE") or Path.home() / ".cache" / "trainer")


def versions() -> dict[str, str]:
    """The ``NAME=value`` pairs of ``localcluster/versions.env``."""
    pairs: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            pairs[name.strip()] = value.strip().strip("\"'")
    return pairs


def _all_binaries() -> dict[str, tuple[str, str]]:
    return {**BINARIES, **OPTIONAL_BINARIES, **TOOLS}


def component_dir(component: str) -> Path:
    """The bin directory of a build.sh component (e.g. ``volcano`` -> ``.../bin/volcano-v1.15.1``)."""
    variable = {prefix: var for var, prefix in _all_binaries().values()}[component]
    return cache_dir() / "bin" / f"{component}-{versions()[variable]}"


def crd_dir(component: str) -> Path:
    """The CRD manifests installed by a build.sh component (one of :data:`COMPONENTS_WITH_CRDS`)."""
    return component_dir(component) / "crds"


def binary_paths() -> dict[str, Path]:
    """Where each binary, core or optional, is expected, whether or not it has been built yet.

    An optional binary whose version variable is missing from ``versions.env`` is left out.
    """
    pinned = versions()
    bin_dir = cache_dir() / "bin"
    return {
        name: bin_dir / f"{prefix}-{pinned[var]}" / name
        for name, (var, prefix) in _all_binaries().items()
        if var in pinned or name in BINARIES
    }


def missing_binaries(names: Iterable[str] | None = None) -> list[str]:
    """The binaries among ``names`` (default: the core ones) that are not built yet.

    A binary of a component that installs CRDs also counts as missing while its ``crds/`` is empty,
    and one of a component with :data:`COMPONENT_DIRS` while one of them is absent.
    """
    paths = binary_paths()
    missing = []
    for name in BINARIES if names is None else names:
        path = paths.get(name)
        component = _all_binaries()[name][1]
        built = path is not None and os.access(path, os.X_OK)
        crds_ok = component not in COMPONENTS_WITH_CRDS or any(crd_dir(component).glob("*.yaml"))
        dirs_ok = all((component_dir(component) / d).is_dir() for d in COMPONENT_DIRS.get(component, ()))
        if not (built and crds_ok and dirs_ok):
            missing.append(name)
    return missing


def missing_components(components: Iterable[str]) -> list[str]:
    """The build.sh components among ``components``, in their order, with a binary not built yet
    (:func:`missing_binaries`)."""
    owner = {name: component for name, (_, component) in _all_binaries().items()}
    wanted = list(components)
    missing = {owner[name] for name in missing_binaries([n for n, c in owner.items() if c in wanted])}
    return [c for c in wanted if c in missing]


def ensure_binaries(optional: Iterable[str] = (), kwok: bool = True) -> dict[str, Path]:
    """Return the path of every binary, first building whatever the cluster needs and lacks.

    The core binaries are always needed (kwok only when ``kwok``: a cluster without fake nodes runs
    none), the ``optional`` ones (names of :data:`OPTIONAL_BINARIES`) when asked for. Only the build.sh
    components that miss something are built; the build's output is streamed to stderr and a failed
    build raises ``CalledProcessError``.
    """
    return ensure(*(name for name in BINARIES if kwok or name != "kwok"), *optional)


def ensure(*wanted: str) -> dict[str, Path]:
    """Return the path of every binary, first building the build.sh components that miss one of
    ``wanted`` (names of :data:`BINARIES`, :data:`OPTIONAL_BINARIES` or :data:`TOOLS`, e.g.
    ``ensure("helm", "kubectl")["helm"]``). A failed build raises ``CalledProcessError``."""
    missing = missing_binaries(wanted)
    if missing:
        components = list(dict.fromkeys(_all_binaries()[name][1] for name in missing))
        print(
            f"[cluster] building {' '.join(components)} with {BUILD_SCRIPT}",
            file=sys.stderr,
            flush=True,
        )
        subprocess.run(["bash", str(BUILD_SCRIPT), *components], check=True, stdout=sys.stderr)
        still_missing = missing_binaries(wanted)
        if still_missing:
            raise FileNotFoundError(f"{BUILD_SCRIPT} did not produce: {', '.join(still_missing)}")
    return binary_paths()
