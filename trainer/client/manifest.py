"""Reading manifests: a dict, a YAML/JSON file, a YAML string or typed :mod:`trainer.api` objects, into
validated :mod:`trainer.api` models.

Validation is the API's own pydantic models, plus one check the models leave to the CRD schema:
fields the API does not know (a typo, or an upstream field this operator does not implement, such
as ``spec.activeDeadlineSeconds``) are an error here instead of being pruned silently by the
apiserver.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import yaml
from pydantic import BaseModel, ValidationError

from trainer.api.base import Model, ObjectMeta
from trainer.api.kinds import Resource, resource_of
from trainer.api.kubeflow_v2beta1 import MPIJob
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from trainer.client.errors import ManifestError
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

Manifest: TypeAlias = TrainJob | TrainingRuntime | ClusterTrainingRuntime | MPIJob
"""An object the client can create or apply."""
Source: TypeAlias = Mapping[str, Any] | str | os.PathLike[str] | Model | Sequence[Mapping[str, Any] | Model]
"""What :func:`load_manifests` reads: one object (a mapping or an :mod:`trainer.api` model), several in a
list, a path to a YAML/JSON file (``-`` is not special here), or YAML text."""

KINDS: dict[str, type[Manifest]] = {
    TrainJob.KIND: TrainJob,
    TrainingRuntime.KIND: TrainingRuntime,
    ClusterTrainingRuntime.KIND: ClusterTrainingRuntime,
    MPIJob.KIND: MPIJob,
}
MAX_ERRORS = 3


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _looks_like_path(text: str) -> bool:
    """A string is taken as a path unless it spans lines or reads as a YAML/JSON mapping."""
    stripped = text.strip()
    return bool(stripped) and "\n" not in stripped and not stripped.startswith(("{", "[")) and ": " not in stripped


def yaml_error_text(error: yaml.YAMLError) -> str:
    """A YAML syntax error on one line: ``invalid YAML at line 1, column 8: <problem>``."""
    mark = getattr(error, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{at}: {_one_line(getattr(error, 'problem', None) or str(error))}"


def read_yaml(text: str, where: str) -> list[tuple[str, Any]]:
    """The documents of a YAML (or JSON) text, each with its place (``<where>#<n>`` when there are
    several); empty documents are skipped. Raises :class:`ManifestError` on a syntax error."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise ManifestError(f"{where}: {yaml_error_text(e)}") from None
    if len(docs) == 1:
        return [(where, docs[0])]
    return [(f"{where}#{i + 1}", d) for i, d in enumerate(docs)]


