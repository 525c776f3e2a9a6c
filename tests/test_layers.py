"""The layers import downward only: every import of every module under ``api/`` and ``trainer/`` (module
level, inside functions and under ``TYPE_CHECKING`` alike) names a module of its own package or of a lower
layer, and the graph of packages has no cycle.

Layers, lowest first (docs/internals.md draws them):

- ``api``: the typed API, labels and reasons;
- ``trainer.framework``: kube client, caches, work queue, controller declarations, manager (knows no job);
- ``trainer.jobs``: what every job kind shares (reconcile, child and status writers, facts, gang schedulers);
- ``trainer.trainjob``, ``trainer.mpijob``: the kinds;
- ``trainer.webhook``, ``trainer.statusserver``: admission and progress, over the kinds;
- the entry points: ``trainer.main``, ``trainer.settings``, ``trainer.wiring``, ``trainer.cli``, ``trainer.rbac``,
  ``trainer.client``.
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
    ("api",),
    ("trainer.framework",),
    ("trainer.jobs",),
    ("trainer.trainjob", "trainer.mpijob"),
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
        yield from (n for n in names if n.split(".")[0] in ("api", "trainer"))


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
    return sorted(p for d in ("api", "trainer") for p in (ROOT / d).rglob("*.py"))


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
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("api", "trainer")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as e:
        failed.append(f"{name}: {e!r}")
print("\\n".join(failed))
"""


def test_every_module_imports_first() -> None:
    """Each module imports in an interpreter that has loaded nothing of the project yet, whatever the
    order the process imports them in (an import cycle inside a package shows only then)."""
    import subprocess
    import sys

    names = [module_of(p) for p in sources() if p.name != "__main__.py"]
    out = subprocess.run([sys.executable, "-c", IMPORT_EACH, *names], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert not out.stdout.strip(), out.stdout


def print_graph() -> None:
    """Print the package graph, lowest layer first (``python -m tests.test_layers``)."""
    g = graph()
    for pkg in TopologicalSorter(g).static_order():
        print(f"L{layer_of(pkg)} {pkg} -> {', '.join(sorted(g.get(pkg, ()))) or '-'}")


if __name__ == "__main__":
    print_graph()
