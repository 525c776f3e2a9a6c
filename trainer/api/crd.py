"""Generate CustomResourceDefinitions from the pydantic API models.

The models in :mod:`trainer.api` are the single source of the schemas: ``python -m trainer.api.crd`` writes
``config/crd/bases/<group>_<plural>.yaml`` (``--check`` exits 1 when a checked-in file is stale).
Schemas are structural (OpenAPI v3 as the apiserver requires): every property typed, no ``$ref``;
descriptions come from the attribute docstrings (:func:`attribute_docs`); defaults, enums, bounds, list-map keys and CEL
rules come from the field declarations.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import itertools
import sys
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from trainer.api import kubeflow_v2beta1 as kv2
from trainer.api import optimizationjob as opt
from trainer.api import trainer_v1alpha1 as tv1
from trainer.api.base import IntOrString, OpaqueObject, QuantityValue, quantity_schema
from trainer.api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    MPIJOBS,
    OPTIMIZATION_JOBS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    Resource,
)

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd" / "bases"


@dataclass(frozen=True)
class CRDSpec:
    """What a CRD needs besides the schema: names, scope and printer columns."""

    model: type[BaseModel]
    resource: Resource
    """Group, version, kind, plural and scope, from :mod:`trainer.api.kinds`."""
    short_names: list[str] = field(default_factory=list)
    printer_columns: list[dict[str, Any]] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    validations: list[dict[str, Any]] = field(default_factory=list)
    """CEL rules on the whole object (``x-kubernetes-validations`` of the root schema)."""
    scale: dict[str, Any] | None = None
    """The ``/scale`` subresource's paths, if it serves one."""


AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}