def read_file(path: str | os.PathLike[str]) -> list[tuple[str, Any]]:
    """The documents of a YAML/JSON file. Raises :class:`ManifestError` when it cannot be read."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ManifestError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ManifestError(f"{p}: is a directory, not a manifest file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"{p}: cannot read: {_one_line(getattr(e, 'strerror', None) or str(e))}") from None
    docs = read_yaml(text, str(p))
    if not docs:
        raise ManifestError(f"{p}: contains no object")
    return docs


def _documents(source: Source) -> list[tuple[str, Any]]:
    if isinstance(source, Model):
        return [("<object>", source)]
    if isinstance(source, Mapping):
        return [("<object>", dict(source))]
    if isinstance(source, os.PathLike):
        return read_file(source)
    if isinstance(source, str):
        if _looks_like_path(source):
            return read_file(source)
        docs = read_yaml(source, "<string>")
        if not docs:
            raise ManifestError("<string>: contains no object")
        return docs
    if isinstance(source, Sequence):
        return [(f"<object>#{i + 1}", d) for i, d in enumerate(source)]
    raise ManifestError(f"cannot read a manifest from {type(source).__name__}")


def format_validation_error(err: ValidationError) -> str:
    """The first :data:`MAX_ERRORS` errors as ``path: message`` joined by ``; ``."""
    items = []
    for e in err.errors()[:MAX_ERRORS]:
        loc = ".".join(str(p) for p in e["loc"])
        items.append(f"{loc}: {e['msg']}" if loc else str(e["msg"]))
    more = len(err.errors()) - MAX_ERRORS
    if more > 0:
        items.append(f"and {more} more")
    return _one_line("; ".join(items))


def unknown_fields(model: BaseModel, path: str = "") -> list[str]:
    """Dotted paths of the fields in ``model`` (recursively) that its class does not declare.
    ``metadata`` and ``status`` are not checked: they hold server-managed fields the models omit."""
    found = [f"{path}{k}" for k in (model.model_extra or {})]
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        key = info.alias or name
        if isinstance(value, ObjectMeta) or key == "status":
            continue
        children = value if isinstance(value, list) else [value]
        for i, child in enumerate(children):
            if isinstance(child, BaseModel):
                index = f"[{i}]" if isinstance(value, list) else ""
                found += unknown_fields(child, f"{path}{key}{index}.")
    return found


def parse_manifest(doc: Any, where: str = "<object>") -> Manifest:
    """Validate one document as the :mod:`trainer.api` model its ``kind`` names.

    An object may have ``metadata.generateName`` instead of ``metadata.name`` (only create
    accepts it: :func:`require_names`).

    Raises :class:`ManifestError` (one line, naming ``where`` and the object) when it is not a
    mapping, has an unsupported ``apiVersion``/``kind``, neither ``metadata.name`` nor
    ``metadata.generateName``, fails validation or has unknown fields.
    """
    if isinstance(doc, Model):
        doc = wire_dict(doc)  # re-validate: a model built in Python may hold anything
    if not isinstance(doc, Mapping):
        raise ManifestError(f"{where}: expected an object (a YAML mapping), got {type(doc).__name__}")
    kind = doc.get("kind")
    if kind not in KINDS:
        expected = ", ".join(f"{k} ({m.model_fields['api_version'].default})" for k, m in KINDS.items())
        got = f"kind {kind!r}" if kind else "no kind"
        raise ManifestError(f"{where}: {got} is not supported; expected one of {expected}")
    api_version = KINDS[str(kind)].model_fields["api_version"].default
    if doc.get("apiVersion") != api_version:
        raise ManifestError(f"{where}: {kind} must have apiVersion {api_version}, not {doc.get('apiVersion')!r}")
    name = meta(doc).name or meta(doc).data.get("generateName")
    what = f"{kind} {name!r}" if name else str(kind)
    if not name:
        raise ManifestError(f"{where}: {what} has no metadata.name (nor metadata.generateName)")
    try:
        obj = KINDS[str(kind)].model_validate(dict(doc))
    except ValidationError as e:
        raise ManifestError(f"{where}: {what} is invalid: {format_validation_error(e)}") from None
    unknown = unknown_fields(obj)
    if unknown:
        raise ManifestError(f"{where}: {what} has fields this API does not know: {', '.join(unknown)}")
    return obj


def manifest_resource(obj: Manifest) -> Resource:
    """Where the object's kind lives (:func:`trainer.api.kinds.resource_of`): group, version, plural, scope."""
    return resource_of({"apiVersion": obj.api_version, "kind": obj.kind})


def generate_name(obj: Manifest) -> str | None:
    """The object's ``metadata.generateName`` (a prefix the apiserver completes into a name on
    create), None when it has none."""
    value = (obj.metadata.model_extra or {}).get("generateName")
    return str(value) if value else None


def require_names(objs: Sequence[Manifest], verb: str) -> None:
    """Check that every object has a ``metadata.name``: only create completes a
    ``metadata.generateName``. Raises :class:`ManifestError` naming the first that has none and
    ``verb``, the operation that needs one (``apply``, ``delete``)."""
    for obj in objs:
        if not obj.metadata.name:
            raise ManifestError(
                f"{obj.kind} with metadata.generateName {generate_name(obj)!r} has no metadata.name: "
                f"{verb} needs one (create completes a generateName)"
            )


def load_manifests(source: Source) -> list[Manifest]:
    """Every object in ``source`` (see :data:`Source`), validated. Raises :class:`ManifestError`."""
    return [parse_manifest(doc, where) for where, doc in _documents(source)]


def load_trainjob(source: Source) -> TrainJob:
    """The single TrainJob in ``source``. Raises :class:`ManifestError` when ``source`` holds
    anything else or more than one object."""
    objs = load_manifests(source)
    if len(objs) != 1 or not isinstance(objs[0], TrainJob):
        kinds = ", ".join(o.kind for o in objs)
        raise ManifestError(f"expected exactly one TrainJob, got: {kinds}")
    return objs[0]


def wire_dict(obj: Model) -> JSON:
    """The object as the client sends it: only the fields that were given (so the apiserver's
    defaults, and other managers' fields, are not claimed), camelCase, with apiVersion and kind."""
    out: JSON = obj.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")
    out["apiVersion"] = getattr(obj, "api_version", out.get("apiVersion"))
    out["kind"] = getattr(obj, "kind", out.get("kind"))
    return out


def with_namespace(obj: JSON, namespace: str | None) -> JSON:
    """A copy of ``obj`` placed in ``namespace`` (unchanged when ``namespace`` is None)."""
    if namespace is None:
        return obj
    return {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": namespace}}
