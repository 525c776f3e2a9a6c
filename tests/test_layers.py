"""The layers import downward only: every import of every module under ``trainer/api/`` and ``trainer/`` (module
level, inside functions and under ``TYPE_CHECKING`` alike) names a module of its own package or of a lower
layer, and the graph of modules has no cycle at any depth (packages, sub-packages, modules).

Inside the job layer and the kinds, the parts have an order too (:data:`ORDER`): a part (a module or a
sub-package directly under ``trainer/jobs/``, ``trainer/trainjob/``, ``trainer/mpijob/``,
``trainer/optimizationjob/``) imports only the
parts listed before it. Specific ML policies and gang schedulers are reached only through their registries
(:data:`REGISTRIES`). The SDK, the CLI and the dashboard stand on ``api`` and ``trainer.framework`` only
(:data:`USER_SIDE`), so installing the SDK does not ship the reconciler.

Layers, lowest first (docs/internals.md draws them):

- ``api``: the typed API, labels and reasons;
- ``trainer.framework``: kube client, caches, work queue, controller declarations, manager (knows no job);
- ``trainer.jobs``: what every job kind shares (reconcile, child and status writers, facts, gang schedulers);
- ``trainer.trainjob``, ``trainer.mpijob``, ``trainer.optimizationjob``: the kinds;
- ``trainer.webhook``, ``trainer.statusserver``: admission and progress, over the kinds;
- the entry points: ``trainer.main``, ``trainer.wiring`` (the controllers and their flags), ``trainer.cli``,
  ``trainer.client``, ``trainer.render`` (the RBAC, webhook configurations and doc tables rendered from the code).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS: list[tuple[str, ...]] = [
    ("trainer.api",),
    ("trainer.framework",),
    ("trainer.jobs",),
    ("trainer.trainjob", "trainer.mpijob", "trainer.optimizationjob"),
    ("trainer.webhook", "trainer.statusserver"),
]
ENTRY = len(LAYERS)
"""The layer of every other module of ``trainer`` (the entry points)."""
LAYER_NAMES = ("api", "framework", "job layer", "kinds", "admission and progress", "entry points")
"""What each layer is called, lowest first (:data:`LAYERS`, then :data:`ENTRY`)."""


def module_of(path: Path) -> str:
    """``trainer/jobs/gang/base.py`` -> ``trainer.jobs.gang.base``; a package's ``__init__`` -> the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """Whether ``name`` (dotted) is a module or package of this repository."""
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports(path: Path, text: str | None = None) -> Iterator[str]:
    """Every module of this repository ``path`` imports (or would, holding ``text``), wherever the import
    statement stands."""
    here = module_of(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            names = [f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base for a in node.names]
        else:
            continue
        yield from (n for n in names if n.split(".")[0] == "trainer")


def package_of(module: str) -> str:
    """The package a module belongs to: a layer's package (``trainer.jobs``), else the entry module itself."""
    for layer in LAYERS:
        for pkg in layer:
            if module == pkg or module.startswith(pkg + "."):
                return pkg
    parts = module.split(".")
    return ".".join(parts[:2])


def layer_of(package: str) -> int:
    """The layer of a package (:func:`package_of`): its index in :data:`LAYERS`, else :data:`ENTRY`."""
    return next((i for i, layer in enumerate(LAYERS) if package in layer), ENTRY)


def sources() -> list[Path]:
    return sorted(p for d in ("trainer",) for p in (ROOT / d).rglob("*.py"))


def graph() -> dict[str, set[str]]:
    """Package -> the other packages its modules import."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sources():
        src = package_of(module_of(path))
        out[src] |= {t for t in map(package_of, imports(path)) if t != src}
    return out


def offences(path: Path) -> list[str]:
    """The imports of ``path`` that break the layer order: a higher layer, or another package of the same
    layer (the kinds do not import each other); the entry points may import each other."""
    src = package_of(module_of(path))
    rank = layer_of(src)
    out = []
    for target in imports(path):
        dst = package_of(target)
        if dst == src:
            continue
        if layer_of(dst) > rank or (layer_of(dst) == rank and rank != ENTRY):
            out.append(target)
    return sorted(set(out))


@pytest.mark.parametrize("path", sources(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_module_imports_only_its_package_and_lower_layers(path: Path) -> None:
    bad = offences(path)
    assert not bad, (
        f"{path.relative_to(ROOT)} ({package_of(module_of(path))}) imports {bad}: "
        "a layer imports only the layers below it (tests/test_layers.py)"
    )


def test_the_package_graph_has_no_cycle() -> None:
    try:
        order = list(TopologicalSorter(graph()).static_order())
    except CycleError as e:
        pytest.fail(f"packages import each other in a cycle: {e.args[1]}")
    assert order.index("trainer.framework") < order.index("trainer.jobs") < order.index("trainer.trainjob")


def test_the_check_sees_an_upward_import_under_type_checking() -> None:
    client = ROOT / "trainer" / "framework" / "kube" / "client.py"
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trainer.jobs.reconcile import Kind\n"
    assert list(imports(client, text)) == ["trainer.jobs.reconcile"]
    assert layer_of(package_of("trainer.jobs.reconcile")) > layer_of(package_of(module_of(client)))


def test_the_check_resolves_relative_and_from_package_imports() -> None:
    volcano = ROOT / "trainer" / "jobs" / "gang" / "volcano.py"
    text = "from . import base\nfrom ..facts import finished\nfrom trainer.jobs import gang\n"
    assert list(imports(volcano, text)) == ["trainer.jobs.gang.base", "trainer.jobs.facts", "trainer.jobs.gang"]


IMPORT_EACH = """
import importlib, json, sys
failed = []
for name, kept in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m.split(".")[0] == "trainer"]:
        if loaded != "trainer" and not any(loaded == k or loaded.startswith(k + ".") for k in kept):
            del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as e:
        failed.append(f"{name}: {e!r}")
