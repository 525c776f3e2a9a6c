"""The generic layers stay generic: the manager, the controller declarations, the reconciler and the
I/O shell import no concrete kind, runtime, builder or status server; only ``trainer/wiring.py`` (and
the command line) names the kinds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERIC = [
    "trainer/manager.py",
    "trainer/controller.py",
    "trainer/reconciler/reconcile.py",
    "trainer/reconciler/child_writer.py",
    "trainer/reconciler/status_writer.py",
    "trainer/reconciler/own_writes.py",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "trainer" / "kube").glob("*.py")),
]
CONCRETE = (
    "trainer.trainjob",
    "trainer.mpijob",
    "trainer.runtime",
    "trainer.builders",
    "trainer.statusserver",
    "trainer.wiring",
    "trainer.webhook",
)


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (``from X import Y`` as ``X`` and ``X.Y``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return out


@pytest.mark.parametrize("module", GENERIC)
def test_a_generic_module_imports_no_concrete_kind(module: str) -> None:
    concrete = sorted(m for m in imported(ROOT / module) if m.startswith(CONCRETE))
    assert not concrete, f"{module} imports {concrete}: name the kinds in trainer/wiring.py instead"


def test_the_check_sees_an_import_of_a_kind() -> None:
    assert "trainer.trainjob.controller" in imported(ROOT / "trainer" / "wiring.py")
