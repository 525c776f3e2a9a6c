"""Every attribute of an API model (``trainer/api/``) is named by the operator's code (``trainer/``), or is in
:data:`ALLOWED` with the reason nothing names it: no field is stored and ignored.

"Named" is strict: an identifier (a name, an attribute, a keyword argument) spelled as the attribute, or a
string constant that is exactly its JSON name (``"minCount"``) or its attribute name; docstrings and comments
do not count. A name used for something else (``apiGroup`` of an owner reference) passes as well: the
check finds fields nothing mentions, not wrong uses. A field reached through a generic path (a Pod
template kept as JSON, a patch dumped whole) is listed with the test that proves it arrives.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import pkgutil
from pathlib import Path

from pydantic import BaseModel

import trainer.api
from trainer.api.base import Model

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "trainer" / "api"
"""Where the models are: not counted as naming their own fields."""

ALLOWED: dict[str, str] = {
    # Passed through: an override's volume mount reaches the container whole
    # (tests/trainjob/test_override_fields.py::test_volume_mounts_merge_by_mount_path_with_every_field_of_a_mount).
    "VolumeMount.sub_path": "passed through in an override's volumeMounts entry, whole",
    "VolumeMount.sub_path_expr": "passed through in an override's volumeMounts entry, whole",
    "VolumeMount.mount_propagation": "passed through in an override's volumeMounts entry, whole",
    "VolumeMount.recursive_read_only": "passed through in an override's volumeMounts entry, whole",
    # Passed through: disruptionMode reaches the Workload and the PodGroup whole
    # (tests/jobs/test_workload_gang.py::
    #  test_constraints_disruption_mode_and_claims_reach_the_workload_and_the_pod_group).
    "DisruptionMode.single": "passed through in disruptionMode to the Workload's PodGroupTemplate and the PodGroup",
    # Output-only, not written on purpose: mpi-operator v0.8.2 declares it and writes it nowhere
    # (trainer/mpijob/controller.py status(); tests/mpijob/test_mpi_operator_parity.py).
    "MPIJobStatus.last_reconcile_time": "never written, as mpi-operator v0.8.2 (a write per reconcile loops)",
}
"""``<Model>.<attribute>`` -> why no code under ``trainer/`` names it."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants of ``tree`` that are docstrings (of a module, class or function)
    or attribute docstrings (a string statement right after an assignment)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or not body:
            continue
        first = _string(body[0])
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and first is not None:
            out.add(id(first))
        for before, after in itertools.pairwise(body):
            doc = _string(after)
            if isinstance(before, ast.Assign | ast.AnnAssign) and doc is not None:
                out.add(id(doc))
    return out


def _string(node: ast.AST) -> ast.Constant | None:
    """The string constant ``node`` is a statement of, or None."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return node.value
    return None


def names_in(paths: list[Path]) -> set[str]:
    """Every identifier and every non-docstring string constant of the Python files ``paths``."""
    out: set[str] = set()
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                out.add(node.id)
            elif isinstance(node, ast.Attribute):
                out.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                out.add(node.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                out.add(node.value)
    return out


def model_fields(models: list[type[BaseModel]]) -> dict[str, tuple[str, str]]:
    """``<Model>.<attribute>`` -> (attribute, JSON name) of the attributes each model declares itself."""
    out = {}
    for model in models:
        own = vars(model).get("__annotations__", {})
        for name, info in model.model_fields.items():
            if name in own:
                out[f"{model.__name__}.{name}"] = (name, info.alias or name)
    return out


def api_models() -> list[type[BaseModel]]:
    """Every :class:`~trainer.api.base.Model` declared in a module of ``trainer/api/``."""
    out: list[type[BaseModel]] = []
    for mod_info in pkgutil.iter_modules(trainer.api.__path__):
        module = importlib.import_module(f"trainer.api.{mod_info.name}")
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, Model) and obj.__module__ == module.__name__:
                out.append(obj)
    return out


def unnamed(fields: dict[str, tuple[str, str]], names: set[str]) -> list[str]:
    """The fields neither of whose names is in ``names``, sorted."""
    return sorted(key for key, (attr, alias) in fields.items() if attr not in names and alias not in names)


def test_every_api_field_is_named_by_the_operator_or_allowed_with_a_reason() -> None:
    fields = model_fields(api_models())
    missing = unnamed(fields, names_in(sorted(p for p in (ROOT / "trainer").rglob("*.py") if API not in p.parents)))
    assert [m for m in missing if m not in ALLOWED] == [], (
        "API fields that nothing under trainer/ names: implement them, refuse them at admission, or add them "
        "to ALLOWED with the reason (and the test that shows them passed through)"
    )
    stale = sorted(set(ALLOWED) - set(missing))
    assert stale == [], "ALLOWED entries that are no model field or are named by trainer/ now: remove them"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_check_finds_a_field_nothing_names(tmp_path: Path) -> None:
    class Probe(Model):
        spec_thing: int | None = None
        """An attribute docstring naming specThing does not count."""
        used: int | None = None

    code = tmp_path / "code.py"
    code.write_text('"""specThing, spec_thing in a docstring."""\n\n# spec_thing\nX = {"used": 1}\n')
    fields = model_fields([Probe])
    assert unnamed(fields, names_in([code])) == ["Probe.spec_thing"]
    code.write_text('X = {"specThing": 1, "used": 1}\n')
    assert unnamed(fields, names_in([code])) == []
    code.write_text("def f(o):\n    return o.spec_thing, o.used\n")
    assert unnamed(fields, names_in([code])) == []