print("\\n".join(failed))
"""


def layers_below(module: str) -> list[str]:
    """The packages of the layers below ``module``'s (:data:`LAYERS`). None of their modules imports
    ``module``'s layer (the tests above), so having them loaded first leaves ``module``'s first import as it
    is: each of them would be imported whole, before ``module``'s own package goes on."""
    return [pkg for layer in LAYERS[: layer_of(package_of(module))] for pkg in layer]


def test_every_module_imports_first() -> None:
    """Each module imports in an interpreter that has loaded nothing of its own layer or the layers above
    yet, whatever the order the process imports them in (an import cycle inside a package shows only
    then); the layers below stay loaded (:func:`layers_below`), so each is not imported again for every
    module above it."""
    import json
    import subprocess
    import sys

    names = [module_of(p) for p in sources() if p.name != "__main__.py"]
    plan = json.dumps([(name, layers_below(name)) for name in names])
    out = subprocess.run([sys.executable, "-c", IMPORT_EACH, plan], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert not out.stdout.strip(), out.stdout


def test_a_cycle_inside_a_package_fails_the_first_import_check(tmp_path: Path) -> None:
    """The check's script reports a module whose first import meets its own package half-initialized."""
    import json
    import subprocess
    import sys

    pkg = tmp_path / "trainer" / "cyc"
    pkg.mkdir(parents=True)
    (tmp_path / "trainer" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from trainer.cyc.a import A\nB = 1\n")
    (pkg / "a.py").write_text("from trainer.cyc import B\nA = B\n")
    plan = json.dumps([("trainer.cyc.a", [])])
    out = subprocess.run([sys.executable, "-c", IMPORT_EACH, plan], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("trainer.cyc.a: ImportError"), out.stdout


ORDER: dict[str, list[tuple[str, ...]]] = {
    "trainer.jobs": [
        ("conditions", "mpi"),
        ("facts",),
        ("features",),
        ("child_writer",),
        ("gang",),
        ("kind",),
        ("status_writer",),
        ("event_filter",),
        ("reconcile",),
    ],
    "trainer.trainjob": [
        ("spec",),
        ("options", "policies"),
        ("runtime",),
        ("children", "status"),
        ("validation", "features"),
        ("kind",),
        ("controller",),
    ],
    "trainer.mpijob": [("children", "crd", "validation"), ("status",), ("upstream",), ("controller",)],
    "trainer.optimizationjob": [("search",), ("trials", "status"), ("controller",)],
}
"""The parts of each package, lowest first: a part imports only the parts of earlier entries (those of
one entry do not import each other). A new module or sub-package is placed here, or this test fails."""

REGISTRIES = {"trainer.trainjob.policies": ("base",), "trainer.jobs.gang": ("base",)}
"""Plugin packages: their plugin modules are imported only by the package's registry (its ``__init__``)
and by each other's nothing; the modules named here (the interface) by anyone."""

USER_SIDE = ("trainer.client", "trainer.cli", "trainer.dashboard")
"""The SDK, the CLI and the dashboard: they import ``api``, ``trainer.framework`` and each other only."""


def part_of(module: str, package: str) -> str | None:
    """The part of ``package`` that ``module`` belongs to (its first name below the package), or None
    when the module is the package itself or outside it."""
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1 :].split(".")[0]


def rank(package: str, part: str) -> int | None:
    """The index of ``part`` in :data:`ORDER` of ``package``, or None when it is not listed."""
    return next((i for i, parts in enumerate(ORDER[package]) if part in parts), None)


def order_offences(path: Path, text: str | None = None) -> list[str]:
    """The imports of ``path`` (or of ``text`` in its place) that break :data:`ORDER`, :data:`REGISTRIES`
    or :data:`USER_SIDE`, one message each."""
    here = module_of(path)
    out = []
    for target in sorted(set(imports(path, text))):
        for package in ORDER:
            src, dst = part_of(here, package), part_of(target, package)
            if src is None or dst is None or src == dst:
                continue
            a, b = rank(package, src), rank(package, dst)
            if a is None or b is None:
                out.append(f"{here} -> {target}: {package}.{src if a is None else dst} is not placed in ORDER")
            elif b >= a:
                out.append(f"{here} -> {target}: in {package}, {src} may import only the parts listed before it")
        for package, interface in REGISTRIES.items():
            plugin = part_of(target, package)
            if plugin is not None and plugin not in interface and here != package and part_of(here, package) is None:
                out.append(f"{here} -> {target}: a plugin is reached through its registry, {package}")
        user = next((u for u in USER_SIDE if here == u or here.startswith(u + ".")), None)
        if user is not None and not target.startswith(("trainer.api", "trainer.framework", *USER_SIDE)):
            out.append(f"{here} -> {target}: the SDK, CLI and dashboard import only api and trainer.framework")
    return out


@pytest.mark.parametrize("path", sources(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_module_keeps_the_order_inside_its_package(path: Path) -> None:
    bad = order_offences(path)
    assert not bad, "; ".join(bad) + " (tests/test_layers.py)"


def test_every_part_is_placed_in_the_order() -> None:
    for package, parts in ORDER.items():
        base = ROOT.joinpath(*package.split("."))
        present = {p.stem for p in base.glob("*.py") if p.name != "__init__.py"} | {
            d.name for d in base.iterdir() if (d / "__init__.py").is_file()
        }
        listed = {name for entry in parts for name in entry}
        assert present == listed, f"{package}: unplaced {sorted(present - listed)}, gone {sorted(listed - present)}"


def graph_at(depth: int) -> dict[str, set[str]]:
    """Module -> the modules it imports, each name cut to its first ``depth`` parts (``trainer.jobs`` at
    depth 2, ``trainer.jobs.gang`` at 3); imports inside one node are dropped."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sources():
        src = ".".join(module_of(path).split(".")[:depth])
        out[src] |= {t for t in (".".join(t.split(".")[:depth]) for t in imports(path)) if t != src}
    return out


@pytest.mark.parametrize("depth", [2, 3, 4, 5])
def test_no_cycle_at_any_depth(depth: int) -> None:
    try:
        list(TopologicalSorter(graph_at(depth)).static_order())
    except CycleError as e:
        pytest.fail(f"modules import each other in a cycle at depth {depth}: {e.args[1]}")


def test_the_order_check_sees_an_upward_import_a_bypassed_registry_and_the_sdk_reaching_in() -> None:
    info = ROOT / "trainer" / "trainjob" / "runtime" / "info.py"
    upward = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trainer.trainjob.kind import expand\n"
    assert order_offences(info, upward) == [
        "trainer.trainjob.runtime.info -> trainer.trainjob.kind: in trainer.trainjob, runtime may import only "
        "the parts listed before it"
    ]
    bypass = (
        "from trainer.jobs.gang.volcano import network_topology\nfrom trainer.trainjob.policies.torch import TORCH\n"
    )
    assert order_offences(info, bypass) == [
        "trainer.trainjob.runtime.info -> trainer.jobs.gang.volcano: a plugin is reached through its registry, "
        "trainer.jobs.gang",
        "trainer.trainjob.runtime.info -> trainer.trainjob.policies.torch: a plugin is reached through its "
        "registry, trainer.trainjob.policies",
    ]
    sdk = ROOT / "trainer" / "client" / "aio.py"
    assert order_offences(sdk, "from trainer.jobs.conditions import is_true\n") == [
        "trainer.client.aio -> trainer.jobs.conditions: the SDK, CLI and dashboard import only api and "
        "trainer.framework"
    ]


def print_graph() -> None:
    """Print the graph at package and sub-package depth, lowest first (``python -m tests.test_layers``)."""
    g = graph()
    print("packages:")
    for pkg in TopologicalSorter(g).static_order():
        print(f"  L{layer_of(pkg)} {pkg} -> {', '.join(sorted(g.get(pkg, ()))) or '-'}")
    for package, parts in ORDER.items():
        print(f"{package}:")
        sub = graph_at(len(package.split(".")) + 1)
        for i, entry in enumerate(parts):
            for part in entry:
                deps = sorted(d.split(".")[-1] for d in sub.get(f"{package}.{part}", ()) if d.startswith(package + "."))
                print(f"  {i} {part} -> {', '.join(deps) or '-'}")


if __name__ == "__main__":
    print_graph()
