"""A read-only view over an object's ``metadata`` (k8s.io/apimachinery ``ObjectMeta``), the one way the
operator reads it from JSON.

``meta(obj).name`` reads what ``(obj.get("metadata") or {}).get("name")`` did: an object without
metadata, or whose metadata is None or not a mapping, has none of it. Scalars come back as stored
(None when unset; each caller keeps its own default, e.g. ``meta(obj).uid or ""``); labels,
annotations and owner references come back empty when unset. The view copies nothing: it reads the
object's own dict, so it never goes stale and costs one allocation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.framework.json_codec import JSON


class Meta:
    """The metadata of one object (JSON): see the module docstring."""

    __slots__ = ("data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        """The metadata itself (empty when the object has none)."""

    @property
    def name(self) -> str | None:
        value: str | None = self.data.get("name")
        return value

    @property
    def namespace(self) -> str | None:
        value: str | None = self.data.get("namespace")
        return value

    @property
    def uid(self) -> str | None:
        value: str | None = self.data.get("uid")
        return value

    @property
    def resource_version(self) -> str | None:
        """``resourceVersion``."""
        value: str | None = self.data.get("resourceVersion")
        return value

    @property
    def generation(self) -> int | None:
        value: int | None = self.data.get("generation")
        return value

    @property
    def deletion(self) -> str | None:
        """``deletionTimestamp``: set once the object is being deleted."""
        value: str | None = self.data.get("deletionTimestamp")
        return value

    @property
    def creation_timestamp(self) -> str | None:
        """``creationTimestamp``."""
        value: str | None = self.data.get("creationTimestamp")
        return value

    @property
    def labels(self) -> dict[str, str]:
        """The labels (empty when unset)."""
        value: dict[str, str] = self.data.get("labels") or {}
        return value

    @property
    def annotations(self) -> dict[str, str]:
        """The annotations (empty when unset)."""
        value: dict[str, str] = self.data.get("annotations") or {}
        return value

    @property
    def owner_references(self) -> list[JSON]:
        """``ownerReferences`` (empty when unset)."""
        value: list[JSON] = self.data.get("ownerReferences") or []
        return value

    @property
    def managed_fields(self) -> list[JSON] | None:
        """``managedFields`` as stored (None when unset)."""
        value: list[JSON] | None = self.data.get("managedFields")
        return value


_NONE: Mapping[str, Any] = {}


def meta(obj: Mapping[str, Any] | None) -> Meta:
    """The metadata of ``obj`` (JSON; None or an object without a metadata mapping has an empty one)."""
    data = obj.get("metadata") if obj is not None else None
    if type(data) is dict:  # the common case, without the slower check against the Mapping ABC
        return Meta(data)
    return Meta(data if isinstance(data, Mapping) else _NONE)