CRDS: list[CRDSpec] = [
    CRDSpec(
        tv1.TrainJob,
        TRAINJOBS,
        short_names=["tj"],
        categories=["kubeflow", "trainer"],
        validations=tv1.TRAINJOB_RULES,
        scale=tv1.TRAINJOB_SCALE,
        printer_columns=[
            # The first True condition (kubeflow/trainer#3963): a resumed job's Suspended=False is not its state.
            {"name": "State", "type": "string", "jsonPath": '.status.conditions[?(@.status=="True")].type'},
            {"name": "Runtime", "type": "string", "jsonPath": ".spec.runtimeRef.name"},
            {"name": "Nodes", "type": "integer", "jsonPath": ".spec.trainer.numNodes"},
            {"name": "Queue", "type": "string", "jsonPath": r".metadata.labels.kueue\.x-k8s\.io/queue-name"},
            {
                "name": "Volcano-Queue",
                "type": "string",
                "priority": 1,
                "jsonPath": r".metadata.annotations.scheduling\.volcano\.sh/queue-name",
            },
            {"name": "Suspended", "type": "boolean", "jsonPath": ".spec.suspend"},
            {"name": "Restarts", "type": "integer", "jsonPath": ".status.restarts"},
            {
                "name": "Progress",
                "type": "integer",
                "description": "percent complete, as the trainer last reported (status.trainerStatus)",
                "jsonPath": ".status.trainerStatus.progressPercentage",
            },
            {
                "name": "ETA",
                "type": "integer",
                "description": "seconds of training left, as the trainer last reported (status.trainerStatus)",
                "jsonPath": ".status.trainerStatus.estimatedRemainingSeconds",
            },
            AGE,
        ],
    ),
    CRDSpec(
        tv1.TrainingRuntime,
        TRAINING_RUNTIMES,
        short_names=["tr"],
        categories=["kubeflow", "trainer"],
        printer_columns=[AGE],
    ),
    CRDSpec(
        tv1.ClusterTrainingRuntime,
        CLUSTER_TRAINING_RUNTIMES,
        short_names=["ctr"],
        categories=["kubeflow", "trainer"],
        printer_columns=[AGE],
    ),
    CRDSpec(
        kv2.MPIJob,
        MPIJOBS,
        short_names=["mpij"],
        categories=["kubeflow"],
        printer_columns=[
            {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
            {"name": "Workers", "type": "integer", "jsonPath": ".spec.mpiReplicaSpecs.Worker.replicas"},
            {"name": "Queue", "type": "string", "jsonPath": ".spec.runPolicy.schedulingPolicy.queue"},
            AGE,
        ],
    ),
    CRDSpec(
        opt.OptimizationJob,
        OPTIMIZATION_JOBS,
        short_names=["optj"],
        categories=["kubeflow", "trainer"],
        # Upstream's CRD has no printer columns; these read only upstream's fields and this status's counts.
        printer_columns=[
            {"name": "Complete", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Complete")].status'},
            {"name": "Failed", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Failed")].status'},
            {"name": "Trials", "type": "integer", "jsonPath": ".spec.numTrials"},
            {"name": "Parallel", "type": "integer", "jsonPath": ".spec.parallelTrials"},
            {"name": "Succeeded", "type": "integer", "jsonPath": ".status.trialsSucceeded"},
            {"name": "Best", "type": "string", "jsonPath": ".status.result.trainJobName"},
            AGE,
        ],
    ),
]

_TOP_LEVEL = {"api_version", "kind", "metadata"}


def _markers(annotation: Any) -> tuple[Any, list[Any]]:
    """Strip ``Annotated`` and ``Optional`` from a type: (bare type, metadata found on the way)."""
    found: list[Any] = []
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *meta = get_args(annotation)
            found.extend(meta)
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if any(isinstance(m, IntOrString) for m in found) or _is_int_or_str(args):
                return int | str, found
            if len(args) != 1:
                raise TypeError(f"unions other than Optional are not structural: {annotation}")
            annotation = args[0]
        else:
            return annotation, found


def _is_int_or_str(args: list[Any]) -> bool:
    stripped = {get_args(a)[0] if get_origin(a) is Annotated else a for a in args}
    return stripped == {int, str}


@functools.cache
def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> the docstring under its annotation (PEP 257's attribute docstrings, the text
    pydantic's ``use_attribute_docstrings`` reads), in ``model``'s own source and its bases' (the
    nearest wins), each cleaned as ``inspect.cleandoc`` does; read once per model (a nested model's
    schema is made wherever it is used). Raises ``OSError`` when a model's source cannot be read."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not issubclass(cls, BaseModel) or cls is BaseModel:
            continue
        (node,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
        body = node.body if isinstance(node, ast.ClassDef) else []
        for stmt, after in itertools.pairwise(body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _text(doc: str) -> str:
    """A docstring as one line of ``kubectl explain`` text."""
    return " ".join(doc.replace("``", "`").split())


def type_schema(annotation: Any, extra: list[Any] | None = None) -> dict[str, Any]:
    """The structural schema of a Python type. Raises ``TypeError`` for a type with none."""
    bare, meta = _markers(annotation)
    meta = [*(extra or []), *meta]
    if any(isinstance(m, QuantityValue) for m in meta):
        return quantity_schema()
    if any(isinstance(m, IntOrString) for m in meta) or bare == (int | str):
        return {"x-kubernetes-int-or-string": True}
    if any(isinstance(m, OpaqueObject) for m in meta):
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    origin = get_origin(bare)
    if origin is Literal:
        return {"type": "string", "enum": list(get_args(bare))}
    if origin is list:
        (item,) = get_args(bare)
        return {"type": "array", "items": type_schema(item)}
    if origin is dict:
        _, value = get_args(bare)
        return {"type": "object", "additionalProperties": type_schema(value)}
    if isinstance(bare, type) and issubclass(bare, BaseModel):
        return model_schema(bare)
    scalar = {str: {"type": "string"}, bool: {"type": "boolean"}, int: {"type": "integer"}}
    if bare in scalar:
        out = dict(scalar[bare])
        if bare is int:
            out["format"] = "int32"
        return out
    raise TypeError(f"no structural schema for {annotation!r}")


def field_schema(info: FieldInfo, doc: str | None = None) -> dict[str, Any]:
    """Schema of one model field: its type plus description (``Field(description=...)``, else ``doc``,
    its attribute docstring), default, bounds and extensions."""
    schema = type_schema(info.annotation, list(info.metadata))
    if info.description or doc:
        schema["description"] = _text(info.description or doc or "")
    default = info.default
    if default is not PydanticUndefined and default is not None and isinstance(default, str | int | bool):
        schema["default"] = default
    for m in info.metadata:
        if isinstance(m, at.Ge):
            schema["minimum"] = m.ge
        elif isinstance(m, at.Le):
            schema["maximum"] = m.le
        elif isinstance(m, at.MinLen):
            schema["minItems" if schema.get("type") == "array" else "minLength"] = m.min_length
        elif isinstance(m, at.MaxLen):
            schema["maxItems" if schema.get("type") == "array" else "maxLength"] = m.max_length
        elif isinstance(getattr(m, "pattern", None), str):  # Field(pattern=...)
            schema["pattern"] = m.pattern
    if isinstance(info.json_schema_extra, dict):
        schema.update(info.json_schema_extra)
    items = schema.get("items") or {}
    if schema.get("x-kubernetes-list-map-keys") and items.get("x-kubernetes-preserve-unknown-fields"):
        # An opaque item still has to declare its map keys, as required strings.
        keys = schema["x-kubernetes-list-map-keys"]
        items["properties"] = {k: {"type": "string"} for k in keys}
        items["required"] = list(keys)
    return schema


def model_schema(model: type[BaseModel], top_level: bool = False) -> dict[str, Any]:
    """The structural schema of a model; ``top_level`` adds apiVersion/kind/metadata as CRDs do."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    docs = attribute_docs(model)
    for name, info in model.model_fields.items():
        alias = info.alias or name
        if top_level and name in _TOP_LEVEL:
            properties[alias] = {"type": "object"} if name == "metadata" else {"type": "string"}
            continue
        properties[alias] = field_schema(info, docs.get(name))
        if info.is_required():
            required.append(alias)
    schema: dict[str, Any] = {"type": "object"}
    if model.__doc__:
        schema["description"] = _text(model.__doc__)
    if properties:  # the apiserver drops an empty map, which a later apply would see as a change
        schema["properties"] = properties
    if required:
        schema["required"] = required
    return schema


def crd(spec: CRDSpec) -> dict[str, Any]:
    """The CustomResourceDefinition object for one kind."""
    kind: str = spec.model.model_fields["kind"].default
    schema = model_schema(spec.model, top_level=True)
    if spec.validations:
        schema["x-kubernetes-validations"] = spec.validations
    subresources: dict[str, Any] = {"status": {}} if "status" in spec.model.model_fields else {}
    if spec.scale is not None:
        subresources["scale"] = spec.scale
    version: dict[str, Any] = {
        "name": spec.resource.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "subresources": subresources,
        "additionalPrinterColumns": spec.printer_columns,
    }
    if not version["subresources"]:
        del version["subresources"]
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": spec.resource.plural,
        "singular": spec.resource.kind.lower(),
    }
    if spec.short_names:
        names["shortNames"] = spec.short_names
    if spec.categories:
        names["categories"] = spec.categories
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{spec.resource.plural}.{spec.resource.group}"},
        "spec": {"group": spec.resource.group, "names": names, "scope": spec.resource.scope, "versions": [version]},
    }


def render(spec: CRDSpec) -> str:
    """The YAML text written for one CRD."""
    header = "# Generated by `python -m trainer.api.crd` from the models in trainer/api/. Do not edit.\n"
    return header + yaml.safe_dump(crd(spec), sort_keys=False, width=100)


def path_of(spec: CRDSpec) -> Path:
    """Where the CRD of ``spec`` is checked in."""
    return CRD_DIR / f"{spec.resource.group}_{spec.resource.plural}.yaml"


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` verify) every CRD. Returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a checked-in CRD is stale")
    args = parser.parse_args(argv)
    stale = []
    CRD_DIR.mkdir(parents=True, exist_ok=True)
    for spec in CRDS:
        path, text = path_of(spec), render(spec)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
    if stale:
        print("stale CRDs (run `python -m trainer.api.crd`): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
