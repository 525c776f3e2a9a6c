"""Building blocks shared by every API module: the model base class and Kubernetes core types.

Field descriptions come from attribute docstrings, so the same text serves Python users and
``kubectl explain`` (the CRD generator in :mod:`trainer.api.crd` reads them from the source and copies
them into the schemas; pydantic does not read them, which would cost every process that imports the
models a parse of their source). A model's validator is built when it is first used
(``defer_build``): a process builds those of the models it validates only.

Core Kubernetes types that the operator only passes through (a Pod template, an affinity, a
volume) are kept as plain JSON objects (:data:`KubeObject`): the apiserver already validates them
when the operator creates the Pods' owners, and their schemas are marked
``x-kubernetes-preserve-unknown-fields`` so that nothing a user writes is pruned.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class OpaqueObject:
    """Marker: a field holding a Kubernetes object whose schema the apiserver checks elsewhere."""


class IntOrString:
    """Marker: a field that holds an integer or a string (``intstr.IntOrString``)."""


KubeObject = Annotated[dict[str, Any], OpaqueObject()]
"""A Kubernetes object kept as JSON (e.g. a ``corev1.Affinity``); never pruned."""


class QuantityValue(IntOrString):
    """Marker: a ``resource.Quantity``, an integer or a string of the Quantity grammar."""


QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""The ``resource.Quantity`` grammar as a schema pattern, as controller-gen writes it in upstream's CRDs
(kubeflow/trainer ``manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml``)."""


def quantity_schema() -> dict[str, Any]:
    """The structural schema of a ``resource.Quantity``: ``"lots"`` is refused by the apiserver (422)."""
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


IntOrStr = Annotated[int | str, IntOrString()]
"""``intstr.IntOrString``: the CRD schema carries ``x-kubernetes-int-or-string: true``."""

Quantity = Annotated[int | str, QuantityValue()]
"""``resource.Quantity`` such as ``"500m"`` or ``"4Gi"``; the CRD schema checks its grammar."""


def resource_requirements(*rules: tuple[str, str]) -> Any:
    """Field marker for a ``corev1.ResourceRequirements`` kept as JSON (:data:`KubeObject`) whose
    ``limits`` and ``requests`` the CRD schema types as maps of :func:`quantity_schema`, as upstream's
    CRDs do: a quantity such as ``cpu: lots`` is refused when the object is written; its ``claims`` are
    typed as ``corev1.ResourceClaim`` (``name``, ``request``), so a rule may name them. ``rules``: CEL
    ``(rule, message)`` pairs on the whole object."""

    def resource_list(doc: str) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": quantity_schema(), "description": doc}

    claim = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Name of one of the Pod's resourceClaims."},
            "request": {"type": "string", "description": "Only this request of the claim, when set."},
        },
        "required": ["name"],
    }
    extra: dict[str, Any] = {
        "properties": {
            "limits": resource_list("The maximum amount of each compute resource, by resource name."),
            "requests": resource_list("The minimum amount of each compute resource, by resource name."),
            "claims": {
                "type": "array",
                "items": claim,
                "description": "DRA claims of the Pod (spec.resourceClaims) the container uses, by name.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        }
    }
    if rules:
        extra["x-kubernetes-validations"] = [{"rule": r, "message": m} for r, m in rules]
    return Field(default=None, json_schema_extra=extra)


def list_map(*keys: str) -> Any:
    """Field marker for a list that merges by ``keys`` (``+listType=map``, ``+listMapKey=...``)."""
    return Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)},
    )


def atomic_list() -> Any:
    """Field marker for a list replaced whole on apply (``+listType=atomic``)."""
    return Field(default=None, json_schema_extra={"x-kubernetes-list-type": "atomic"})


def cel(*rules: tuple[str, str], default: Any = ...) -> Any:
    """Field marker carrying CEL validation rules as ``(rule, message)`` pairs; required unless
    ``default`` is given."""
    return Field(
        default=default,
        json_schema_extra={"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]},
    )


def refused(message: str) -> Any:
    """Field marker for an upstream field this operator does not implement: the CRD keeps the field
    (spelled as upstream, so nothing is pruned) and the apiserver refuses any object that sets it,
    with ``message`` (which names the field and what to use instead)."""
    return Field(default=None, json_schema_extra={"x-kubernetes-validations": [{"rule": "false", "message": message}]})


class Model(BaseModel):
    """Base of every API type: camelCase JSON names, docstrings as descriptions.

    Unknown fields are kept (``extra="allow"``) so that an object read from the apiserver and
    written back loses nothing; the CRD schema is what rejects unknown fields at admission.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        defer_build=True,
        extra="allow",
        serialize_by_alias=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The object as Kubernetes JSON: camelCase keys, unset fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class ObjectMeta(Model):
    """Standard object metadata (``metav1.ObjectMeta``), the fields the operator reads."""

    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    finalizers: list[str] | None = None


class EnvVar(Model):
    """An environment variable (``corev1.EnvVar``)."""

    name: str
    """Name of the environment variable."""
    value: str | None = None
    """Literal value of the variable."""
    value_from: KubeObject | None = None
    """Source of the value (``corev1.EnvVarSource``): fieldRef, secretKeyRef, configMapKeyRef..."""


class VolumeMount(Model):
    """A volume mounted into a container (``corev1.VolumeMount``)."""

    name: str
    """Name of the Pod volume to mount."""
    mount_path: str
    """Path inside the container."""
    read_only: bool | None = None
    """Mount read-only."""
    sub_path: str | None = None
    """Path within the volume to mount instead of its root."""
    mount_propagation: str | None = None
    """How mounts propagate between host and container."""
    sub_path_expr: str | None = None
    """Expanded path within the volume, may reference environment variables."""
    recursive_read_only: str | None = None
    """Whether read-only mounts are made recursively read-only."""


class LocalObjectReference(Model):
    """A reference to an object in the same namespace (``corev1.LocalObjectReference``)."""

    name: str
    """Name of the referenced object."""


class PodSchedulingGate(Model):
    """A Pod scheduling gate (``corev1.PodSchedulingGate``): the Pod stays unscheduled while it has one."""

    name: str
    """Name of the gate, e.g. ``kueue.x-k8s.io/topology``."""


class Condition(Model):
    """A status condition (``metav1.Condition``)."""

    type: str
    """Type of the condition, e.g. ``Complete``."""
    status: str
    """``True``, ``False`` or ``Unknown``."""
    reason: str = ""
    """A CamelCase word saying why the condition has this status."""
    message: str = ""
    """A human-readable explanation."""
    last_transition_time: str | None = None
    """When the status last changed (RFC 3339)."""
    observed_generation: int | None = None
    """The ``metadata.generation`` the condition was computed from."""
